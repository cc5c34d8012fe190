//! `lfs export`: the online conv encoder and projector of a checkpoint as a PyTorch-loadable
//! safetensors file (`encoder.convnet.{0,2,4,6}.{weight,bias}`, `projector.{weight,bias}`,
//! metadata `format = pt` plus architecture, input convention and provenance), and beside it
//! `<stem>.example.safetensors`: a fixed input batch and the features this encoder computes
//! for it, so any loader can check itself. With [`ExportContents::EncoderOnly`] the file holds
//! the conv encoder alone (~120 KB instead of ~20 MB at the default sizes), which is all that
//! downstream RL and the probe read. The file's format, written and read, is
//! [`crate::nn::encoder_file`]'s.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use candle_core::{Device, Tensor};

use crate::nn::encoder_file::{write_files, Provenance};
use crate::nn::encoder_projector::ENCODER_PREFIX;
use crate::nn::{checkpoint, EncoderProjector};
use crate::pretrain::config::PretrainConfig;
use crate::run_dir::{self, kind};
use crate::{Error, Result};

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
