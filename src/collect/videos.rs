//! The video folder `lfs collect --out` writes: per episode a lossless video
//! `out/<task>/<episode:05>.mkv` and its sidecar `.json`, both to temporary names and renamed,
//! the sidecar last (its presence marks the episode complete).

use std::fs;
use std::path::{Path, PathBuf};

use super::{check_settings, read_sidecar, sidecar_path, CollectConfig, EpisodeSidecar, Sink};
use crate::env::Task;
use crate::fsutil::{self, FileLock};
use crate::video::{write_lossless_video, VIDEO_CODEC};
use crate::{Error, Result};

/// Where episode `episode` of `task` lives: `out/<task>/<episode:05>.mkv` and its `.json`.
pub fn episode_paths(out_dir: &Path, task: Task, episode: usize) -> (PathBuf, PathBuf) {
    let video = out_dir.join(task.name()).join(format!("{episode:05}.mkv"));
    let sidecar = sidecar_path(&video);
    (video, sidecar)
}

/// A video folder claimed by this run.
pub struct VideoFolder {
    config: CollectConfig,
    _claim: FileLock,
}

impl VideoFolder {
    pub fn open(config: &CollectConfig) -> Result<Self> {
        fs::create_dir_all(&config.out_dir).map_err(|e| Error::checkpoint(&config.out_dir, e.to_string()))?;
        let claim = fsutil::claim_dir(&config.out_dir, "collect")?;
        Ok(Self {
            config: config.clone(),
            _claim: claim,
        })
    }
}

impl Sink for VideoFolder {
    /// An episode from an earlier run counts as done when its sidecar and video exist. A
    /// sidecar without the per-frame states this version records (an older lfs) is refused.
    fn is_complete(&self, task: Task, episode: usize) -> Result<bool> {
        let (video, sidecar_path) = episode_paths(&self.config.out_dir, task, episode);
        if !sidecar_path.exists() || !video.exists() {
            return Ok(false);
        }
        let sidecar = read_sidecar(&sidecar_path)?;
        check_settings(&self.config, task, &sidecar, &sidecar_path.display().to_string())?;
        Ok(true)
    }

    fn codec(&self) -> &'static str {
        VIDEO_CODEC
    }

    /// Writes the video, then the sidecar.
    fn write(&mut self, sidecar: EpisodeSidecar, frames: Vec<Vec<u8>>) -> Result<PathBuf> {
        let (video, sidecar_path) = episode_paths(&self.config.out_dir, sidecar.task, sidecar.episode);
        fsutil::ensure_parent(&video)?;
        let tmp = fsutil::temp_path(&video);
        let written = write_lossless_video(&tmp, &frames, sidecar.frame_seconds)
            .and_then(|()| fsutil::commit_temp(&tmp, &video).map_err(Error::from));
        if let Err(e) = written {
            let _ = fs::remove_file(&tmp);
            return Err(e);
        }
        sidecar.write(&sidecar_path)?;
        Ok(video)
    }

    fn finish(self: Box<Self>) -> Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collect::{read_sidecar, CollectFormat, SOURCE};
    use crate::env::RenderQuality;

    fn config(out_dir: &Path) -> CollectConfig {
        CollectConfig {
            tasks: vec![Task::CartpoleSwingup],
            episodes: 1,
            max_frames: 2,
            out_dir: out_dir.to_path_buf(),
            format: CollectFormat::Videos,
            workers: 1,
            seed: 0,
            action_repeat: 2,
            render_quality: RenderQuality::Fast,
            python: PathBuf::from("python"),
        }
    }

    /// A two-frame cartpole sidecar as this version writes it.
    fn sidecar() -> EpisodeSidecar {
        EpisodeSidecar {
            task: Task::CartpoleSwingup,
            seed: 0,
            action_repeat: 2,
            render_quality: RenderQuality::Fast,
            camera: "0".into(),
            num_frames: 2,
            actions: vec![vec![0.5]],
            rewards: vec![0.1],
            source: SOURCE.into(),
            lfs_version: env!("CARGO_PKG_VERSION").into(),
            episode: 0,
            max_frames: 2,
            episode_ended: false,
            frame_seconds: 0.02,
            codec: VIDEO_CODEC.into(),
            mujoco: "3.17.0".into(),
            dm_control: "1.0.50".into(),
            state_names: vec!["position[0]".into(), "velocity[0]".into()],
            states: vec![vec![0.0, 1.0], vec![0.25, -0.5]],
        }
    }

    /// A sidecar with states is resumed into; one an older lfs wrote (no `state_names`, no
    /// `states`) still reads, but a run that records states refuses its folder by name.
    #[test]
    fn older_sidecar_without_states_reads_but_is_not_resumed_into() {
        let dir = tempfile::tempdir().expect("temp dir");
        let cfg = config(dir.path());
        let folder = VideoFolder::open(&cfg).expect("open");
        let (video, sidecar_path) = episode_paths(dir.path(), Task::CartpoleSwingup, 0);
        fsutil::ensure_parent(&video).expect("task folder");
        fs::write(&video, b"video").expect("write video");
        sidecar().write(&sidecar_path).expect("write sidecar");
        assert!(read_sidecar(&sidecar_path).expect("readable").has_states());
        assert!(folder.is_complete(Task::CartpoleSwingup, 0).expect("resumable"));

        let mut older = serde_json::to_value(sidecar()).expect("to json");
        let fields = older.as_object_mut().expect("an object");
        fields.remove("state_names");
        fields.remove("states");
        fs::write(&sidecar_path, serde_json::to_vec(&older).expect("json")).expect("write sidecar");
        let read = read_sidecar(&sidecar_path).expect("an older sidecar still reads");
        assert!(read.state_names.is_empty() && read.states.is_empty() && !read.has_states());
        let err = folder
            .is_complete(Task::CartpoleSwingup, 0)
            .expect_err("refused")
            .to_string();
        assert!(
            err.contains(&sidecar_path.display().to_string())
                && err.contains("no per-frame states")
                && err.contains("another --out"),
            "{err}"
        );
    }
}
