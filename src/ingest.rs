//! `lfs ingest`: a folder of videos becomes a dataset of Parquet frame shards.
//!
//! Sources are hashed, decoded and encoded in parallel (one FFmpeg thread per decoder, one
//! decoder per worker); the writer appends the results in source order, so episode indices
//! do not depend on which worker finished first. A source that fails is reported and
//! skipped; the others are ingested. Re-running skips sources already in the dataset.

use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant, UNIX_EPOCH};

use sha2::{Digest, Sha256};

use crate::collect::{read_sidecar_beside, sidecar_path};
use crate::shards::{
    count_mismatch, encode_frames, DatasetWriter, EpisodeRecord, EpisodeState, FeatureStats, FrameCodec, NewEpisode,
    SourceInfo, WriterSettings,
};
use crate::video::{self, Deadline, DecodeOptions, DecodedEpisode, Discovered, Source, SourceKind};
use crate::{fsutil, Error, Result};

/// What `lfs ingest` was asked to do.
#[derive(Debug, Clone)]
pub struct IngestOptions {
    pub video_dir: PathBuf,
    pub out: PathBuf,
    pub decode: DecodeOptions,
    pub frame_codec: FrameCodec,
    /// Task label for every source (default: the first folder level under `video_dir`).
    pub task: Option<String>,
    /// Parallel decoders.
    pub jobs: usize,
    /// Commit (make durable) at least this often; a crash loses at most this much work.
    pub commit_every: Duration,
    /// Resample every source to this many frames per second ([`video::resample`], FFmpeg's
    /// `fps` filter); None keeps each source's frames at its own rate.
    pub fps: Option<u32>,
}

/// Why a source was not ingested this time although nothing is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Skip {
    /// Same path, size and modification time as an ingested episode.
    Unchanged { episode_index: i64 },
    /// Same content (SHA-256) as an ingested episode or an earlier source of this run.
    SameContent { episode_index: i64, path: String },
}

#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    Ingested {
        episode_index: i64,
        frames: usize,
        /// Its sidecar's state or rewards were not stored: the dataset has no columns for them
        /// ([`NO_STATE_COLUMNS`]).
        state_not_stored: bool,
    },
    Skipped(Skip),
    /// The reason, naming the file.
    Failed(String),
}

/// One source's fate.
#[derive(Debug, Clone)]
pub struct SourceReport {
    pub path: PathBuf,
    pub task: String,
    pub outcome: Outcome,
}

/// The whole run.
#[derive(Debug, Default)]
pub struct IngestReport {
    pub sources: Vec<SourceReport>,
    /// Files that are neither videos, frame images nor sidecars.
    pub ignored: Vec<PathBuf>,
    pub dataset_episodes: usize,
    pub dataset_frames: u64,
    pub dataset_tasks: usize,
    /// The distinct frame rates of the dataset's sources, increasing.
    pub source_rates: Vec<f64>,
    pub seconds: f64,
}

impl IngestReport {
    pub fn count(&self, pred: impl Fn(&Outcome) -> bool) -> usize {
        self.sources.iter().filter(|s| pred(&s.outcome)).count()
    }

    pub fn failed(&self) -> usize {
        self.count(|o| matches!(o, Outcome::Failed(_)))
    }

    pub fn frames_ingested(&self) -> usize {
        self.sources
            .iter()
            .map(|s| match s.outcome {
                Outcome::Ingested { frames, .. } => frames,
                _ => 0,
            })
            .sum()
    }

    /// Episodes, frames and tasks of the whole dataset: earlier runs' and this run's.
    fn count_dataset(&mut self, writer: &DatasetWriter) {
        let all: Vec<_> = writer.earlier().iter().chain(writer.appended()).collect();
        self.dataset_episodes = all.len();
        self.dataset_frames = all.iter().map(|r| r.length as u64).sum();
        let mut tasks: Vec<&str> = all.iter().map(|r| r.task.as_str()).collect();
        tasks.sort_unstable();
        tasks.dedup();
        self.dataset_tasks = tasks.len();
        self.source_rates = crate::shards::source_rates(all.iter().copied());
    }
}

/// Progress callbacks (the CLI draws a bar or prints lines; the library never prints).
pub trait Progress: Sync {
    fn start(&self, _sources: usize) {}
    fn source_done(&self, _report: &SourceReport) {}
}

/// No progress output.
pub struct Silent;
impl Progress for Silent {}

/// The task label of `source`: the first folder level under `root`; sources directly in
/// `root` take `root`'s own name.
pub fn task_label(root: &Path, source: &Path) -> String {
    let rel = source.strip_prefix(root).unwrap_or(source);
    let mut parts = rel.components();
    match (parts.next(), parts.next()) {
        (Some(first), Some(_)) => first.as_os_str().to_string_lossy().to_string(),
        _ => {
            let base = if root.is_file() {
                root.parent().unwrap_or(root)
            } else {
                root
            };
            base.file_name()
                .map_or_else(|| "default".into(), |n| n.to_string_lossy().to_string())
        }
    }
}

/// Size, mtime (ns) of a source; for an image folder, the sum of sizes and latest mtime.
fn stat(source: &Source) -> Result<(i64, i64)> {
    let err = |e: std::io::Error| Error::decode(&source.path, format!("cannot read: {e}"));
    let mtime = |m: &fs::Metadata| {
        m.modified()
            .ok()
            .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_nanos() as i64)
    };
    match source.kind {
        SourceKind::Video => {
            let m = fs::metadata(&source.path).map_err(err)?;
            Ok((m.len() as i64, mtime(&m)))
        }
        SourceKind::ImageSequence => {
            let (mut size, mut latest) = (0i64, 0i64);
            for f in video::sequence_files(&source.path).map_err(err)? {
                let m = fs::metadata(&f).map_err(err)?;
                size += m.len() as i64;
                latest = latest.max(mtime(&m));
            }
            Ok((size, latest))
        }
    }
}

/// SHA-256 of a file, or of an image folder's frame names and bytes in frame order. Only
/// regular files are read, and reading stops at `deadline` (`--timeout` covers hashing too).
fn content_hash(source: &Source, deadline: &Deadline) -> Result<String> {
    let err = |p: &Path, e: std::io::Error| Error::decode(p, format!("cannot read: {e}"));
    let mut h = Sha256::new();
    let hash_file = |p: &Path, h: &mut Sha256| -> Result<()> {
        let mut f = fsutil::open_regular(p).map_err(|e| err(p, e))?;
        let mut buf = vec![0u8; 1 << 20];
        loop {
            if deadline.passed() {
                return Err(deadline.error(&source.path, "while hashing"));
            }
            let n = f.read(&mut buf).map_err(|e| err(p, e))?;
            if n == 0 {
                return Ok(());
            }
            h.update(&buf[..n]);
        }
    };
    match source.kind {
        SourceKind::Video => hash_file(&source.path, &mut h)?,
        SourceKind::ImageSequence => {
            for f in video::sequence_files(&source.path).map_err(|e| err(&source.path, e))? {
                h.update(
                    f.file_name()
                        .map(|n| n.to_string_lossy().to_string())
                        .unwrap_or_default()
                        .as_bytes(),
                );
                hash_file(&f, &mut h)?;
            }
        }
    }
    Ok(hex::encode(h.finalize()))
}

/// Everything a worker needs for one source.
#[derive(Clone)]
struct Job {
    source: Source,
    task: String,
    size_bytes: i64,
    mtime_ns: i64,
}

enum Prepared {
    Duplicate(Skip),
    Episode(Box<NewEpisode>, String),
}

/// Hashes, decodes and encodes one source (on a worker thread); a source whose content is
/// already `known` is not decoded. `--timeout` bounds hashing and decoding together. A panic
/// (a bug, or one inside a library) fails this source by name instead of aborting the ingest.
fn prepare(job: &Job, opts: &IngestOptions, known: &ByContent) -> Result<Prepared> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| prepare_source(job, opts, known))).unwrap_or_else(
        |panic| {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            Err(Error::decode(
                &job.source.path,
                format!("internal error (panic: {what})"),
            ))
        },
    )
}

fn prepare_source(job: &Job, opts: &IngestOptions, known: &ByContent) -> Result<Prepared> {
    let deadline = Deadline::after(opts.decode.timeout);
    let sha256 = content_hash(&job.source, &deadline)?;
    if let Some((episode_index, path)) = known.get(&sha256) {
        return Ok(Prepared::Duplicate(Skip::SameContent {
            episode_index: *episode_index,
            path: path.clone(),
        }));
    }
    let mut decoded = video::decode_within(&job.source, &opts.decode, &deadline)?;
    let mut sidecar = read_sidecar_beside(&job.source.path)?;
    if let Some(s) = &sidecar {
        if let Some(why) = count_mismatch(s.state.as_ref(), s.rewards.as_deref(), decoded.num_frames()) {
            return Err(Error::decode(&s.path, why));
        }
    }
    let (state, rewards) = sidecar
        .as_mut()
        .map_or((None, None), |s| (s.state.take(), s.rewards.take()));
    let at_rate = AtRate::of(&mut decoded, state, rewards, opts.fps);
    let frames = encode_frames(&at_rate.frames, decoded.width, decoded.height, opts.frame_codec)?;
    let image_stats = FeatureStats::of_rgb_frames(&at_rate.frames, at_rate.timestamps.len());
    let episode = NewEpisode {
        task: job.task.clone(),
        source: SourceInfo {
            path: job.source.path.to_string_lossy().to_string(),
            size_bytes: job.size_bytes,
            mtime_ns: job.mtime_ns,
            sha256: sha256.clone(),
            width: decoded.source_width.into(),
            height: decoded.source_height.into(),
            fps: decoded.fps,
            codec: decoded.codec.clone(),
            rotation: decoded.rotation.into(),
        },
        render_quality: sidecar.as_ref().and_then(|s| s.render_quality),
        sidecar: sidecar.map(|s| s.json),
        state: at_rate.state,
        rewards: at_rate.rewards,
        timestamps: at_rate.timestamps,
        frames,
        image_stats,
    };
    Ok(Prepared::Episode(Box::new(episode), sha256))
}

/// An episode's frames (HWC RGB, concatenated), timestamps, state rows and rewards as the
/// dataset stores them: as decoded, or resampled to `--fps` (the source's own record, `source/*`
/// and the sidecar, still describes the source).
struct AtRate {
    frames: Vec<u8>,
    timestamps: Vec<f32>,
    state: Option<EpisodeState>,
    rewards: Option<Vec<f32>>,
}

impl AtRate {
    /// Takes the decoded frames (as they are, or after picking the resampled ones).
    fn of(
        decoded: &mut DecodedEpisode,
        state: Option<EpisodeState>,
        rewards: Option<Vec<f32>>,
        fps: Option<u32>,
    ) -> Self {
        let Some(fps) = fps else {
            return AtRate {
                frames: std::mem::take(&mut decoded.frames),
                timestamps: decoded.timestamps.iter().map(|&t| t as f32).collect(),
                state,
                rewards,
            };
        };
        let indices = video::resample::fps_filter_indices(&decoded.timestamps, decoded.fps, fps);
        AtRate {
            frames: indices.iter().flat_map(|&i| decoded.frame(i)).copied().collect(),
            // frame k at k / fps seconds, as LeRobot's timestamps are
            timestamps: (0..indices.len()).map(|k| (k as f64 / f64::from(fps)) as f32).collect(),
            state: state.map(|s| {
                let width = s.names.len();
                EpisodeState {
                    values: indices
                        .iter()
                        .flat_map(|&i| &s.values[i * width..(i + 1) * width])
                        .copied()
                        .collect(),
                    names: s.names,
                }
            }),
            rewards: rewards.map(|r| video::resample::resampled_rewards(&r, &indices)),
        }
    }
}

/// SHA-256 -> (episode index, source path) of every episode in the dataset, earlier runs' and
/// this run's: a source with the same content is skipped.
type ByContent = HashMap<String, (i64, String)>;

/// Run an ingest. Per-source problems are in the report; an `Err` means the dataset itself
/// could not be written (and what was committed before stays valid).
pub fn ingest(opts: &IngestOptions, progress: &dyn Progress) -> Result<IngestReport> {
    let started = Instant::now();
    let (root, found) = find_sources(opts)?;
    let mut writer = open_dataset(opts)?;
    let mut report = IngestReport {
        ignored: found.ignored,
        ..Default::default()
    };
    progress.start(found.sources.len() + found.rejected.len());
    let mut plan = plan_jobs(opts, &root, found.sources, writer.earlier(), progress);
    for rejected in found.rejected {
        let r = SourceReport {
            task: opts.task.clone().unwrap_or_else(|| task_label(&root, &rejected.path)),
            path: rejected.path,
            outcome: Outcome::Failed(rejected.reason),
        };
        progress.source_done(&r);
        plan.slots.push(Some(r));
    }
    let mut known: ByContent = writer
        .earlier()
        .iter()
        .map(|r| (r.source.sha256.clone(), (r.episode_index, r.source.path.clone())))
        .collect();
    prepare_and_append(opts, &mut plan, &mut known, &mut writer, progress)?;
    writer.commit()?;
    report.count_dataset(&writer);
    writer.finish()?;
    report.sources = plan.slots.into_iter().flatten().collect();
    report.seconds = started.elapsed().as_secs_f64();
    Ok(report)
}

/// The video folder (canonical) and the sources in it; an error when it holds none, before
/// anything is written.
fn find_sources(opts: &IngestOptions) -> Result<(PathBuf, Discovered)> {
    let root = fs::canonicalize(&opts.video_dir)
        .map_err(|e| Error::decode(&opts.video_dir, format!("cannot read the video folder: {e}")))?;
    // The dataset may be written inside the video folder: never read it back as a source.
    let out_abs = fs::canonicalize(&opts.out)
        .or_else(|_| std::path::absolute(&opts.out))
        .ok();
    let found = video::discover(&root, out_abs.as_deref())?;
    if found.sources.is_empty() && found.rejected.is_empty() {
        return Err(Error::decode(
            root,
            format!(
                "no videos found (looked for {} files and folders of PNG/JPEG frames)",
                video::VIDEO_EXTENSIONS.join(", ")
            ),
        ));
    }
    Ok((root, found))
}

/// Opens (or creates) the dataset at `opts.out` with this run's frame settings.
fn open_dataset(opts: &IngestOptions) -> Result<DatasetWriter> {
    let settings = WriterSettings {
        frame_codec: opts.frame_codec,
        width: opts.decode.size.width,
        height: opts.decode.size.height,
        crop: opts.decode.crop,
        fps: opts.fps,
    };
    let mut writer = DatasetWriter::open(&opts.out, settings)?;
    writer.commit_every = opts.commit_every;
    Ok(writer)
}

/// The sources still to decode, in source order, and a report slot per source.
struct Plan {
    /// (report slot, job) of each source to decode.
    jobs: Vec<(usize, Job)>,
    /// Filled at planning time for sources settled without decoding, later for the others.
    slots: Vec<Option<SourceReport>>,
}

/// Stats every source: unchanged ones (same path, size and mtime as an `earlier` episode)
/// are skipped without reading them, unreadable ones fail, the rest become jobs.
fn plan_jobs(
    opts: &IngestOptions,
    root: &Path,
    sources: Vec<Source>,
    earlier: &[EpisodeRecord],
    progress: &dyn Progress,
) -> Plan {
    let by_stat: HashMap<(String, i64, i64), i64> = earlier
        .iter()
        .map(|r| {
            (
                (r.source.path.clone(), r.source.size_bytes, r.source.mtime_ns),
                r.episode_index,
            )
        })
        .collect();
    let mut plan = Plan {
        jobs: Vec::new(),
        slots: Vec::new(),
    };
    for source in sources {
        let task = opts.task.clone().unwrap_or_else(|| task_label(root, &source.path));
        let path = source.path.clone();
        let outcome = match stat(&source) {
            Err(e) => Some(Outcome::Failed(e.to_string())),
            Ok((size, mtime)) => match by_stat.get(&(path.to_string_lossy().to_string(), size, mtime)) {
                Some(&episode_index) => Some(Outcome::Skipped(Skip::Unchanged { episode_index })),
                None => {
                    plan.jobs.push((
                        plan.slots.len(),
                        Job {
                            source,
                            task: task.clone(),
                            size_bytes: size,
                            mtime_ns: mtime,
                        },
                    ));
                    None
                }
            },
        };
        let done = outcome.map(|outcome| SourceReport { path, task, outcome });
        if let Some(r) = &done {
            progress.source_done(r);
        }
        plan.slots.push(done);
    }
    plan
}

/// Prepares the jobs on `opts.jobs` worker threads and appends the results in job order (so
/// episode indices do not depend on which worker finished first), filling their report slots.
fn prepare_and_append(
    opts: &IngestOptions,
    plan: &mut Plan,
    known: &mut ByContent,
    writer: &mut DatasetWriter,
    progress: &dyn Progress,
) -> Result<()> {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(opts.jobs.max(1))
        .build()
        .map_err(|e| Error::Io(std::io::Error::other(format!("cannot start worker threads: {e}"))))?;
    let (tx, rx) = mpsc::channel::<(usize, Result<Prepared>)>();
    let shared = Arc::new((opts.clone(), known.clone()));
    // Workers may run ahead of the writer by this many sources (bounds memory).
    let window = opts.jobs.max(1) * 4;
    let (mut next_spawn, mut next_write) = (0usize, 0usize);
    let mut ready: BTreeMap<usize, Result<Prepared>> = BTreeMap::new();
    while next_write < plan.jobs.len() {
        while next_spawn < plan.jobs.len() && next_spawn < next_write + window {
            let (tx, job, shared) = (tx.clone(), plan.jobs[next_spawn].1.clone(), shared.clone());
            let i = next_spawn;
            pool.spawn(move || {
                let result = prepare(&job, &shared.0, &shared.1);
                let _ = tx.send((i, result));
            });
            next_spawn += 1;
        }
        // Invariant: a worker was spawned for every index below next_spawn and each sends once.
        let (i, result) = rx.recv().expect("a worker result");
        ready.insert(i, result);
        while let Some(result) = ready.remove(&next_write) {
            let (slot, job) = &plan.jobs[next_write];
            let r = SourceReport {
                path: job.source.path.clone(),
                task: job.task.clone(),
                outcome: append(result, job, known, writer)?,
            };
            progress.source_done(&r);
            plan.slots[*slot] = Some(r);
            next_write += 1;
        }
    }
    Ok(())
}

/// Appends a prepared source to the dataset, unless it failed, duplicates an episode (one
/// appended since its worker started included) or has another render quality.
fn append(result: Result<Prepared>, job: &Job, known: &mut ByContent, writer: &mut DatasetWriter) -> Result<Outcome> {
    let (episode, sha) = match result {
        Err(e) => return Ok(Outcome::Failed(e.to_string())),
        Ok(Prepared::Duplicate(skip)) => return Ok(Outcome::Skipped(skip)),
        Ok(Prepared::Episode(episode, sha)) => (episode, sha),
    };
    if let Some((episode_index, path)) = known.get(&sha) {
        return Ok(Outcome::Skipped(Skip::SameContent {
            episode_index: *episode_index,
            path: path.clone(),
        }));
    }
    if let Some(reason) = writer.render_quality_conflict(episode.render_quality) {
        return Ok(Outcome::Failed(format!("{}: {reason}", job.source.path.display())));
    }
    if let Some(reason) = writer.state_names_conflict(&episode.task, episode.state.as_ref()) {
        return Ok(Outcome::Failed(format!(
            "{}: {reason}",
            sidecar_path(&job.source.path).display()
        )));
    }
    let state_not_stored = !writer.has_state_columns() && (episode.state.is_some() || episode.rewards.is_some());
    let frames = episode.timestamps.len();
    let episode_index = writer.append(*episode)?;
    known.insert(sha, (episode_index, job.source.path.to_string_lossy().to_string()));
    Ok(Outcome::Ingested {
        episode_index,
        frames,
        state_not_stored,
    })
}

/// Why a sidecar's state and rewards are not stored as columns: the dataset is older than them.
pub const NO_STATE_COLUMNS: &str = "the dataset was made by an older lfs without the observation.state and reward \
     columns and keeps its schema (the values stay in each episode's `sidecar` column); ingest into a new --out \
     to get them as columns";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn at_a_lower_rate_state_rows_follow_their_frames_and_rewards_are_summed() {
        // Six 1×1 frames at 50 fps (pixel value = frame), to 25 fps: frames 0, 2, 4.
        let mut decoded = DecodedEpisode {
            width: 1,
            height: 1,
            frames: (0..6u8).flat_map(|i| [i, i, i]).collect(),
            timestamps: (0..6).map(|i| i as f64 / 50.0).collect(),
            source_width: 1,
            source_height: 1,
            fps: 50.0,
            rotation: 0,
            codec: "test".into(),
        };
        let state = EpisodeState {
            names: vec!["x".into(), "y".into()],
            values: (0..6).flat_map(|i| [i as f32, -(i as f32)]).collect(),
        };
        let rewards = vec![1.0, 2.0, 4.0, 8.0, 16.0];
        let at = AtRate::of(&mut decoded, Some(state), Some(rewards), Some(25));
        assert_eq!(at.frames, vec![0, 0, 0, 2, 2, 2, 4, 4, 4]);
        assert_eq!(at.timestamps, vec![0.0, 0.04, 0.08]);
        assert_eq!(at.state.unwrap().values, vec![0.0, -0.0, 2.0, -2.0, 4.0, -4.0]);
        assert_eq!(at.rewards.unwrap(), vec![1.0 + 2.0, 4.0 + 8.0]);
    }

    #[test]
    fn task_label_is_the_first_folder_level() {
        let root = Path::new("/data/videos");
        assert_eq!(
            task_label(root, Path::new("/data/videos/walker_run/ep1.mp4")),
            "walker_run"
        );
        assert_eq!(
            task_label(root, Path::new("/data/videos/walker_run/day2/ep1.mp4")),
            "walker_run"
        );
        assert_eq!(task_label(root, Path::new("/data/videos/cartpole/ep7")), "cartpole");
        // Directly in the root: the root's own name.
        assert_eq!(task_label(root, Path::new("/data/videos/ep1.mp4")), "videos");
    }
}
