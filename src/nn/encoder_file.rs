//! The encoder file (`lfs export`'s format): written by [`write_files`] (for `lfs export` and
//! for `lfs explore` at each checkpoint), and read back for
//! downstream use by [`ExportFile`]: the conv encoder f as constants, the file's identity
//! (sha256) and its provenance. `lfs eval`, `lfs train --init-encoder`, `lfs probe` and suites
//! read encoders through here.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use candle_core::{DType, Device, Tensor};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use sha2::{Digest, Sha256};

use crate::env::RenderQuality;
use crate::nn::encoder_projector::ENCODER_PREFIX;
use crate::nn::{checkpoint, Encoder, EncoderConfig, EncoderProjector};
use crate::run_dir::{self, kind};
use crate::{Error, Result};

/// Input convention written into the metadata and docs/pytorch.md.
pub const INPUT_CONVENTION: &str = "float32 or uint8 tensor (B, 9, 84, 84): 3 RGB frames stacked oldest first in \
channels (F_{t-2}, F_{t-1}, F_t; the first frame repeated at an episode start), raw pixel values 0..255; \
the encoder divides by 255 itself (no -0.5 shift)";

/// Examples in the `.example.safetensors` file.
pub const EXAMPLE_BATCH: usize = 4;

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

/// An exported encoder read back for downstream use.
#[derive(Debug, Clone)]
pub struct FrozenEncoder {
    /// The conv encoder f over constant tensors: no `Var`, so no optimiser can reach it.
    pub encoder: Encoder,
    /// Its architecture, from the file's `lfs.architecture` metadata.
    pub config: EncoderConfig,
    /// The file's metadata (method, step, datasets, config of the pre-training run).
    pub metadata: HashMap<String, String>,
}

/// An `lfs export` file, read once: the one place that checks its kind, hashes it and reads
/// its provenance. Runs that use it record [`ExportFile::sha256`] as the encoder's identity.
#[derive(Debug, Clone)]
pub struct ExportFile {
    pub file: checkpoint::SafetensorsFile,
    /// sha256 of the file's bytes, hex.
    pub sha256: String,
}

impl ExportFile {
    /// Reads `path`; an error names it when it is unreadable, not safetensors, or another
    /// kind of lfs file.
    pub fn read(path: &Path) -> Result<Self> {
        let bytes = std::fs::read(path).map_err(|e| Error::checkpoint(path, format!("reading: {e}")))?;
        let file = checkpoint::from_bytes(path, &bytes)?;
        check_is_export(path, file.meta(kind::KEY)?)?;
        Ok(Self {
            file,
            sha256: hex::encode(Sha256::digest(&bytes)),
        })
    }

    pub fn path(&self) -> &Path {
        &self.file.path
    }

    /// The render quality of the DMControl videos the encoder was pre-trained on, when
    /// `lfs collect` made them (None for videos from elsewhere).
    pub fn training_render_quality(&self) -> Option<RenderQuality> {
        training_render_quality(&self.file.metadata)
    }

    /// The encoder f as constants (the projector is not needed downstream and is left out).
    /// Errors name the file, or the tensor that is missing or has another shape.
    pub fn frozen_encoder(&self) -> Result<FrozenEncoder> {
        let path = self.path();
        let arch: serde_json::Value = serde_json::from_str(self.file.meta("lfs.architecture")?)
            .map_err(|e| Error::checkpoint(path, format!("`lfs.architecture`: {e}")))?;
        let field = |key: &str| {
            arch.get(key)
                .and_then(serde_json::Value::as_u64)
                .map(|v| v as usize)
                .ok_or_else(|| Error::checkpoint(path, format!("`lfs.architecture` has no integer `{key}`")))
        };
        let config = EncoderConfig {
            in_channels: field("in_channels")?,
            image_size: field("image_size")?,
            num_filters: field("num_filters")?,
            num_layers: field("num_layers")?,
            ..EncoderConfig::default()
        };
        let encoder = Encoder::from_tensors(&config, ENCODER_PREFIX, &self.file.tensors)?;
        Ok(FrozenEncoder {
            encoder,
            config,
            metadata: self.file.metadata.clone(),
        })
    }
}

/// Loads the encoder f of an `lfs export` file as constants ([`ExportFile::frozen_encoder`]).
pub fn load_frozen_encoder(path: &Path) -> Result<FrozenEncoder> {
    ExportFile::read(path)?.frozen_encoder()
}

/// The training render quality an export file at `path` records, reading its header only;
/// errors as [`ExportFile::read`] for a file that is not an export.
pub fn recorded_render_quality(path: &Path) -> Result<Option<RenderQuality>> {
    let metadata = checkpoint::read_metadata(path)?;
    let kind = metadata
        .get(kind::KEY)
        .ok_or_else(|| Error::checkpoint(path, "no `lfs.kind` in the metadata: not an lfs file"))?;
    check_is_export(path, kind)?;
    Ok(training_render_quality(&metadata))
}

fn check_is_export(path: &Path, found: &str) -> Result<()> {
    run_dir::expect_kind(path, found, kind::EXPORT, "an encoder written by `lfs export`")
}

/// The render quality recorded in an export's `lfs.datasets` (None for ingested videos).
fn training_render_quality(metadata: &HashMap<String, String>) -> Option<RenderQuality> {
    let datasets: serde_json::Value = serde_json::from_str(metadata.get(run_dir::meta::DATASETS)?).ok()?;
    datasets
        .as_array()?
        .iter()
        .find_map(|d| d.get("render_quality")?.as_str()?.parse().ok())
}
