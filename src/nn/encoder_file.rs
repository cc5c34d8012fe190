//! An `lfs export` file read back for downstream use ([`ExportFile`]): the conv encoder f as
//! constants, the file's identity (sha256) and its provenance. `lfs eval`, `lfs train
//! --init-encoder`, `lfs probe` and suites read encoders through here; `lfs export`
//! ([`crate::pretrain::export`]) writes them.

use std::collections::HashMap;
use std::path::Path;

use sha2::{Digest, Sha256};

use crate::env::RenderQuality;
use crate::nn::encoder_projector::ENCODER_PREFIX;
use crate::nn::{checkpoint, Encoder, EncoderConfig};
use crate::run_dir::{self, kind};
use crate::{Error, Result};

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
