//! The episode sidecar: `<episode>.json` beside each video `lfs collect` writes, with what is
//! needed to replay or label the episode. [`EpisodeSidecar`] is its one typed form: collect
//! writes and re-reads it whole; `lfs ingest` keeps any sidecar verbatim and takes only its
//! render quality, typed the same way.

use std::fs;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::env::{RenderQuality, Task};
use crate::{fsutil, Error, Result};

/// `source` field of every sidecar `lfs collect` writes.
pub const SOURCE: &str = "lfs collect";

/// The JSON file beside each video: everything needed to replay or label the episode.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct EpisodeSidecar {
    pub task: Task,
    /// Seed the environment was reset with (and the random policy was seeded with).
    pub seed: u64,
    pub action_repeat: u32,
    pub render_quality: RenderQuality,
    /// Camera name (`front_close`) or index (`0`).
    pub camera: String,
    /// Frames in the video: the reset frame, then one per agent step.
    pub num_frames: usize,
    /// One action per agent step (`num_frames - 1`), each in [-1, 1].
    pub actions: Vec<Vec<f32>>,
    /// Reward of each agent step, summed over the action repeat.
    pub rewards: Vec<f64>,
    /// Always "lfs collect".
    pub source: String,
    pub lfs_version: String,
    /// Episode index within the task folder.
    pub episode: usize,
    /// The `--video-frames` limit of the run that recorded it.
    pub max_frames: usize,
    /// The episode reached its natural end (dm_control's last step) within the video.
    pub episode_ended: bool,
    /// Simulated seconds between two frames (control timestep × action repeat).
    pub frame_seconds: f64,
    pub codec: String,
    /// Versions of the Python packages that simulated and rendered it.
    pub mujoco: String,
    pub dm_control: String,
}

impl EpisodeSidecar {
    /// Writes the sidecar to `path` atomically (its presence marks the episode complete).
    pub fn write(&self, path: &Path) -> Result<()> {
        let mut json = serde_json::to_vec(self)?;
        json.push(b'\n');
        fsutil::write_bytes_atomic(path, &json)?;
        Ok(())
    }
}

/// Where the sidecar of `video` lives: the same path with `.json`.
pub fn sidecar_path(video: &Path) -> PathBuf {
    video.with_extension("json")
}

/// Reads a sidecar written by `lfs collect`: every field must be there.
pub fn read_sidecar(path: &Path) -> Result<EpisodeSidecar> {
    let bytes = fs::read(path)?;
    serde_json::from_slice(&bytes).map_err(|e| Error::shard(path, format!("not an lfs collect sidecar: {e}")))
}

/// A sidecar as `lfs ingest` finds it beside a video.
#[derive(Debug, Clone, PartialEq)]
pub struct FoundSidecar {
    /// The file's text, stored verbatim with the episode.
    pub json: String,
    /// Its `render_quality` field; None when the field is absent or null.
    pub render_quality: Option<RenderQuality>,
}

/// The sidecar beside `video`, if there is one. Any JSON is taken (sidecars from other tools
/// or older versions may lack fields), but a `render_quality` field must name a
/// [`RenderQuality`]: datasets refuse to mix them. Errors are [`Error::Decode`] naming the
/// sidecar.
pub fn read_sidecar_beside(video: &Path) -> Result<Option<FoundSidecar>> {
    let path = sidecar_path(video);
    let json = match fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::decode(path, format!("cannot read sidecar: {e}"))),
    };
    let value: serde_json::Value =
        serde_json::from_str(&json).map_err(|e| Error::decode(&path, format!("sidecar is not valid JSON: {e}")))?;
    let field = value.get("render_quality").unwrap_or(&serde_json::Value::Null);
    let render_quality = Option::<RenderQuality>::deserialize(field).map_err(|_| {
        Error::decode(
            &path,
            format!("render_quality must be {}, got {field}", RenderQuality::names()),
        )
    })?;
    Ok(Some(FoundSidecar { json, render_quality }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found(json: &str) -> Result<Option<FoundSidecar>> {
        let dir = tempfile::tempdir().expect("temp dir");
        let video = dir.path().join("ep.mkv");
        fs::write(sidecar_path(&video), json).expect("write sidecar");
        read_sidecar_beside(&video)
    }

    #[test]
    fn ingest_takes_any_json_but_only_known_render_qualities() {
        let quality = |json: &str| found(json).expect("accepted").expect("present").render_quality;
        assert_eq!(quality(r#"{"seed": 1}"#), None);
        assert_eq!(quality(r#"{"render_quality": null}"#), None);
        assert_eq!(quality("[1, 2]"), None);
        assert_eq!(quality(r#"{"render_quality": "fast"}"#), Some(RenderQuality::Fast));
        assert_eq!(
            quality(r#"{"render_quality": "default"}"#),
            Some(RenderQuality::Default)
        );
        for (json, got) in [
            (r#"{"render_quality": "Fast"}"#, "\"Fast\""),
            (r#"{"render_quality": 2}"#, "2"),
        ] {
            let err = found(json).expect_err("refused").to_string();
            assert!(
                err.ends_with(&format!("render_quality must be \"default\" or \"fast\", got {got}")),
                "{err}"
            );
        }
        let err = found("{not json").expect_err("refused").to_string();
        assert!(err.contains("sidecar is not valid JSON"), "{err}");
    }

    #[test]
    fn no_sidecar_is_none() {
        let dir = tempfile::tempdir().expect("temp dir");
        assert_eq!(read_sidecar_beside(&dir.path().join("ep.mkv")).expect("no error"), None);
    }
}
