//! Crash-safe file writes: every file the project produces is written to a temporary name in
//! the destination folder and renamed into place, so a reader sees the old file or the new one,
//! never a torn one. And the one lock ([`FileLock`], [`claim_dir`]) by which a process claims a
//! folder it writes, so that a second writer is refused by name instead of clobbering it.

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
    write_atomic_via(path, &temp_path(path), write)
}

/// [`write_atomic`] through `tmp`.
fn write_atomic_via<F>(path: &Path, tmp: &Path, write: F) -> io::Result<()>
where
    F: FnOnce(&mut File) -> io::Result<()>,
{
    ensure_parent(path)?;
    let result = (|| {
        let mut file = File::create(tmp)?;
        write(&mut file)?;
        file.flush()?;
        file.sync_all()?;
        set_mode_0644(&file)?;
        fs::rename(tmp, path)
    })();
    if result.is_err() {
        let _ = fs::remove_file(tmp);
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

/// Write a byte slice atomically to a file that several writers may write at the same moment
/// (a suite folder's `suite.toml`, which every cell of a SLURM array writes as it starts): each
/// write goes through its own temporary file (process id and a counter in its name), so one
/// writer's rename cannot take another's temporary file away. The last rename wins.
pub fn write_bytes_atomic_shared(path: &Path, bytes: &[u8]) -> io::Result<()> {
    static WRITES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = WRITES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let name = path.file_name().map(|n| n.to_string_lossy()).unwrap_or_default();
    let tmp = path.with_file_name(format!(".{name}.{}.{n}.tmp", std::process::id()));
    write_atomic_via(path, &tmp, |f| f.write_all(bytes))
}

/// Rename a finished temporary file into place (used when the writer needs the open file,
/// e.g. a Parquet writer, and cannot go through [`write_atomic`]).
pub fn commit_temp(tmp: &Path, path: &Path) -> io::Result<()> {
    File::open(tmp)?.sync_all()?;
    fs::rename(tmp, path)
}

/// What a file that is neither a regular file nor a folder is, for messages ("a FIFO").
pub fn special_file_kind(meta: &fs::Metadata) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    let t = meta.file_type();
    if t.is_fifo() {
        "a FIFO"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else {
        "not a file"
    }
}

/// Opens `path` for reading only if it is a regular file: a FIFO named like a video would block
/// the open (or the reads) forever, a device would never end. The open itself does not block
/// (`O_NONBLOCK`, which changes nothing for a regular file's reads); the kind is checked on the
/// opened file, so a swap between a check and the open cannot slip through.
pub fn open_regular(path: &Path) -> io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = File::options().read(true).custom_flags(libc::O_NONBLOCK).open(path)?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        let kind = special_file_kind(&meta);
        return Err(io::Error::other(format!("not a regular file ({kind})")));
    }
    Ok(file)
}

/// An exclusive lock on a file (`flock`), held while the value lives: the one way a process
/// claims a folder it writes (a dataset, a run, a suite cell). The kernel releases it when the
/// process dies, however it dies, so a lock is never stale; the file itself stays.
pub struct FileLock {
    _file: File,
}

impl FileLock {
    /// Takes the lock at `path` (creating the file and its folder), or `None` when another
    /// open file holds it, in this process or another.
    pub fn try_acquire(path: &Path) -> io::Result<Option<FileLock>> {
        ensure_parent(path)?;
        let file = File::options().create(true).truncate(false).write(true).open(path)?;
        Ok(try_flock(&file)?.then_some(FileLock { _file: file }))
    }

    /// Whether some open file holds the lock at `path` now.
    pub fn is_held(path: &Path) -> bool {
        let Ok(file) = File::options().write(true).open(path) else {
            return false;
        };
        matches!(try_flock(&file), Ok(false))
    }
}

/// Claims the output folder `dir` of an `lfs <stage>` run for this process: a [`FileLock`] on
/// `dir/.lfs-<stage>.lock`, or an error naming the folder when another process writes it.
pub fn claim_dir(dir: &Path, stage: &str) -> crate::Result<FileLock> {
    let path = dir.join(format!(".lfs-{stage}.lock"));
    match FileLock::try_acquire(&path) {
        Ok(Some(lock)) => Ok(lock),
        Ok(None) => Err(crate::Error::checkpoint(
            dir,
            format!("another `lfs {stage}` is writing this folder; wait for it to finish or use another one"),
        )),
        Err(e) => Err(crate::Error::checkpoint(&path, format!("locking: {e}"))),
    }
}

/// `flock(LOCK_EX | LOCK_NB)`: true when taken, false when held elsewhere.
fn try_flock(file: &File) -> io::Result<bool> {
    use std::os::fd::AsRawFd;
    // SAFETY: flock on a file descriptor this `File` owns for the duration of the call.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
        return Ok(true);
    }
    let err = io::Error::last_os_error();
    if err.raw_os_error() == Some(libc::EWOULDBLOCK) {
        Ok(false)
    } else {
        Err(err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Eight writers of one file at once (a job array's cells writing suite.toml as they start):
    /// every write succeeds, the file holds the text whole, and no temporary file is left. With
    /// one temporary name for all writers (`write_bytes_atomic`), a rename finds its temporary
    /// file already taken by another writer's rename and fails (ENOENT).
    #[test]
    fn concurrent_writers_of_one_file_all_succeed() {
        let dir = std::env::temp_dir().join(format!("lfs-fsutil-shared-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        let path = dir.join("suite.toml");
        let text = "name = \"x\"\n".repeat(2000);
        std::thread::scope(|s| {
            for _ in 0..8 {
                s.spawn(|| {
                    for _ in 0..50 {
                        write_bytes_atomic_shared(&path, text.as_bytes()).unwrap();
                    }
                });
            }
        });
        assert_eq!(fs::read_to_string(&path).unwrap(), text);
        let left: Vec<_> = fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(left.len(), 1, "{left:?}");
        fs::remove_dir_all(&dir).unwrap();
    }
}
