//! The episode sidecar: `<episode>.json` beside each video `lfs collect` writes, with what is
//! needed to replay or label the episode. [`EpisodeSidecar`] is its one typed form: collect
//! writes and re-reads it whole; `lfs ingest` keeps any sidecar verbatim and takes its render
//! quality, state and rewards ([`FoundSidecar`]).

use std::fs;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::env::{RenderQuality, Task};
use crate::shards::{rewards_f32, EpisodeState};
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
    /// Names of the values of each `states` row (the worker's [`crate::env::EnvSpec::state_names`]:
    /// `orientations[0]`, `height`, …). Empty in a sidecar from an lfs that did not record states.
    #[serde(default)]
    pub state_names: Vec<String>,
    /// The task's physical state at each frame: dm_control's proprioceptive observation
    /// flattened, one row per frame (the reset frame's first, `num_frames` rows), each
    /// `state_names.len()` wide. Empty in a sidecar from an lfs that did not record states.
    #[serde(default)]
    pub states: Vec<Vec<f64>>,
}

impl EpisodeSidecar {
    /// The sidecar holds a named state row for every frame (an older lfs wrote none).
    pub fn has_states(&self) -> bool {
        !self.state_names.is_empty()
            && self.states.len() == self.num_frames
            && self.states.iter().all(|row| row.len() == self.state_names.len())
    }

    /// The sidecar's text: JSON and a newline, as its file holds it.
    pub fn to_json(&self) -> Result<String> {
        let mut json = serde_json::to_string(self)?;
        json.push('\n');
        Ok(json)
    }

    /// Writes the sidecar to `path` atomically (its presence marks the episode complete).
    pub fn write(&self, path: &Path) -> Result<()> {
        fsutil::write_bytes_atomic(path, self.to_json()?.as_bytes())?;
        Ok(())
    }
}

/// Where the sidecar of `video` lives: the same path with `.json`.
pub fn sidecar_path(video: &Path) -> PathBuf {
    video.with_extension("json")
}

/// Reads a sidecar written by `lfs collect`: every field must be there, but for the states,
/// which older versions did not record (they read as empty).
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
    /// Where it was read from (errors about its content name it).
    pub path: PathBuf,
    /// Its `state_names` and `states` (a row per frame), checked: rows `state_names.len()`
    /// wide, finite as float32. None when both are absent, null or empty (older sidecars).
    pub state: Option<EpisodeState>,
    /// Its `rewards` (one per agent step) as float32, checked finite; None when absent or null.
    pub rewards: Option<Vec<f32>>,
}

/// The sidecar beside `video`, if there is one. Any JSON is taken (sidecars from other tools
/// or older versions may lack fields), but a `render_quality` field must name a
/// [`RenderQuality`]: datasets refuse to mix them, and `state_names`/`states`/`rewards`, when
/// present, must be well formed (see [`FoundSidecar`]); whether their counts fit the video is
/// checked once it is decoded ([`crate::shards::count_mismatch`]). Errors are
/// [`Error::Decode`] naming the sidecar.
pub fn read_sidecar_beside(video: &Path) -> Result<Option<FoundSidecar>> {
    let path = sidecar_path(video);
    let json = match fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::decode(path, format!("cannot read sidecar: {e}"))),
    };
    parse_sidecar(json, path).map(Some)
}

/// A sidecar's text as [`read_sidecar_beside`] takes it, `path` naming it in errors (`lfs collect
/// --dataset` stores its sidecars through this too, so both paths store the same facts).
pub fn parse_sidecar(json: String, path: PathBuf) -> Result<FoundSidecar> {
    let value: serde_json::Value =
        serde_json::from_str(&json).map_err(|e| Error::decode(&path, format!("sidecar is not valid JSON: {e}")))?;
    let field = value.get("render_quality").unwrap_or(&serde_json::Value::Null);
    let render_quality = Option::<RenderQuality>::deserialize(field).map_err(|_| {
        Error::decode(
            &path,
            format!("render_quality must be {}, got {field}", RenderQuality::names()),
        )
    })?;
    // State and rewards: typed here, their counts checked against the decoded frames later.
    let typed = |key: &str, what: &str| {
        // A wrong `states` field may be megabytes: quote its start.
        let got = value.get(key).unwrap_or(&serde_json::Value::Null).to_string();
        let cut = got.char_indices().nth(60).map_or(got.len(), |(i, _)| i);
        let more = if cut < got.len() { "…" } else { "" };
        Error::decode(&path, format!("{key} must be {what}, got {}{more}", &got[..cut]))
    };
    let field = |key: &str| value.get(key).unwrap_or(&serde_json::Value::Null);
    let names = Option::<Vec<String>>::deserialize(field("state_names"))
        .map_err(|_| typed("state_names", "a list of strings"))?
        .unwrap_or_default();
    let rows = Option::<Vec<Vec<f64>>>::deserialize(field("states"))
        .map_err(|_| typed("states", "a list of rows of numbers"))?;
    let state = match (names.is_empty(), rows) {
        (true, None) => None,
        (true, Some(rows)) if rows.is_empty() => None,
        (false, None) => return Err(Error::decode(&path, "has state_names but no states")),
        (_, Some(rows)) => Some(EpisodeState::from_rows(names, &rows).map_err(|e| Error::decode(&path, e))?),
    };
    let rewards = Option::<Vec<f64>>::deserialize(field("rewards"))
        .map_err(|_| typed("rewards", "a list of numbers"))?
        .map(|r| rewards_f32(&r))
        .transpose()
        .map_err(|e| Error::decode(&path, e))?;
    Ok(FoundSidecar {
        json,
        render_quality,
        path,
        state,
        rewards,
    })
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
