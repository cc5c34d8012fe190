//! Where a run computes (issue 29): the one device seam of `lfs pretrain`, `eval` and `train`.
//!
//! A run names its device once, as `run.device` in its config (`--device` on the command line is
//! `--set run.device=…`): `cpu`, `cuda` (GPU 0) or `cuda:N`. The command opens it once
//! ([`DeviceChoice::open`]; a CUDA device opened twice is two devices to candle) and its
//! networks and every batch they train on live there. What stays in host memory whatever the
//! device is plain Rust memory, never a tensor, so its type says so: the pair loader's pixels
//! (`PairBatch`), the replay buffer and its feature cache, the environments' frames. Adam's
//! moments are host vectors for CPU parameters and device tensors for the others (a step
//! through host memory cost more than the update on an H100: BENCHMARKS.md). Checkpoints and
//! exports hold host tensors (`Params::snapshot`, `Adam::state_tensors`), so a run saved on one
//! device resumes on another.
//!
//! How the encoder computes follows from the device ([`Compute`]): on the CPU our channels-last
//! kernels (`nn::kernels`, with hand-written backward), elsewhere candle's own ops under its
//! autograd. The candle path also runs on the CPU, which is how it is tested on machines
//! without a GPU (`examples/device_check.rs`, run by `tests/device.rs`).

use std::fmt;
use std::str::FromStr;

use candle_core::{DType, Device, Tensor};
use serde::{Deserialize, Serialize};

use crate::switches::{gpu_path_on_cpu, GpuPath};
use crate::{Error, Result};

/// A run's device as written in its config: `cpu`, `cuda` or `cuda:N`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum DeviceChoice {
    #[default]
    Cpu,
    /// The CUDA device with this ordinal (`cuda` is `cuda:0`).
    Cuda(usize),
}

impl DeviceChoice {
    /// The CPU (configs leave the default unwritten, so their text and resume keys are those of
    /// runs made before the field existed).
    pub fn is_cpu(&self) -> bool {
        *self == DeviceChoice::Cpu
    }

    /// Whether this build can open the device at all, without opening it (which would hold a
    /// CUDA context, and GPU memory, in the calling process): the error [`Self::open`] gives on
    /// a build without the cargo feature `cuda`.
    pub fn ensure_built(&self) -> Result<()> {
        match self {
            DeviceChoice::Cuda(_) if !cfg!(feature = "cuda") => Err(self.not_built()),
            _ => Ok(()),
        }
    }

    fn not_built(&self) -> Error {
        Error::Config(format!(
            "run.device = \"{self}\": this lfs was built without CUDA (the cargo feature `cuda`: `make build-cuda` builds it)"
        ))
    }

    /// Opens the device, its matrix products at `precision`. A CUDA device on a build without
    /// the cargo feature `cuda`, one the driver cannot open, or TF32 on the CPU is an error
    /// naming the field and the reason.
    pub fn open(&self, precision: Precision) -> Result<Device> {
        precision.check(self)?;
        match *self {
            DeviceChoice::Cpu => Ok(Device::Cpu),
            DeviceChoice::Cuda(ordinal) => {
                let device = Device::new_cuda(ordinal).map_err(|e| match e {
                    candle_core::Error::NotCompiledWithCudaSupport => self.not_built(),
                    // The driver's reason, without the backtrace candle may attach to it.
                    other => Error::Config(format!(
                        "run.device = \"{self}\": cannot open it: {} ({})",
                        other.to_string().lines().next().unwrap_or_default(),
                        cuda_versions()
                    )),
                })?;
                // A process-wide switch of candle's CUDA backend (its f32 GEMMs, the
                // convolutions' im2col products and lfs's GEMM backward among them).
                candle_core::cuda::set_gemm_reduced_precision_f32(precision == Precision::Tf32);
                Ok(device)
            }
        }
    }
}

/// The CUDA version the NVIDIA driver supports and the one this build was made for, for an
/// error that a device cannot be opened (a CUDA 13.0 build needs a driver of 580 or newer).
#[cfg(feature = "cuda")]
fn cuda_versions() -> String {
    use candle_core::cuda::cudarc::driver::sys;
    let dotted = |v: i64| format!("{}.{}", v / 1000, (v % 1000) / 10);
    let mut version: std::ffi::c_int = 0;
    // SAFETY: the driver writes one int through the pointer.
    let driver = match unsafe { sys::cuDriverGetVersion(&mut version) } {
        sys::CUresult::CUDA_SUCCESS => format!("the driver supports CUDA {}", dotted(i64::from(version))),
        err => format!("the driver's CUDA version is unknown: {err:?}"),
    };
    format!(
        "{driver}; this lfs was built for CUDA {}",
        dotted(i64::from(sys::CUDA_VERSION))
    )
}

#[cfg(not(feature = "cuda"))]
fn cuda_versions() -> String {
    "this lfs was built without CUDA".into()
}

/// The precision of a run's f32 matrix products, `run.precision`: `fp32` (the default, unwritten
/// in configs, so their text and resume keys are those of runs made before the field existed)
/// or `tf32` (a CUDA device only: candle's f32 GEMMs on the tensor cores with 10-bit mantissas,
/// as PyTorch's `allow_tf32`). Tensors stay f32 either way. The encoder's cuDNN convolutions
/// (`src/cuda/cudnn_conv.rs`) follow it through cuDNN's math type; candle's
/// own cuDNN forward (any other conv2d of that build) keeps cuDNN's default, which allows TF32 on
/// Hopper, unless `NVIDIA_TF32_OVERRIDE=0` is in the environment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Precision {
    #[default]
    Fp32,
    Tf32,
}

impl Precision {
    pub fn is_fp32(&self) -> bool {
        *self == Precision::Fp32
    }

    /// TF32 needs a CUDA device: the CPU computes f32 in FP32.
    pub fn check(&self, device: &DeviceChoice) -> Result<()> {
        if *self == Precision::Tf32 && device.is_cpu() {
            return Err(Error::Config(
                "run.precision = \"tf32\" needs a CUDA device (run.device = \"cuda\"): the CPU computes in FP32".into(),
            ));
        }
        Ok(())
    }
}

impl fmt::Display for DeviceChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeviceChoice::Cpu => write!(f, "cpu"),
            DeviceChoice::Cuda(ordinal) => write!(f, "cuda:{ordinal}"),
        }
    }
}

impl FromStr for DeviceChoice {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Self, String> {
        let bad = || format!("device \"{s}\": expected cpu, cuda or cuda:N");
        match s {
            "cpu" => Ok(DeviceChoice::Cpu),
            "cuda" => Ok(DeviceChoice::Cuda(0)),
            _ => match s.strip_prefix("cuda:") {
                Some(n) => n.parse().map(DeviceChoice::Cuda).map_err(|_| bad()),
                None => Err(bad()),
            },
        }
    }
}

impl TryFrom<String> for DeviceChoice {
    type Error = String;

    fn try_from(s: String) -> std::result::Result<Self, String> {
        s.parse()
    }
}

impl From<DeviceChoice> for String {
    fn from(d: DeviceChoice) -> String {
        d.to_string()
    }
}

/// How the encoder computes on its device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compute {
    /// Our CPU kernels (`nn::kernels`): one encoder op forward, a hand-written backward over
    /// the kept activations. CPU only.
    Kernels,
    /// candle's conv2d under candle's autograd: any device.
    Candle,
}

impl Compute {
    /// The kernels on the CPU, candle's ops elsewhere.
    pub fn for_device(device: &Device) -> Self {
        if device.is_cpu() {
            Compute::Kernels
        } else {
            Compute::Candle
        }
    }
}

impl FromStr for Precision {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "fp32" => Ok(Precision::Fp32),
            "tf32" => Ok(Precision::Tf32),
            _ => Err(format!("precision \"{s}\": expected fp32 or tf32")),
        }
    }
}

/// Whether the pre-training update computes its statistics (Sinkhorn, the spread and entropy
/// metrics; LNC's distances have CUDA kernels of their own) on the host in f64, as it does on
/// the CPU, rather than with candle's ops in f64 on `device`, read with the loss in one
/// device→host copy, as it does on a GPU (the GPU's way on the CPU with
/// `LFS_GPU_PATHS_ON_CPU=update-statistics`, for tests).
pub fn statistics_on_host(device: &Device) -> bool {
    on_host(GpuPath::UpdateStatistics, device)
}

/// Whether the RL loop's feature cache lives in host memory (the CPU's way: rows gathered on
/// the host and uploaded with each batch) rather than on `device` (a GPU's way,
/// [`DeviceFeatureCache`](crate::rl::DeviceFeatureCache); `feature-cache` in
/// `LFS_GPU_PATHS_ON_CPU`).
pub fn feature_cache_on_host(device: &Device) -> bool {
    on_host(GpuPath::FeatureCache, device)
}

/// Whether pixel batches are stacked and shifted on the host (the CPU's way) rather than from a
/// copy of the replay's frames on `device` ([`DeviceFrames`](crate::rl::DeviceFrames), a GPU's
/// way when a frozen encoder encodes them; `replay-frames` in `LFS_GPU_PATHS_ON_CPU`).
pub fn frames_on_host(device: &Device) -> bool {
    on_host(GpuPath::ReplayFrames, device)
}

/// Whether `lfs pretrain` stacks and shifts its batches on the host (the CPU's way) rather than
/// from a copy of the videos' frames on `device` (a GPU's way, 0.78× the host's time per LFS
/// update on an H200, BENCHMARKS.md;
/// [`PairSampler::keep_frames_on`](crate::data::PairSampler::keep_frames_on); `video-frames`
/// in `LFS_GPU_PATHS_ON_CPU`).
pub fn video_frames_on_host(device: &Device) -> bool {
    on_host(GpuPath::VideoFrames, device)
}

/// The host on the CPU unless `LFS_GPU_PATHS_ON_CPU` names `path`; the device on a GPU.
fn on_host(path: GpuPath, device: &Device) -> bool {
    device.is_cpu() && !gpu_path_on_cpu(path)
}

/// Free and total bytes of `device`'s memory, as its driver reports them; None on the CPU.
pub fn memory(device: &Device) -> Option<(u64, u64)> {
    #[cfg(feature = "cuda")]
    if let Device::Cuda(dev) = device {
        dev.cuda_stream().context().bind_to_thread().ok()?;
        let (free, total) = candle_core::cuda::cudarc::driver::result::mem_get_info().ok()?;
        return Some((free as u64, total as u64));
    }
    let _ = device;
    None
}

/// Whether `bytes` kept on `device` beside a run leave it room to train: at most half of the
/// memory free now (the agent, its batches and activations take the rest; the CPU always
/// fits). Otherwise why not, for the run's first line.
pub fn room_for(device: &Device, bytes: u64) -> std::result::Result<(), String> {
    match memory(device) {
        Some((free, total)) => room_in(bytes, free, total),
        None => Ok(()),
    }
}

/// [`room_for`]'s rule on a device with `free` of `total` bytes free.
fn room_in(bytes: u64, free: u64, total: u64) -> std::result::Result<(), String> {
    if bytes <= free / 2 {
        return Ok(());
    }
    Err(format!(
        "{:.2} GB would take over half of the GPU's {:.2} GB free of {:.2} GB",
        bytes as f64 / 1e9,
        free as f64 / 1e9,
        total as f64 / 1e9
    ))
}

/// Single-value tensors of one device read to the host in one copy, each as f64 (a GPU stops
/// once for them all).
pub fn read_scalars<const N: usize>(ts: [&Tensor; N]) -> Result<[f64; N]> {
    read_scalar_list(&ts)?
        .try_into()
        .map_err(|v: Vec<f64>| Error::Shape(format!("read_scalars: {} values from {N} tensors", v.len())))
}

/// Small tensors of one device (of any float dtype), each flattened, read to the host in one
/// copy as f64, in order: [`read_scalars`] for a list whose length is known at run time.
pub fn read_scalar_list(ts: &[&Tensor]) -> Result<Vec<f64>> {
    let flat = ts
        .iter()
        .map(|t| t.flatten_all()?.to_dtype(DType::F64))
        .collect::<candle_core::Result<Vec<_>>>()?;
    Ok(Tensor::cat(&flat, 0)?.to_vec1::<f64>()?)
}

/// A device and how the encoder computes on it: where a network's parameters live.
#[derive(Debug, Clone)]
pub struct Backend {
    pub device: Device,
    pub compute: Compute,
}

impl Backend {
    /// `device` with its default [`Compute`].
    pub fn new(device: &Device) -> Self {
        Self {
            device: device.clone(),
            compute: Compute::for_device(device),
        }
    }

    /// candle's ops on `device`, whatever it is (on the CPU: the GPU's code path, for tests).
    pub fn candle(device: &Device) -> Self {
        Self {
            device: device.clone(),
            compute: Compute::Candle,
        }
    }
}

impl From<&Device> for Backend {
    fn from(device: &Device) -> Self {
        Self::new(device)
    }
}

impl From<&Backend> for Backend {
    fn from(backend: &Backend) -> Self {
        backend.clone()
    }
}

impl Default for Backend {
    fn default() -> Self {
        Self::new(&Device::Cpu)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_stay_on_the_host_past_half_the_free_memory() {
        // The replay frames of 1M transitions (~21 GB) on a 24 GB GPU with 22 GB free: no.
        let why = room_in(21_000_000_000, 22_000_000_000, 24_000_000_000).unwrap_err();
        assert_eq!(
            why,
            "21.00 GB would take over half of the GPU's 22.00 GB free of 24.00 GB"
        );
        // 0.9 GB (sac/paper's 40,000) on an H100's 79 GB free, and exactly half: yes.
        assert!(room_in(900_000_000, 79_000_000_000, 80_000_000_000).is_ok());
        assert!(room_in(5, 10, 10).is_ok());
        assert!(room_in(6, 10, 10).is_err());
        // The CPU reports no memory: everything fits (its way is the host's anyway).
        assert!(room_for(&Device::Cpu, u64::MAX).is_ok());
    }

    #[test]
    fn parses_and_prints_each_form() {
        for (text, choice, printed) in [
            ("cpu", DeviceChoice::Cpu, "cpu"),
            ("cuda", DeviceChoice::Cuda(0), "cuda:0"),
            ("cuda:3", DeviceChoice::Cuda(3), "cuda:3"),
        ] {
            assert_eq!(text.parse::<DeviceChoice>().unwrap(), choice);
            assert_eq!(choice.to_string(), printed);
        }
        for bad in ["gpu", "cuda:", "cuda:x", "CPU", "cuda:-1"] {
            let err = bad.parse::<DeviceChoice>().unwrap_err();
            assert!(err.contains(bad) && err.contains("cpu, cuda or cuda:N"), "{err}");
        }
    }

    #[cfg(not(feature = "cuda"))]
    #[test]
    fn cuda_on_a_cpu_build_is_a_clear_error() {
        for err in [
            DeviceChoice::Cuda(1).open(Precision::Fp32).unwrap_err().to_string(),
            DeviceChoice::Cuda(1).ensure_built().unwrap_err().to_string(),
        ] {
            assert!(
                err.contains("run.device = \"cuda:1\"") && err.contains("make build-cuda"),
                "{err}"
            );
        }
        assert!(DeviceChoice::Cpu.ensure_built().is_ok());
    }

    #[test]
    fn tf32_on_the_cpu_is_refused_by_name() {
        let err = DeviceChoice::Cpu.open(Precision::Tf32).unwrap_err().to_string();
        assert!(
            err.contains("run.precision = \"tf32\"") && err.contains("CUDA"),
            "{err}"
        );
        assert!(DeviceChoice::Cpu.open(Precision::Fp32).unwrap().is_cpu());
        assert!(Precision::Tf32.check(&DeviceChoice::Cuda(0)).is_ok());
        assert_eq!("tf32".parse::<Precision>().unwrap(), Precision::Tf32);
        assert!("TF32".parse::<Precision>().unwrap_err().contains("fp32 or tf32"));
    }
}
