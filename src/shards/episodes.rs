//! The episodes table (`meta/episodes/chunk-XXX/file-XXX.parquet`): one row per episode with
//! LeRobot's columns (`episode_index`, `tasks`, `length`, `data/*`, `dataset_*_index`,
//! `meta/episodes/*`, `stats/*`) plus this tool's `source/*` provenance columns.

use std::path::Path;
use std::sync::Arc;

use arrow_array::builder::{Float64Builder, Int64Builder, ListBuilder, StringBuilder};
use arrow_array::{Array, ArrayRef, Float64Array, Int64Array, ListArray, RecordBatch, StringArray};
use parquet::arrow::ArrowWriter;

use super::layout::FileId;
use super::stats::FeatureStats;
use super::{open_parquet, writer_props};
use crate::env::RenderQuality;
use crate::{Error, Result};

/// Where an episode came from.
#[derive(Debug, Clone, PartialEq)]
pub struct SourceInfo {
    /// Absolute path of the video file or image folder at ingest time.
    pub path: String,
    pub size_bytes: i64,
    /// Modification time (ns since the epoch): with path and size, lets a re-run skip a source
    /// without hashing it again.
    pub mtime_ns: i64,
    /// SHA-256 of the file (of the sorted frame files' names and bytes for an image folder).
    pub sha256: String,
    /// Size as displayed (after rotation), before scaling.
    pub width: i64,
    pub height: i64,
    pub fps: f64,
    pub codec: String,
    /// Clockwise rotation applied from the display matrix, degrees.
    pub rotation: i64,
}

/// One row of the episodes table.
#[derive(Debug, Clone, PartialEq)]
pub struct EpisodeRecord {
    pub episode_index: i64,
    pub task: String,
    pub length: i64,
    pub data_file: FileId,
    pub dataset_from_index: i64,
    pub dataset_to_index: i64,
    pub meta_file: FileId,
    pub source: SourceInfo,
    /// DMControl render quality from the `lfs collect` sidecar, if any.
    pub render_quality: Option<RenderQuality>,
    /// The sidecar JSON (task, seed, actions, rewards…) verbatim, if any.
    pub sidecar: Option<String>,
    /// Per-feature statistics, keyed by feature name (LeRobot's `stats/<key>/<stat>` columns).
    pub stats: Vec<(String, FeatureStats)>,
}

fn list_f64(values: impl Iterator<Item = Vec<f64>>) -> ArrayRef {
    let mut b = ListBuilder::new(Float64Builder::new());
    for v in values {
        b.values().append_slice(&v);
        b.append(true);
    }
    Arc::new(b.finish())
}

fn list_i64(values: impl Iterator<Item = i64>) -> ArrayRef {
    let mut b = ListBuilder::new(Int64Builder::new());
    for v in values {
        b.values().append_value(v);
        b.append(true);
    }
    Arc::new(b.finish())
}

fn i64s(records: &[EpisodeRecord], f: impl Fn(&EpisodeRecord) -> i64) -> ArrayRef {
    Arc::new(Int64Array::from_iter_values(records.iter().map(f)))
}

fn strings<'a>(records: &'a [EpisodeRecord], f: impl Fn(&'a EpisodeRecord) -> Option<&'a str>) -> ArrayRef {
    Arc::new(records.iter().map(f).collect::<StringArray>())
}

/// Write `records` (all from one ingest run) to `path` atomically.
pub fn write_episodes(path: &Path, records: &[EpisodeRecord]) -> Result<()> {
    let mut columns: Vec<(String, ArrayRef)> = vec![
        ("episode_index".into(), i64s(records, |r| r.episode_index)),
        ("tasks".into(), {
            let mut b = ListBuilder::new(StringBuilder::new());
            for r in records {
                b.values().append_value(&r.task);
                b.append(true);
            }
            Arc::new(b.finish()) as ArrayRef
        }),
        ("length".into(), i64s(records, |r| r.length)),
        ("data/chunk_index".into(), i64s(records, |r| r.data_file.chunk.into())),
        ("data/file_index".into(), i64s(records, |r| r.data_file.file.into())),
        ("dataset_from_index".into(), i64s(records, |r| r.dataset_from_index)),
        ("dataset_to_index".into(), i64s(records, |r| r.dataset_to_index)),
        (
            "meta/episodes/chunk_index".into(),
            i64s(records, |r| r.meta_file.chunk.into()),
        ),
        (
            "meta/episodes/file_index".into(),
            i64s(records, |r| r.meta_file.file.into()),
        ),
        ("source/path".into(), strings(records, |r| Some(&r.source.path))),
        ("source/size_bytes".into(), i64s(records, |r| r.source.size_bytes)),
        ("source/mtime_ns".into(), i64s(records, |r| r.source.mtime_ns)),
        ("source/sha256".into(), strings(records, |r| Some(&r.source.sha256))),
        ("source/width".into(), i64s(records, |r| r.source.width)),
        ("source/height".into(), i64s(records, |r| r.source.height)),
        (
            "source/fps".into(),
            Arc::new(Float64Array::from_iter_values(records.iter().map(|r| r.source.fps))) as ArrayRef,
        ),
        ("source/codec".into(), strings(records, |r| Some(&r.source.codec))),
        ("source/rotation".into(), i64s(records, |r| r.source.rotation)),
        (
            "render_quality".into(),
            strings(records, |r| r.render_quality.map(RenderQuality::name)),
        ),
        ("sidecar".into(), strings(records, |r| r.sidecar.as_deref())),
    ];
    // stats/<feature>/<stat>, in the order of the first record (every record has the same keys).
    if let Some(first) = records.first() {
        for (i, (key, _)) in first.stats.iter().enumerate() {
            let stat = |r: &EpisodeRecord| r.stats[i].1.clone();
            columns.push((
                format!("stats/{key}/min"),
                list_f64(records.iter().map(|r| stat(r).min)),
            ));
            columns.push((
                format!("stats/{key}/max"),
                list_f64(records.iter().map(|r| stat(r).max)),
            ));
            columns.push((
                format!("stats/{key}/mean"),
                list_f64(records.iter().map(|r| stat(r).mean)),
            ));
            columns.push((
                format!("stats/{key}/std"),
                list_f64(records.iter().map(|r| stat(r).std)),
            ));
            columns.push((
                format!("stats/{key}/count"),
                list_i64(records.iter().map(|r| stat(r).count as i64)),
            ));
        }
    }
    let batch = RecordBatch::try_from_iter(columns)?;
    crate::fsutil::write_atomic(path, |file| {
        let mut writer = ArrowWriter::try_new(file.try_clone()?, batch.schema(), Some(writer_props(&[])))
            .map_err(std::io::Error::other)?;
        writer.write(&batch).map_err(std::io::Error::other)?;
        writer.close().map_err(std::io::Error::other)?;
        Ok(())
    })?;
    Ok(())
}

fn column<'a, T: 'static>(batch: &'a RecordBatch, name: &str, path: &Path) -> Result<&'a T> {
    batch
        .column_by_name(name)
        .ok_or_else(|| Error::shard(path, format!("missing column {name:?}")))?
        .as_any()
        .downcast_ref::<T>()
        .ok_or_else(|| Error::shard(path, format!("column {name:?} has an unexpected type")))
}

fn list_values_f64(list: &ListArray, row: usize) -> Vec<f64> {
    let values = list.value(row);
    values
        .as_any()
        .downcast_ref::<Float64Array>()
        .map(|a| a.values().to_vec())
        .unwrap_or_default()
}

/// The features of the stats columns, stats/<feature>/<stat>; the feature name itself may
/// contain '/'.
fn stat_keys(batch: &RecordBatch) -> Vec<String> {
    batch
        .schema()
        .fields()
        .iter()
        .filter_map(|f| f.name().strip_prefix("stats/")?.strip_suffix("/mean").map(String::from))
        .collect()
}

/// The task of episode row `row`: the first of its `tasks` list.
fn row_task(tasks: &ListArray, row: usize, path: &Path) -> Result<String> {
    let task_list = tasks.value(row);
    task_list
        .as_any()
        .downcast_ref::<StringArray>()
        .filter(|a| !a.is_empty())
        .map(|a| a.value(0).to_string())
        .ok_or_else(|| Error::shard(path, format!("episode row {row} has no task")))
}

/// Each feature's stats in episode row `row`, in `stat_keys`' order.
fn row_stats(
    batch: &RecordBatch,
    stat_keys: &[String],
    row: usize,
    path: &Path,
) -> Result<Vec<(String, FeatureStats)>> {
    let mut stats = Vec::with_capacity(stat_keys.len());
    for key in stat_keys {
        let list = |stat: &str| column::<ListArray>(batch, &format!("stats/{key}/{stat}"), path);
        let count = list("count")?.value(row);
        let count = count
            .as_any()
            .downcast_ref::<Int64Array>()
            .map_or(0, |a| a.value(0).max(0) as u64);
        stats.push((
            key.clone(),
            FeatureStats {
                min: list_values_f64(list("min")?, row),
                max: list_values_f64(list("max")?, row),
                mean: list_values_f64(list("mean")?, row),
                std: list_values_f64(list("std")?, row),
                count,
            },
        ));
    }
    Ok(stats)
}

/// Read every row of one episodes file.
pub fn read_episodes(path: &Path) -> Result<Vec<EpisodeRecord>> {
    let reader = open_parquet(path)?.build()?;
    let mut out = Vec::new();
    for batch in reader {
        let batch = batch.map_err(|e| Error::shard(path, format!("corrupt data: {e}")))?;
        let i64c = |name: &str| column::<Int64Array>(&batch, name, path);
        let strc = |name: &str| column::<StringArray>(&batch, name, path);
        let (episode_index, length) = (i64c("episode_index")?, i64c("length")?);
        let tasks = column::<ListArray>(&batch, "tasks", path)?;
        let (data_chunk, data_file) = (i64c("data/chunk_index")?, i64c("data/file_index")?);
        let (from, to) = (i64c("dataset_from_index")?, i64c("dataset_to_index")?);
        let (meta_chunk, meta_file) = (i64c("meta/episodes/chunk_index")?, i64c("meta/episodes/file_index")?);
        let (src_path, src_sha) = (strc("source/path")?, strc("source/sha256")?);
        let (src_size, src_mtime) = (i64c("source/size_bytes")?, i64c("source/mtime_ns")?);
        let (src_w, src_h, src_rot) = (i64c("source/width")?, i64c("source/height")?, i64c("source/rotation")?);
        let src_fps = column::<Float64Array>(&batch, "source/fps", path)?;
        let src_codec = strc("source/codec")?;
        let (quality, sidecar) = (strc("render_quality")?, strc("sidecar")?);
        let stat_keys = stat_keys(&batch);
        for row in 0..batch.num_rows() {
            let task = row_task(tasks, row, path)?;
            let opt = |a: &StringArray| (!a.is_null(row)).then(|| a.value(row).to_string());
            let render_quality = opt(quality)
                .map(|q| q.parse::<RenderQuality>())
                .transpose()
                .map_err(|e| Error::shard(path, format!("episode row {row}: {e}")))?;
            let stats = row_stats(&batch, &stat_keys, row, path)?;
            let file_id = |c: &Int64Array, f: &Int64Array| FileId {
                chunk: c.value(row) as u32,
                file: f.value(row) as u32,
            };
            out.push(EpisodeRecord {
                episode_index: episode_index.value(row),
                task,
                length: length.value(row),
                data_file: file_id(data_chunk, data_file),
                dataset_from_index: from.value(row),
                dataset_to_index: to.value(row),
                meta_file: file_id(meta_chunk, meta_file),
                source: SourceInfo {
                    path: src_path.value(row).to_string(),
                    size_bytes: src_size.value(row),
                    mtime_ns: src_mtime.value(row),
                    sha256: src_sha.value(row).to_string(),
                    width: src_w.value(row),
                    height: src_h.value(row),
                    fps: src_fps.value(row),
                    codec: src_codec.value(row).to_string(),
                    rotation: src_rot.value(row),
                },
                render_quality,
                sidecar: opt(sidecar),
                stats,
            });
        }
    }
    Ok(out)
}
