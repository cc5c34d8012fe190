//! Finding the sources (episodes) under a video folder.

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::{Error, Result};

/// File extensions taken as videos (case-insensitive). Anything FFmpeg can demux works; these
/// are the names we look for.
pub const VIDEO_EXTENSIONS: &[&str] = &[
    "mp4", "m4v", "webm", "mkv", "avi", "mov", "gif", "mpg", "mpeg", "ts", "flv", "wmv", "ogv",
];

/// Extensions of frame images in an image-sequence folder.
pub const IMAGE_EXTENSIONS: &[&str] = &["png", "jpg", "jpeg"];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceKind {
    /// A video file decoded with FFmpeg.
    Video,
    /// A folder of numbered PNG/JPEG frames.
    ImageSequence,
}

/// One episode to ingest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Source {
    pub path: PathBuf,
    pub kind: SourceKind,
}

/// What a walk of the video folder found.
#[derive(Debug, Default)]
pub struct Discovered {
    /// Sources in a stable order (sorted by path).
    pub sources: Vec<Source>,
    /// Files that are neither videos, frame images nor sidecars; listed in the summary.
    pub ignored: Vec<PathBuf>,
    /// Entries that look like sources but cannot be read as one, each with the reason: a FIFO,
    /// socket or device named like a video, a folder that cannot be listed, a symlink loop.
    /// The ingest reports them as failed and goes on with the rest.
    pub rejected: Vec<Rejected>,
}

/// An entry of the video folder that is not walked or read, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejected {
    pub path: PathBuf,
    /// Names the entry.
    pub reason: String,
}

impl Rejected {
    fn new(path: &Path, reason: impl std::fmt::Display) -> Self {
        Self {
            path: path.to_path_buf(),
            reason: format!("{}: {reason}", path.display()),
        }
    }
}

fn has_extension(path: &Path, exts: &[&str]) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| exts.iter().any(|x| e.eq_ignore_ascii_case(x)))
}

fn is_hidden(path: &Path) -> bool {
    path.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.starts_with('.'))
}

/// Walk `root` (a folder, or a single video file) and list its sources.
///
/// A folder that directly holds frame images is one image-sequence episode; its sub-folders
/// are still walked. Hidden entries, sidecar `.json` files and the folder `skip` (the dataset
/// being written, when it lies inside `root`) are skipped. Symlinks are followed, except one
/// that leads back to a folder being walked (a loop): it is rejected, so the walk ends.
pub fn discover(root: &Path, skip: Option<&Path>) -> Result<Discovered> {
    let meta = fs::metadata(root).map_err(|e| Error::decode(root, format!("cannot read the video folder: {e}")))?;
    let mut found = Discovered::default();
    if meta.is_file() {
        found.sources.push(Source {
            path: root.to_path_buf(),
            kind: SourceKind::Video,
        });
        return Ok(found);
    }
    let read_dir = fs::read_dir(root).map_err(|e| Error::decode(root, format!("cannot list folder: {e}")))?;
    let mut walk = Walk {
        skip,
        found: &mut found,
        ancestors: vec![(meta.dev(), meta.ino(), root.to_path_buf())],
    };
    walk.folder(root, read_dir);
    found.sources.sort_by(|a, b| a.path.cmp(&b.path));
    found.rejected.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(found)
}

/// One walk of the video folder.
struct Walk<'a> {
    skip: Option<&'a Path>,
    found: &'a mut Discovered,
    /// (device, inode, path) of the folders from the root down to the one being listed.
    ancestors: Vec<(u64, u64, PathBuf)>,
}

impl Walk<'_> {
    fn folder(&mut self, dir: &Path, read_dir: fs::ReadDir) {
        let (skip, found) = (self.skip, &mut *self.found);
        let mut entries: Vec<PathBuf> = read_dir.filter_map(|e| e.ok().map(|e| e.path())).collect();
        entries.sort();
        let mut has_images = false;
        let mut folders = Vec::new();
        for path in entries {
            if is_hidden(&path) || skip.is_some_and(|s| s == path) {
                continue;
            }
            // Follow symlinks: a folder of links to videos is a common way to build a dataset.
            let Ok(meta) = fs::metadata(&path) else {
                // A dangling link, a link to itself or an entry that vanished: report it as a
                // source so the summary names it with the reason.
                found.sources.push(Source {
                    path,
                    kind: SourceKind::Video,
                });
                continue;
            };
            if meta.is_dir() {
                folders.push((path, meta));
            } else if has_extension(&path, VIDEO_EXTENSIONS) {
                if meta.is_file() {
                    found.sources.push(Source {
                        path,
                        kind: SourceKind::Video,
                    });
                } else {
                    // Reading a FIFO or a device blocks or never ends: never open one.
                    let kind = crate::fsutil::special_file_kind(&meta);
                    found
                        .rejected
                        .push(Rejected::new(&path, format!("not a regular file ({kind}); skipped")));
                }
            } else if has_extension(&path, IMAGE_EXTENSIONS) {
                has_images = has_images || meta.is_file();
            } else if !has_extension(&path, &["json"]) {
                found.ignored.push(path);
            }
        }
        if has_images {
            found.sources.push(Source {
                path: dir.to_path_buf(),
                kind: SourceKind::ImageSequence,
            });
        }
        for (path, meta) in folders {
            self.subfolder(&path, &meta);
        }
    }

    fn subfolder(&mut self, path: &Path, meta: &fs::Metadata) {
        let id = (meta.dev(), meta.ino());
        if let Some((_, _, ancestor)) = self.ancestors.iter().find(|(d, i, _)| (*d, *i) == id) {
            let reason = format!("symlink loop: leads back to {}; not followed", ancestor.display());
            self.found.rejected.push(Rejected::new(path, reason));
            return;
        }
        match fs::read_dir(path) {
            Ok(read_dir) => {
                self.ancestors.push((id.0, id.1, path.to_path_buf()));
                self.folder(path, read_dir);
                self.ancestors.pop();
            }
            Err(e) => self
                .found
                .rejected
                .push(Rejected::new(path, format!("cannot list folder: {e}"))),
        }
    }
}

/// The frame images of an image-sequence folder in frame order: by the last number in the
/// file name (so `frame_2.png` comes before `frame_10.png`), then by name.
pub fn sequence_frames(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut frames: Vec<PathBuf> = fs::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| !is_hidden(p) && p.is_file() && has_extension(p, IMAGE_EXTENSIONS))
        .collect();
    frames.sort_by_cached_key(|p| {
        let stem = p.file_stem().and_then(|s| s.to_str()).unwrap_or_default().to_string();
        (last_number(&stem), stem)
    });
    Ok(frames)
}

fn last_number(s: &str) -> Option<u64> {
    let bytes = s.as_bytes();
    let end = bytes.iter().rposition(|b| b.is_ascii_digit())? + 1;
    let start = bytes[..end]
        .iter()
        .rposition(|b| !b.is_ascii_digit())
        .map_or(0, |i| i + 1);
    s[start..end].parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn last_number_takes_the_final_digit_run() {
        assert_eq!(last_number("frame_000012"), Some(12));
        assert_eq!(last_number("cam2_frame10"), Some(10));
        assert_eq!(last_number("frame"), None);
        assert_eq!(last_number("7"), Some(7));
    }
}
