//! `lfs export`: the online conv encoder and projector of a checkpoint as a PyTorch-loadable
//! safetensors file (`encoder.convnet.{0,2,4,6}.{weight,bias}`, `projector.{weight,bias}`,
//! metadata `format = pt` plus architecture, input convention and provenance), and beside it
//! `<stem>.example.safetensors`: a fixed input batch and the features this encoder computes
//! for it, so any loader can check itself. With [`ExportContents::EncoderOnly`] the file holds
//! the conv encoder alone (~120 KB instead of ~20 MB at the default sizes), which is all that
//! downstream RL and the probe read. [`crate::nn::encoder_file`] reads such a file back.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use candle_core::{DType, Device, Tensor};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::nn::encoder_projector::ENCODER_PREFIX;
use crate::nn::{checkpoint, EncoderProjector};
use crate::pretrain::config::PretrainConfig;
use crate::run_dir::{self, kind};
use crate::{Error, Result};

/// Input convention written into the metadata and docs/pytorch.md.
pub const INPUT_CONVENTION: &str = "float32 or uint8 tensor (B, 9, 84, 84): 3 RGB frames stacked oldest first in \
channels (F_{t-2}, F_{t-1}, F_t; the first frame repeated at an episode start), raw pixel values 0..255; \
the encoder divides by 255 itself (no -0.5 shift)";

/// Examples in the `.example.safetensors` file.
pub const EXAMPLE_BATCH: usize = 4;

/// What an export holds: the conv encoder f, with or without the projector g.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExportContents {
    /// f and g: what the pre-training objective used, for PyTorch users who want the latents.
    EncoderAndProjector,
    /// f alone (`lfs export --encoder-only`): what `lfs eval`, `lfs train --init-encoder` and
    /// `lfs probe` read, small enough to commit beside results.
    EncoderOnly,
}

/// What `export` wrote.
#[derive(Debug, Clone)]
pub struct ExportSummary {
    pub encoder: PathBuf,
    pub example: PathBuf,
    pub step: u64,
    pub method: String,
    pub contents: ExportContents,
}

/// `encoder.safetensors` -> `encoder.example.safetensors`.
pub fn example_path(out: &Path) -> PathBuf {
    let stem = out
        .file_stem()
        .map(|s| s.to_string_lossy().to_string())
        .unwrap_or_else(|| "encoder".to_string());
    out.with_file_name(format!("{stem}.example.safetensors"))
}

/// Exports the online encoder of `checkpoint_path`, with its projector or without, to `out`.
pub fn export(checkpoint_path: &Path, out: &Path, contents: ExportContents) -> Result<ExportSummary> {
    let err = |reason: String| Error::checkpoint(checkpoint_path, reason);
    let file = checkpoint::load(checkpoint_path)?;
    let meta = |key: &str| {
        file.metadata
            .get(key)
            .cloned()
            .ok_or_else(|| err(format!("no `{key}` in the metadata: not an `lfs pretrain` checkpoint")))
    };
    run_dir::expect_kind(
        checkpoint_path,
        &meta(kind::KEY)?,
        kind::PRETRAIN_CHECKPOINT,
        "an `lfs pretrain` checkpoint",
    )?;
    let cfg = PretrainConfig::from_toml_str(&meta(run_dir::meta::CONFIG)?, &[])
        .map_err(|e| err(format!("its config: {e}")))?;
    let step: u64 = meta("lfs.step")?.parse().map_err(|e| err(format!("`lfs.step`: {e}")))?;
    let method = meta("lfs.method")?;

    // Rebuild the encoder + projector from the checkpoint's online tensors, on the host
    // whatever device trained them (`run.device`): exports are device-independent.
    let online = file.strip_prefix("online.");
    let (net, params) =
        EncoderProjector::from_tensors(&cfg.model.encoder, cfg.model.latent_dim, &online, &Device::Cpu)?;
    let mut tensors: BTreeMap<String, Tensor> = params.snapshot()?;
    if contents == ExportContents::EncoderOnly {
        tensors.retain(|name, _| name.starts_with(ENCODER_PREFIX));
    }

    let enc = &cfg.model.encoder;
    let architecture = serde_json::json!({
        "encoder": format!(
            "Sequential(Conv2d({}, {f}, 3, stride=2), ReLU, {} x [Conv2d({f}, {f}, 3, stride=1), ReLU]), no padding, flatten (C,H,W)",
            enc.in_channels, enc.num_layers - 1, f = enc.num_filters),
        "in_channels": enc.in_channels,
        "image_size": enc.image_size,
        "num_filters": enc.num_filters,
        "num_layers": enc.num_layers,
        "repr_dim": enc.repr_dim()?,
        "projector": match contents {
            ExportContents::EncoderAndProjector => serde_json::json!(format!("Linear({}, {})", enc.repr_dim()?, cfg.model.latent_dim)),
            ExportContents::EncoderOnly => serde_json::Value::Null,
        },
        "latent_dim": cfg.model.latent_dim,
    });
    let mut metadata = HashMap::new();
    metadata.insert("format".to_string(), "pt".to_string());
    metadata.insert(kind::KEY.to_string(), kind::EXPORT.to_string());
    metadata.insert("lfs.architecture".to_string(), architecture.to_string());
    metadata.insert("lfs.input".to_string(), INPUT_CONVENTION.to_string());
    metadata.insert("lfs.method".to_string(), method.clone());
    metadata.insert("lfs.step".to_string(), step.to_string());
    metadata.insert("lfs.checkpoint".to_string(), checkpoint_path.display().to_string());
    metadata.insert("lfs.version".to_string(), env!("CARGO_PKG_VERSION").to_string());
    if let Some(d) = file.metadata.get(run_dir::meta::DATASETS) {
        metadata.insert(run_dir::meta::DATASETS.to_string(), d.clone());
    }
    metadata.insert(run_dir::meta::CONFIG.to_string(), meta(run_dir::meta::CONFIG)?);
    checkpoint::save_atomic(out, &tensors, &metadata)?;

    // The example: a fixed pseudo-random uint8 batch and its features.
    let (c, s) = (enc.in_channels, enc.image_size);
    let mut rng = ChaCha8Rng::seed_from_u64(20240501);
    let pixels: Vec<u8> = (0..EXAMPLE_BATCH * c * s * s).map(|_| rng.random::<u8>()).collect();
    let obs = Tensor::from_vec(pixels, (EXAMPLE_BATCH, c, s, s), params.device())?; // (4, 9, 84, 84) u8
    let features = net.forward(&obs.to_dtype(DType::F32)?)?;
    let mut example = BTreeMap::new();
    example.insert("obs".to_string(), obs);
    example.insert("features".to_string(), features.encoded.h.detach()); // (4, 39200)
    if contents == ExportContents::EncoderAndProjector {
        example.insert("projection".to_string(), features.z.detach()); // (4, latent)
    }
    let mut example_meta = HashMap::new();
    example_meta.insert("format".to_string(), "pt".to_string());
    example_meta.insert(kind::KEY.to_string(), kind::EXPORT_EXAMPLE.to_string());
    example_meta.insert("lfs.encoder".to_string(), out.display().to_string());
    example_meta.insert("lfs.input".to_string(), INPUT_CONVENTION.to_string());
    let example_file = example_path(out);
    checkpoint::save_atomic(&example_file, &example, &example_meta)?;
    Ok(ExportSummary {
        encoder: out.to_path_buf(),
        example: example_file,
        step,
        method,
        contents,
    })
}
