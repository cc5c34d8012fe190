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

/// Writes `tensors` and `metadata` to `path` atomically. The same tensors and metadata always
/// give the same bytes (see [`canonical_header`]).
pub fn save_atomic(path: &Path, tensors: &BTreeMap<String, Tensor>, metadata: &HashMap<String, String>) -> Result<()> {
    let mut bytes =
        safetensors::tensor::serialize(tensors.iter().map(|(k, v)| (k.as_str(), v)), Some(metadata.clone()))
            .map_err(|e| Error::checkpoint(path, format!("serialising safetensors: {e}")))?;
    canonical_header(&mut bytes).map_err(|e| Error::checkpoint(path, format!("serialising safetensors: {e}")))?;
    crate::fsutil::write_atomic(path, |f| f.write_all(&bytes))
        .map_err(|e| Error::checkpoint(path, format!("writing: {e}")))
}

/// Rewrites a serialised safetensors file's JSON header with every key in sorted order.
///
/// The safetensors crate writes `__metadata__` in its `HashMap`'s iteration order, which is
/// seeded per process, so re-exporting the same checkpoint gave a file with another sha256, and
/// an evaluation resuming against that file refused it as a different encoder. Sorting changes
/// neither the header's length nor any tensor offset, so the data section stays where it is.
fn canonical_header(bytes: &mut [u8]) -> std::result::Result<(), String> {
    let len_prefix: [u8; 8] = bytes
        .get(..8)
        .ok_or("shorter than its 8-byte header length")?
        .try_into()
        .unwrap();
    let header_end = 8 + u64::from_le_bytes(len_prefix) as usize;
    let header = bytes.get(8..header_end).ok_or("header runs past the end")?;
    let mut entries: BTreeMap<String, serde_json::Value> =
        serde_json::from_slice(header).map_err(|e| format!("reading back its own header: {e}"))?;
    // `__metadata__` is parsed on its own into a BTreeMap: a `serde_json::Value` object would
    // keep insertion order if serde_json's `preserve_order` feature were ever enabled.
    let metadata: Option<BTreeMap<String, String>> = entries
        .remove("__metadata__")
        .map(serde_json::from_value)
        .transpose()
        .map_err(|e| format!("reading back its own metadata: {e}"))?;
    #[derive(serde::Serialize)]
    struct Header {
        #[serde(rename = "__metadata__", skip_serializing_if = "Option::is_none")]
        metadata: Option<BTreeMap<String, String>>,
        #[serde(flatten)]
        tensors: BTreeMap<String, serde_json::Value>,
    }
    let sorted = serde_json::to_vec(&Header {
        metadata,
        tensors: entries,
    })
    .map_err(|e| e.to_string())?;
    if sorted.len() > header.len() {
        return Err(format!(
            "sorted header is {} bytes, the original {}",
            sorted.len(),
            header.len()
        ));
    }
    // The crate pads the header with spaces to an 8-byte boundary; keep the same length.
    let padded = sorted.into_iter().chain(std::iter::repeat(b' ')).take(header.len());
    for (dst, src) in bytes[8..header_end].iter_mut().zip(padded) {
        *dst = src;
    }
    Ok(())
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
    let bytes = std::fs::read(path).map_err(|e| Error::checkpoint(path, format!("reading: {e}")))?;
    from_bytes(path, &bytes)
}

/// Parses the bytes of the safetensors file at `path` (named in errors).
pub fn from_bytes(path: &Path, bytes: &[u8]) -> Result<SafetensorsFile> {
    let shard_err = |reason: String| Error::checkpoint(path, reason);
    let (_, header) = safetensors::SafeTensors::read_metadata(bytes)
        .map_err(|e| shard_err(format!("not a safetensors file: {e}")))?;
    let metadata = header.metadata().clone().unwrap_or_default();
    let tensors = candle_core::safetensors::load_buffer(bytes, &Device::Cpu)
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Re-exporting a checkpoint must give the same file: evaluation cells identify their
    /// encoder by the export's sha256. Each `HashMap` gets its own hash seed, so two maps with
    /// the same twelve entries iterate in different orders (almost surely), as they did across
    /// the processes of a restarted study.
    #[test]
    fn the_same_tensors_and_metadata_give_the_same_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let tensors: BTreeMap<String, Tensor> = [
            (
                "conv.weight",
                Tensor::arange(0f32, 24., &Device::Cpu)
                    .unwrap()
                    .reshape((2, 3, 4))
                    .unwrap(),
            ),
            ("fc.bias", Tensor::new(&[1u8, 2, 3], &Device::Cpu).unwrap()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        let entries: Vec<(String, String)> = (0..12).map(|i| (format!("lfs.key{i}"), format!("value {i}"))).collect();
        let forward: HashMap<String, String> = entries.iter().cloned().collect();
        let backward: HashMap<String, String> = entries.iter().rev().cloned().collect();
        let (a, b) = (dir.path().join("a.safetensors"), dir.path().join("b.safetensors"));
        save_atomic(&a, &tensors, &forward).unwrap();
        save_atomic(&b, &tensors, &backward).unwrap();
        assert_eq!(std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap());

        // Still a valid file with everything in it.
        let read = load(&a).unwrap();
        assert_eq!(read.metadata, forward);
        assert_eq!(read.tensors.keys().collect::<Vec<_>>(), ["conv.weight", "fc.bias"]);
        assert_eq!(
            read.tensors["conv.weight"]
                .flatten_all()
                .unwrap()
                .to_vec1::<f32>()
                .unwrap(),
            (0..24).map(|i| i as f32).collect::<Vec<_>>()
        );
        assert_eq!(read.tensors["fc.bias"].to_vec1::<u8>().unwrap(), [1, 2, 3]);
    }
}
