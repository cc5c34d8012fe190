//! The environment switches lfs reads (issue 72), all in one table, [`SWITCHES`]: three, each
//! with the reason it stays. Everything else a run does is its config's. A value outside a
//! switch's list is an error naming the switch, the value and the list, checked once when a
//! command starts ([`check`]); a switch of the GPU's A/B runs that has been decided and removed
//! ([`REMOVED`]) is named on stderr, so that an old script sees it does nothing now.
//!
//! (`LFS_PYTHON`, the environments' Python, and `LFS_FFMPEG_LOG`, FFmpeg's own messages, are
//! settings of the machine, not switches of a path.)

use std::sync::OnceLock;

use crate::{Error, Result};

/// One switch: its name, the values it takes and why it stays.
pub struct Switch {
    pub name: &'static str,
    /// Each value it takes (for [`GPU_PATHS_ON_CPU`], each item of its comma-separated list).
    pub values: &'static [&'static str],
    pub why: &'static str,
}

/// `LFS_SYNC_PARTS=1`.
pub const SYNC_PARTS: &str = "LFS_SYNC_PARTS";
/// `LFS_CONV_KERNEL=avx512|avx2|plain`.
pub const CONV_KERNEL: &str = "LFS_CONV_KERNEL";
/// `LFS_GPU_PATHS_ON_CPU=video-frames,update-statistics,feature-cache,replay-frames` (any of them).
pub const GPU_PATHS_ON_CPU: &str = "LFS_GPU_PATHS_ON_CPU";

/// Every switch lfs reads.
pub const SWITCHES: [Switch; 3] = [
    Switch {
        name: SYNC_PARTS,
        values: &["1"],
        why: "`lfs pretrain` waits for the device at the end of each part of an update (data, forward, backward, optimiser), so that each part's time in train.jsonl holds its own GPU work: where an update's time goes on a GPU, at the cost of the overlap between parts",
    },
    Switch {
        name: CONV_KERNEL,
        values: &["avx512", "avx2", "plain"],
        why: "the CPU's convolution kernel instead of the fastest this CPU runs (one it lacks is refused with a warning): the tests hold each kernel to the others on one machine, and a user can rule a kernel out when a result looks wrong",
    },
    Switch {
        name: GPU_PATHS_ON_CPU,
        values: &["video-frames", "update-statistics", "feature-cache", "replay-frames"],
        why: "on the CPU, the GPU's way of keeping these (the videos' frames, the update's statistics, the feature cache, the replay's frames: on the device, as tensors), which a GPU always takes: CI has no GPU, and its tests hold each of the GPU's ways to the CPU's",
    },
];

/// Switches of the GPU's A/B runs, decided on an H200 (BENCHMARKS.md) and removed with the
/// slower path on 2026-11-29: each name and what runs now.
pub const REMOVED: [(&str, &str); 13] = [
    ("LFS_FUSED_STEP", "Adam and the EMA are one CUDA kernel per parameter"),
    ("LFS_FUSED_CONV", "an encoder layer is one cuDNN node"),
    ("LFS_FUSED_GATHER", "the frames' gather is one CUDA kernel"),
    ("LFS_FUSED_LNC", "LNC's distances are two CUDA kernels"),
    ("LFS_FUSED_SAC", "SAC's rows are CUDA kernels"),
    ("LFS_SAC_GRADIENTS", "SAC's gradients are written out off the CPU"),
    ("LFS_DRQV2_GRADIENTS", "DrQ-v2's gradients are written out off the CPU"),
    ("LFS_LONG_PRODUCT", "the projector's product is one GEMM, x·Wᵀ"),
    ("LFS_CUDNN_ALGO", "cuDNN's algorithms are chosen by timing them"),
    (
        "LFS_UPDATE_STATISTICS",
        "a GPU keeps them on the device; LFS_GPU_PATHS_ON_CPU for the CPU",
    ),
    (
        "LFS_FEATURE_CACHE",
        "a GPU keeps it on the device; LFS_GPU_PATHS_ON_CPU for the CPU",
    ),
    (
        "LFS_REPLAY_FRAMES",
        "a GPU keeps them on the device; LFS_GPU_PATHS_ON_CPU for the CPU",
    ),
    (
        "LFS_VIDEO_FRAMES",
        "a GPU keeps them on the device; LFS_GPU_PATHS_ON_CPU for the CPU",
    ),
];

/// Checks every switch set in the environment: a value outside its list is an error; a removed
/// switch is named on stderr. Called once when a command starts.
pub fn check() -> Result<()> {
    for (name, now) in REMOVED {
        if std::env::var_os(name).is_some() {
            eprintln!("lfs: {name} was removed on 2026-11-29 ({now}); ignored");
        }
    }
    for switch in &SWITCHES {
        if let Ok(value) = std::env::var(switch.name) {
            check_value(switch, &value)?;
        }
    }
    Ok(())
}

/// `value` of `switch` (empty: unset), or an error naming both and the switch's values.
fn check_value(switch: &Switch, value: &str) -> Result<()> {
    let items: Vec<&str> = match switch.name {
        GPU_PATHS_ON_CPU => value.split(',').map(str::trim).filter(|v| !v.is_empty()).collect(),
        _ => [value].into_iter().filter(|v| !v.is_empty()).collect(),
    };
    match items.iter().find(|item| !switch.values.contains(item)) {
        None => Ok(()),
        Some(bad) => Err(Error::Config(format!(
            "{}={value:?}: {bad:?} is not one of {} (docs/guide/gpu.md, \"Switches\")",
            switch.name,
            switch.values.join(", ")
        ))),
    }
}

/// Whether `LFS_SYNC_PARTS=1`.
pub fn sync_parts() -> bool {
    static SYNC: OnceLock<bool> = OnceLock::new();
    *SYNC.get_or_init(|| std::env::var(SYNC_PARTS).as_deref() == Ok("1"))
}

/// One of the GPU's ways of keeping data that `LFS_GPU_PATHS_ON_CPU` can give the CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GpuPath {
    /// `lfs pretrain`'s videos' frames on the device, each batch gathered there.
    VideoFrames,
    /// The pre-training update's statistics (LNC, Sinkhorn, spread) as tensor ops.
    UpdateStatistics,
    /// The RL loop's feature cache on the device.
    FeatureCache,
    /// The replay's frames on the device, pixel batches stacked and shifted there.
    ReplayFrames,
}

impl GpuPath {
    /// Its name in `LFS_GPU_PATHS_ON_CPU`.
    pub fn name(self) -> &'static str {
        match self {
            GpuPath::VideoFrames => "video-frames",
            GpuPath::UpdateStatistics => "update-statistics",
            GpuPath::FeatureCache => "feature-cache",
            GpuPath::ReplayFrames => "replay-frames",
        }
    }
}

/// Whether `LFS_GPU_PATHS_ON_CPU` names `path` (read once per process).
pub fn gpu_path_on_cpu(path: GpuPath) -> bool {
    static LIST: OnceLock<String> = OnceLock::new();
    let list = LIST.get_or_init(|| std::env::var(GPU_PATHS_ON_CPU).unwrap_or_default());
    list.split(',').map(str::trim).any(|item| item == path.name())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A switch's values: one of its list, or empty (unset); anything else an error naming the
    /// switch, the value and the list. A list switch checks each item.
    #[test]
    fn a_value_outside_a_switchs_list_is_an_error_naming_it() {
        let [sync, kernel, paths] = &SWITCHES;
        for (switch, value) in [
            (sync, "1"),
            (sync, ""),
            (kernel, "avx2"),
            (paths, "video-frames"),
            (paths, "feature-cache, replay-frames"),
            (paths, ""),
        ] {
            assert!(check_value(switch, value).is_ok(), "{} = {value:?}", switch.name);
        }
        for (switch, value, bad) in [
            (sync, "0", "\"0\""),
            (sync, "yes", "\"yes\""),
            (kernel, "neon", "\"neon\""),
            (paths, "video-frames,statistics", "\"statistics\""),
        ] {
            let why = check_value(switch, value).unwrap_err().to_string();
            for part in [switch.name, bad, switch.values[0]] {
                assert!(why.contains(part), "{why} lacks {part}");
            }
        }
    }

    /// Every GPU path's name is one of the switch's values, and no name is both a switch and
    /// a removed one.
    #[test]
    fn the_table_agrees_with_itself() {
        for path in [
            GpuPath::VideoFrames,
            GpuPath::UpdateStatistics,
            GpuPath::FeatureCache,
            GpuPath::ReplayFrames,
        ] {
            assert!(SWITCHES[2].values.contains(&path.name()));
        }
        for (name, _) in REMOVED {
            assert!(SWITCHES.iter().all(|s| s.name != name), "{name}");
        }
    }
}
