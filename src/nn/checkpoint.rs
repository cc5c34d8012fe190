//! Safetensors io: atomic writes (temp file + fsync + rename, so a killed run never leaves a
//! truncated checkpoint) and reads that return the tensors with the file's metadata.

use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::path::Path;

use candle_core::{Device, Tensor};

use crate::{Error, Result};

/// Tensors and string metadata of one safetensors file.
#[derive(Debug, Clone)]
pub struct SafetensorsFile {
    pub tensors: BTreeMap<String, Tensor>,
    pub metadata: HashMap<String, String>,
}

/// Writes `tensors` and `metadata` to `path` atomically, file mode 0644.
pub fn save_atomic(path: &Path, tensors: &BTreeMap<String, Tensor>, metadata: &HashMap<String, String>) -> Result<()> {
    let shard_err = |reason: String| Error::Shard {
        path: path.to_path_buf(),
        reason,
    };
    let bytes = safetensors::tensor::serialize(tensors.iter().map(|(k, v)| (k.as_str(), v)), Some(metadata.clone()))
        .map_err(|e| shard_err(format!("serialising safetensors: {e}")))?;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| shard_err(format!("creating directory: {e}")))?;
    }
    let file_name = path
        .file_name()
        .ok_or_else(|| shard_err("not a file path".to_string()))?;
    let tmp = path.with_file_name(format!(".{}.{}.tmp", file_name.to_string_lossy(), std::process::id()));
    let write = || -> std::io::Result<()> {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(&bytes)?;
        f.sync_all()?;
        set_mode_0644(&tmp)?;
        std::fs::rename(&tmp, path)
    };
    write().map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        shard_err(format!("writing: {e}"))
    })
}

#[cfg(unix)]
fn set_mode_0644(path: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o644))
}

#[cfg(not(unix))]
fn set_mode_0644(_path: &Path) -> std::io::Result<()> {
    Ok(())
}

/// Reads every tensor (onto the CPU) and the metadata of a safetensors file.
pub fn load(path: &Path) -> Result<SafetensorsFile> {
    let shard_err = |reason: String| Error::Shard {
        path: path.to_path_buf(),
        reason,
    };
    let bytes = std::fs::read(path).map_err(|e| shard_err(format!("reading: {e}")))?;
    let (_, header) = safetensors::SafeTensors::read_metadata(&bytes)
        .map_err(|e| shard_err(format!("not a safetensors file: {e}")))?;
    let metadata = header.metadata().clone().unwrap_or_default();
    let tensors = candle_core::safetensors::load_buffer(&bytes, &Device::Cpu)
        .map_err(|e| shard_err(format!("loading tensors: {e}")))?
        .into_iter()
        .collect();
    Ok(SafetensorsFile { tensors, metadata })
}

/// Only the string metadata of a safetensors file (reads the header, not the tensors).
pub fn read_metadata(path: &Path) -> Result<HashMap<String, String>> {
    use std::io::Read;
    let shard_err = |reason: String| Error::Shard {
        path: path.to_path_buf(),
        reason,
    };
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
