//! A dataset's files on disk as the commit protocol (`writer.rs`) leaves them: the ingest lock,
//! the chunked files, data files staged between a commit's two renames and their publication,
//! the temporary files an interrupted run left, and the committed index read back (by the
//! writer at open and by the reader).

use std::fs::{self, File};
use std::path::{Path, PathBuf};

use super::episodes::{read_episodes, EpisodeRecord};
use super::layout::*;
use crate::fsutil::{self, FileLock};
use crate::{Error, Result};

/// The lock file a writer holds for its lifetime ([`FileLock`]): two ingests into one dataset
/// would clobber each other's files.
pub(super) const LOCK_FILE: &str = ".lfs-ingest.lock";

pub(super) fn lock_dataset(root: &Path) -> Result<FileLock> {
    let path = root.join(LOCK_FILE);
    match FileLock::try_acquire(&path) {
        Ok(Some(lock)) => Ok(lock),
        Ok(None) => Err(Error::shard(
            root,
            "another ingest is writing this dataset; wait for it to finish",
        )),
        Err(e) => Err(Error::shard(&path, format!("cannot take the ingest lock: {e}"))),
    }
}

/// Every `*.parquet` file under `dir/chunk-*/`.
pub(super) fn chunked_files(dir: &Path) -> Result<Vec<(FileId, PathBuf)>> {
    let mut out = Vec::new();
    let Ok(chunks) = fs::read_dir(dir) else { return Ok(out) };
    for chunk in chunks.flatten() {
        let Ok(files) = fs::read_dir(chunk.path()) else {
            continue;
        };
        for f in files.flatten() {
            let p = f.path();
            if let Some(id) = FileId::parse(&p) {
                out.push((id, p));
            }
        }
    }
    out.sort();
    Ok(out)
}

/// Delete the hidden `.…tmp` files an interrupted run left under `dir`.
pub(super) fn remove_temp_files(dir: &Path) -> Result<usize> {
    let mut removed = 0;
    let Ok(entries) = fs::read_dir(dir) else { return Ok(0) };
    for e in entries.flatten() {
        let p = e.path();
        let name = e.file_name().to_string_lossy().to_string();
        if p.is_dir() {
            removed += remove_temp_files(&p)?;
        } else if name.starts_with('.') && name.ends_with(".tmp") {
            fs::remove_file(&p)?;
            removed += 1;
        }
    }
    Ok(removed)
}

/// Where the data file `id` is: its final name, or while a commit is between its two renames
/// (or was killed there), its staged temporary name. `None` when neither exists.
pub(crate) fn committed_data_path(root: &Path, id: FileId) -> Option<PathBuf> {
    let path = id.data_path(root);
    if path.exists() {
        return Some(path);
    }
    let staged = fsutil::temp_path(&path);
    staged.exists().then_some(staged)
}

/// Finishes the commits an interrupted run left between the index and the data file's rename:
/// every data file the index lists gets its final name. An indexed data file that exists under
/// neither name is an error naming it (something other than an ingest removed it).
pub(super) fn publish_staged(root: &Path, committed: &[EpisodeRecord]) -> Result<()> {
    let files: std::collections::BTreeSet<FileId> = committed.iter().map(|r| r.data_file).collect();
    for id in files {
        let path = id.data_path(root);
        match committed_data_path(root, id) {
            Some(p) if p == path => {}
            Some(staged) => {
                File::open(&staged)?.sync_all()?;
                fs::rename(&staged, &path)?;
            }
            None => {
                return Err(Error::shard(
                    &path,
                    "missing: the episodes index lists this data file but it is gone (restore it, or remove the dataset and ingest again)",
                ))
            }
        }
    }
    Ok(())
}

/// Read `meta/lfs.json`.
pub(crate) fn read_lfs_meta(root: &Path) -> Result<Option<LfsMeta>> {
    let path = root.join(LFS_META_PATH);
    match fs::read(&path) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| Error::shard(path, format!("invalid JSON: {e}"))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::shard(path, format!("cannot read: {e}"))),
    }
}

/// Every committed episode of the dataset at `root`, in episode order.
pub(crate) fn read_all_episodes(root: &Path) -> Result<Vec<EpisodeRecord>> {
    let mut all = Vec::new();
    for (_, path) in chunked_files(&root.join(EPISODES_DIR))? {
        all.extend(read_episodes(&path)?);
    }
    all.sort_by_key(|r| r.episode_index);
    Ok(all)
}
