//! Crash-safe file writes: every file the project produces is written to a temporary name in
//! the destination folder and renamed into place, so a reader sees the old file or the new one,
//! never a torn one.

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// The temporary name used while `path` is being written: `.<name>.tmp` beside it.
///
/// The leading dot and the `.tmp` suffix keep it out of globs such as `*/*.parquet` that
/// LeRobot and pyarrow use to discover shards.
pub fn temp_path(path: &Path) -> PathBuf {
    let name = path.file_name().map(|n| n.to_string_lossy()).unwrap_or_default();
    path.with_file_name(format!(".{name}.tmp"))
}

/// Create the parent folder of `path` if needed.
pub fn ensure_parent(path: &Path) -> io::Result<()> {
    match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => fs::create_dir_all(parent),
        _ => Ok(()),
    }
}

/// Write `path` atomically with the bytes produced by `write`, syncing the data before the
/// rename so a crash after the rename cannot leave an empty file behind. The file gets mode
/// 0644 whatever the umask (checkpoints and exports are meant to be shared).
pub fn write_atomic<F>(path: &Path, write: F) -> io::Result<()>
where
    F: FnOnce(&mut File) -> io::Result<()>,
{
    ensure_parent(path)?;
    let tmp = temp_path(path);
    let result = (|| {
        let mut file = File::create(&tmp)?;
        write(&mut file)?;
        file.flush()?;
        file.sync_all()?;
        set_mode_0644(&file)?;
        fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

#[cfg(unix)]
fn set_mode_0644(file: &File) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    file.set_permissions(fs::Permissions::from_mode(0o644))
}

#[cfg(not(unix))]
fn set_mode_0644(_file: &File) -> io::Result<()> {
    Ok(())
}

/// Write a byte slice atomically.
pub fn write_bytes_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    write_atomic(path, |f| f.write_all(bytes))
}

/// Rename a finished temporary file into place (used when the writer needs the open file,
/// e.g. a Parquet writer, and cannot go through [`write_atomic`]).
pub fn commit_temp(tmp: &Path, path: &Path) -> io::Result<()> {
    File::open(tmp)?.sync_all()?;
    fs::rename(tmp, path)
}
