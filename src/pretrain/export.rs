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
use crate::nn::{checkpoint, Encoder, EncoderConfig, EncoderProjector};
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

/// Where an exported encoder came from: its metadata.
#[derive(Debug, Clone)]
pub struct Provenance {
    /// `lfs.method`: the pre-training method (`lfs`, `atc`, …, `proto`, `apt`).
    pub method: String,
    /// `lfs.step`: the updates it had done.
    pub step: u64,
    /// `lfs.checkpoint`: the checkpoint (or run) it was written from.
    pub source: PathBuf,
    /// The run's resolved config, as TOML.
    pub config: String,
    /// The datasets it was pre-trained on, as the checkpoint records them (videos only).
    pub datasets: Option<String>,
}

/// Writes `tensors` (`encoder.convnet.*`, with `projector.*` when `with_projector`) as an
/// export at `out` and its example beside it; returns the example's path. `latent_dim` is the
/// projector's output size the run trained with (recorded; None for a method without one).
pub fn write_files(
    out: &Path,
    tensors: &BTreeMap<String, Tensor>,
    enc: &EncoderConfig,
    latent_dim: Option<usize>,
    with_projector: bool,
    provenance: &Provenance,
) -> Result<PathBuf> {
    let latent = latent_dim.filter(|_| with_projector);
    let architecture = serde_json::json!({
        "encoder": format!(
            "Sequential(Conv2d({}, {f}, 3, stride=2), ReLU, {} x [Conv2d({f}, {f}, 3, stride=1), ReLU]), no padding, flatten (C,H,W)",
            enc.in_channels, enc.num_layers - 1, f = enc.num_filters),
        "in_channels": enc.in_channels,
        "image_size": enc.image_size,
        "num_filters": enc.num_filters,
        "num_layers": enc.num_layers,
        "repr_dim": enc.repr_dim()?,
        "projector": match latent {
            Some(latent) => serde_json::json!(format!("Linear({}, {latent})", enc.repr_dim()?)),
            None => serde_json::Value::Null,
        },
        "latent_dim": latent_dim,
    });
    let mut metadata = HashMap::new();
    metadata.insert("format".to_string(), "pt".to_string());
    metadata.insert(kind::KEY.to_string(), kind::EXPORT.to_string());
    metadata.insert("lfs.architecture".to_string(), architecture.to_string());
    metadata.insert("lfs.input".to_string(), INPUT_CONVENTION.to_string());
    metadata.insert("lfs.method".to_string(), provenance.method.clone());
    metadata.insert("lfs.step".to_string(), provenance.step.to_string());
    metadata.insert("lfs.checkpoint".to_string(), provenance.source.display().to_string());
    metadata.insert("lfs.version".to_string(), env!("CARGO_PKG_VERSION").to_string());
    if let Some(d) = &provenance.datasets {
        metadata.insert(run_dir::meta::DATASETS.to_string(), d.clone());
    }
    metadata.insert(run_dir::meta::CONFIG.to_string(), provenance.config.clone());
    checkpoint::save_atomic(out, tensors, &metadata)?;

    // The example: a fixed pseudo-random uint8 batch and its features (and projections).
    let (c, s) = (enc.in_channels, enc.image_size);
    let mut rng = ChaCha8Rng::seed_from_u64(20240501);
    let pixels: Vec<u8> = (0..EXAMPLE_BATCH * c * s * s).map(|_| rng.random::<u8>()).collect();
    let obs = Tensor::from_vec(pixels, (EXAMPLE_BATCH, c, s, s), &Device::Cpu)?; // (4, 9, 84, 84) u8
    let x = obs.to_dtype(DType::F32)?;
    let mut example = BTreeMap::new();
    match latent {
        Some(latent) => {
            let (net, _) = EncoderProjector::from_tensors(enc, latent, tensors, &Device::Cpu)?;
            let features = net.forward(&x)?;
            example.insert("features".to_string(), features.encoded.h.detach()); // (4, 39200)
            example.insert("projection".to_string(), features.z.detach()); // (4, latent)
        }
        None => {
            let encoder = Encoder::from_tensors(enc, ENCODER_PREFIX, tensors)?;
            example.insert("features".to_string(), encoder.forward(&x)?.detach());
            // (4, 39200)
        }
    }
    example.insert("obs".to_string(), obs);
    let mut example_meta = HashMap::new();
    example_meta.insert("format".to_string(), "pt".to_string());
    example_meta.insert(kind::KEY.to_string(), kind::EXPORT_EXAMPLE.to_string());
    example_meta.insert("lfs.encoder".to_string(), out.display().to_string());
    example_meta.insert("lfs.input".to_string(), INPUT_CONVENTION.to_string());
    let example_file = example_path(out);
    checkpoint::save_atomic(&example_file, &example, &example_meta)?;
    Ok(example_file)
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
    let found = meta(kind::KEY)?;
    if found == kind::EXPLORE_CHECKPOINT || found == kind::EXPLORER_STATE {
        // An `lfs explore` run exports its encoder itself, at every checkpoint.
        let run = checkpoint_path
            .parent()
            .and_then(Path::parent)
            .unwrap_or(Path::new("."));
        let encoder = run.join("encoder.safetensors");
        return Err(err(match encoder.exists() {
            true => format!(
                "an `lfs explore` checkpoint: the run writes its encoder itself, in lfs export's format: use {}",
                encoder.display()
            ),
            false => format!(
                "an `lfs explore` checkpoint whose run has not yet written {}: it writes its encoder at every checkpoint",
                encoder.display()
            ),
        }));
    }
    run_dir::expect_kind(
        checkpoint_path,
        &found,
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
    let (_, params) = EncoderProjector::from_tensors(&cfg.model.encoder, cfg.model.latent_dim, &online, &Device::Cpu)?;
    let mut tensors: BTreeMap<String, Tensor> = params.snapshot()?;
    if contents == ExportContents::EncoderOnly {
        tensors.retain(|name, _| name.starts_with(ENCODER_PREFIX));
    }

    let provenance = Provenance {
        method: method.clone(),
        step,
        source: checkpoint_path.to_path_buf(),
        config: meta(run_dir::meta::CONFIG)?,
        datasets: file.metadata.get(run_dir::meta::DATASETS).cloned(),
    };
    let with_projector = contents == ExportContents::EncoderAndProjector;
    let example_file = write_files(
        out,
        &tensors,
        &cfg.model.encoder,
        Some(cfg.model.latent_dim),
        with_projector,
        &provenance,
    )?;
    Ok(ExportSummary {
        encoder: out.to_path_buf(),
        example: example_file,
        step,
        method,
        contents,
    })
}
