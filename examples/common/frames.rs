//! The fixed replay of the dynamics checks (included with `#[path]`; not an example): the
//! episodes eval/bench/dump_frames.py wrote (`frames.npy`, and `episodes.json` with each
//! episode's start, actions and rewards) in a replay buffer.

use std::path::Path;

use anyhow::{bail, Context};
use lfs::observation::FRAME_BYTES;
use lfs::rl::{FeatureDtype, ReplayBuffer};

/// The episodes of `frames` in a replay of `capacity` transitions.
pub fn replay(frames: &Path, capacity: usize) -> anyhow::Result<ReplayBuffer> {
    let pixels = read_npy_u8(&frames.join("frames.npy"))?;
    let episodes: Vec<serde_json::Value> = serde_json::from_slice(&std::fs::read(frames.join("episodes.json"))?)?;
    let action_dim = episodes
        .first()
        .and_then(|e| e["actions"][0].as_array())
        .map(Vec::len)
        .context("episodes.json: no episode with actions (dump a dataset of `lfs collect` videos)")?;
    let mut replay = ReplayBuffer::new(capacity, FRAME_BYTES, action_dim, 0, FeatureDtype::F32);
    for e in &episodes {
        let start = e["start"].as_u64().context("episodes.json: start")? as usize;
        let frame = |t: usize| &pixels[(start + t) * FRAME_BYTES..(start + t + 1) * FRAME_BYTES];
        replay.start_episode(frame(0))?;
        let (actions, rewards) = (e["actions"].as_array(), e["rewards"].as_array());
        let (Some(actions), Some(rewards)) = (actions, rewards) else {
            bail!("episodes.json: an episode without actions and rewards");
        };
        for (t, (a, r)) in actions.iter().zip(rewards).enumerate() {
            let a: Vec<f32> = serde_json::from_value(a.clone())?;
            replay.add(&a, r.as_f64().context("a reward")? as f32, frame(t + 1))?;
        }
    }
    Ok(replay)
}

/// A NumPy `.npy` file of uint8 (`|u1`, C order), its values.
fn read_npy_u8(path: &Path) -> anyhow::Result<Vec<u8>> {
    let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    if bytes.len() < 10 || &bytes[..6] != b"\x93NUMPY" {
        bail!("{}: not a .npy file", path.display());
    }
    // Version 1 has a 2-byte header length, versions 2 and 3 a 4-byte one.
    let (len, at) = match bytes[6] {
        1 => (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10),
        _ => (
            u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize,
            12,
        ),
    };
    let header = String::from_utf8_lossy(&bytes[at..at + len]);
    if !header.contains("'descr': '|u1'") || header.contains("'fortran_order': True") {
        bail!("{}: expected C-order uint8, found {header}", path.display());
    }
    Ok(bytes[at + len..].to_vec())
}
