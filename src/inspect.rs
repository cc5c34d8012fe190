//! `lfs inspect`: what is in a dataset, and a contact sheet to look at it.

use std::collections::BTreeMap;
use std::path::Path;

use image::RgbImage;

use crate::shards::{Dataset, FileId};
use crate::{fsutil, Result};

/// Per-task counts.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskSummary {
    pub task: String,
    pub episodes: usize,
    pub frames: u64,
    /// Shortest and longest episode, in frames.
    pub min_len: i64,
    pub max_len: i64,
}

/// What `lfs inspect` prints.
#[derive(Debug, Clone)]
pub struct Summary {
    pub id: String,
    pub tasks: Vec<TaskSummary>,
    pub episodes: usize,
    pub frames: u64,
    /// Bytes of the data files on disk.
    pub data_bytes: u64,
    pub data_files: usize,
}

pub fn summarize(ds: &Dataset) -> Summary {
    let mut tasks: BTreeMap<&str, TaskSummary> = BTreeMap::new();
    for r in &ds.episodes {
        let t = tasks.entry(&r.task).or_insert_with(|| TaskSummary {
            task: r.task.clone(),
            episodes: 0,
            frames: 0,
            min_len: i64::MAX,
            max_len: 0,
        });
        t.episodes += 1;
        t.frames += r.length as u64;
        t.min_len = t.min_len.min(r.length);
        t.max_len = t.max_len.max(r.length);
    }
    let mut files: Vec<FileId> = ds.episodes.iter().map(|r| r.data_file).collect();
    files.sort();
    files.dedup();
    let data_bytes = files
        .iter()
        .filter_map(|f| std::fs::metadata(f.data_path(&ds.root)).ok())
        .map(|m| m.len())
        .sum();
    Summary {
        id: ds.id(),
        tasks: tasks.into_values().collect(),
        episodes: ds.episodes.len(),
        frames: ds.num_frames(),
        data_bytes,
        data_files: files.len(),
    }
}

/// A grid of sampled frames: one row per task (in [`summarize`]'s order), `per_task` frames
/// spread evenly over that task's frames, 2-pixel gaps.
pub fn contact_sheet(ds: &Dataset, per_task: usize) -> Result<RgbImage> {
    let (w, h) = (ds.meta.width as usize, ds.meta.height as usize);
    let summary = summarize(ds);
    let gap = 2;
    let cols = per_task.max(1);
    let mut sheet = RgbImage::from_pixel(
        (cols * (w + gap) + gap) as u32,
        (summary.tasks.len() * (h + gap) + gap) as u32,
        image::Rgb([255, 255, 255]),
    );
    for (row, task) in summary.tasks.iter().enumerate() {
        let episodes: Vec<_> = ds.episodes.iter().filter(|r| r.task == task.task).collect();
        let total = task.frames as usize;
        for col in 0..cols {
            // The frame at the middle of the col-th equal slice of the task's frames.
            let mut k = ((2 * col + 1) * total) / (2 * cols);
            let Some(record) = episodes.iter().find(|r| {
                if k < r.length as usize {
                    true
                } else {
                    k -= r.length as usize;
                    false
                }
            }) else {
                continue;
            };
            let ep = ds.load_episode(record)?;
            let chw = ep.frame(k);
            let (x0, y0) = (gap + col * (w + gap), gap + row * (h + gap));
            for y in 0..h {
                for x in 0..w {
                    let p = y * w + x;
                    let px = image::Rgb([chw[p], chw[w * h + p], chw[2 * w * h + p]]);
                    sheet.put_pixel((x0 + x) as u32, (y0 + y) as u32, px);
                }
            }
        }
    }
    Ok(sheet)
}

/// Write a contact sheet as PNG, atomically.
pub fn write_contact_sheet(ds: &Dataset, per_task: usize, out: &Path) -> Result<()> {
    let sheet = contact_sheet(ds, per_task)?;
    let mut bytes = Vec::new();
    sheet
        .write_to(&mut std::io::Cursor::new(&mut bytes), image::ImageFormat::Png)
        // Encoding into memory fails only for an image that does not fit its own size.
        .map_err(|e| crate::Error::Encode {
            path: out.to_path_buf(),
            reason: format!("PNG encoding failed: {e}"),
        })?;
    fsutil::write_bytes_atomic(out, &bytes)?;
    Ok(())
}
