//! Checkpoints and every other safetensors file the project writes: atomic writes (temp file +
//! fsync + rename, so a killed run never leaves a truncated file), reads that return the tensors
//! with the file's metadata, and the RNG state a resumable run stores in that metadata.

use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::path::{Path, PathBuf};

use candle_core::{Device, Tensor};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use crate::{Error, Result};

/// Tensors and string metadata of one safetensors file.
#[derive(Debug, Clone)]
pub struct SafetensorsFile {
    /// Where it was read from (named in errors).
    pub path: PathBuf,
    pub tensors: BTreeMap<String, Tensor>,
    pub metadata: HashMap<String, String>,
}

impl SafetensorsFile {
    /// The metadata entry `key`, or an error naming the file and the key.
    pub fn meta(&self, key: &str) -> Result<&str> {
        self.metadata
            .get(key)
            .map(String::as_str)
            .ok_or_else(|| Error::checkpoint(&self.path, format!("no `{key}` in the checkpoint metadata")))
    }

    /// The tensors under `prefix`, with the prefix removed.
    pub fn strip_prefix(&self, prefix: &str) -> BTreeMap<String, Tensor> {
        strip_prefix(&self.tensors, prefix)
    }
}

/// The tensors of `tensors` under `prefix`, with the prefix removed.
pub fn strip_prefix(tensors: &BTreeMap<String, Tensor>, prefix: &str) -> BTreeMap<String, Tensor> {
    tensors
        .iter()
        .filter_map(|(k, v)| k.strip_prefix(prefix).map(|k| (k.to_string(), v.clone())))
        .collect()
}

/// The metadata key under which every checkpoint records the lfs version that wrote it.
pub const VERSION_KEY: &str = "lfs.version";

/// This build's version, as written under [`VERSION_KEY`].
pub const THIS_VERSION: &str = env!("CARGO_PKG_VERSION");

/// Refuses to resume from a checkpoint another lfs version wrote: its tensors, optimiser state
/// and RNG stream are only known to match the code that wrote them.
pub fn check_same_version(file: &SafetensorsFile) -> Result<()> {
    let written = file.meta(VERSION_KEY)?;
    if written != THIS_VERSION {
        return Err(Error::checkpoint(
            &file.path,
            format!(
                "was written by lfs {written}, this is lfs {THIS_VERSION}; resume it with lfs {written}, or start a new --out-dir"
            ),
        ));
    }
    Ok(())
}

/// Writes `tensors` and `metadata` to `path` atomically.
pub fn save_atomic(path: &Path, tensors: &BTreeMap<String, Tensor>, metadata: &HashMap<String, String>) -> Result<()> {
    let bytes = safetensors::tensor::serialize(tensors.iter().map(|(k, v)| (k.as_str(), v)), Some(metadata.clone()))
        .map_err(|e| Error::checkpoint(path, format!("serialising safetensors: {e}")))?;
    crate::fsutil::write_atomic(path, |f| f.write_all(&bytes))
        .map_err(|e| Error::checkpoint(path, format!("writing: {e}")))
}

/// `seed_hex:stream:word_pos`: the full state of a ChaCha8 RNG, for checkpoint metadata.
pub fn rng_to_string(rng: &ChaCha8Rng) -> String {
    format!(
        "{}:{}:{}",
        hex::encode(rng.get_seed()),
        rng.get_stream(),
        rng.get_word_pos()
    )
}

/// The RNG [`rng_to_string`] wrote.
pub fn rng_from_string(s: &str) -> std::result::Result<ChaCha8Rng, String> {
    let parts: Vec<&str> = s.split(':').collect();
    let [seed, stream, pos] = parts.as_slice() else {
        return Err(format!("expected seed:stream:word_pos, got {s:?}"));
    };
    let seed: [u8; 32] = hex::decode(seed)
        .map_err(|e| e.to_string())?
        .try_into()
        .map_err(|_| "seed is not 32 bytes".to_string())?;
    let mut rng = ChaCha8Rng::from_seed(seed);
    rng.set_stream(stream.parse::<u64>().map_err(|e| e.to_string())?);
    rng.set_word_pos(pos.parse::<u128>().map_err(|e| e.to_string())?);
    Ok(rng)
}

/// Reads every tensor (onto the CPU) and the metadata of a safetensors file.
pub fn load(path: &Path) -> Result<SafetensorsFile> {
    let shard_err = |reason: String| Error::checkpoint(path, reason);
    let bytes = std::fs::read(path).map_err(|e| shard_err(format!("reading: {e}")))?;
    let (_, header) = safetensors::SafeTensors::read_metadata(&bytes)
        .map_err(|e| shard_err(format!("not a safetensors file: {e}")))?;
    let metadata = header.metadata().clone().unwrap_or_default();
    let tensors = candle_core::safetensors::load_buffer(&bytes, &Device::Cpu)
        .map_err(|e| shard_err(format!("loading tensors: {e}")))?
        .into_iter()
        .collect();
    Ok(SafetensorsFile {
        path: path.to_path_buf(),
        tensors,
        metadata,
    })
}

/// Only the string metadata of a safetensors file (reads the header, not the tensors).
pub fn read_metadata(path: &Path) -> Result<HashMap<String, String>> {
    use std::io::Read;
    let shard_err = |reason: String| Error::checkpoint(path, reason);
    let mut f = std::fs::File::open(path).map_err(|e| shard_err(format!("reading: {e}")))?;
    let mut len = [0u8; 8];
    f.read_exact(&mut len)
        .map_err(|e| shard_err(format!("reading the header length: {e}")))?;
    let n = u64::from_le_bytes(len);
    if n > 100_000_000 {
        return Err(shard_err(format!("not a safetensors file (header length {n})")));
    }
    let mut header = vec![0u8; n as usize];
    f.read_exact(&mut header)
        .map_err(|e| shard_err(format!("reading the header: {e}")))?;
    let json: serde_json::Value =
        serde_json::from_slice(&header).map_err(|e| shard_err(format!("not a safetensors header: {e}")))?;
    let meta = json
        .get("__metadata__")
        .and_then(|m| m.as_object())
        .cloned()
        .unwrap_or_default();
    Ok(meta
        .into_iter()
        .filter_map(|(k, v)| v.as_str().map(|s| (k, s.to_string())))
        .collect())
}
