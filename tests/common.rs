//! Helpers shared by the integration tests: running the `lfs` binary and FFmpeg.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output};
use std::time::{Duration, Instant};

/// The checkout the tests run from (pipelines/, eval/, datasets/ are read relative to it).
pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The project venv's interpreter (`LFS_PYTHON`, else `.venv/bin/python`, as `lfs` itself
/// chooses); a missing venv is a test failure with the fix in the message.
pub fn python() -> PathBuf {
    let python = lfs::env::default_python();
    assert!(
        python.exists(),
        "{} not found: run `make setup` first (or set LFS_PYTHON)",
        python.display()
    );
    python
}

/// Run the `lfs` binary built for these tests.
pub fn lfs(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_lfs"))
        .args(args)
        .output()
        .expect("run lfs")
}

pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The `lfs` binary as a command run in the checkout, with headless MuJoCo (`MUJOCO_GL`, egl
/// unless set) and no scheduler job-array index inherited from the environment.
pub fn lfs_in_repo() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_lfs"));
    cmd.current_dir(repo())
        .env("MUJOCO_GL", std::env::var("MUJOCO_GL").unwrap_or_else(|_| "egl".into()))
        .env_remove("SLURM_ARRAY_TASK_ID")
        .env_remove("JOB_COMPLETION_INDEX");
    cmd
}

/// What a finished command said: stdout, then stderr.
pub fn output_text(out: &Output) -> String {
    format!("{}{}", text(&out.stdout), text(&out.stderr))
}

/// Waits until `cond` holds, failing after `secs` or if `child` ends first.
pub fn wait_for(child: &mut Child, secs: u64, what: &str, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(
            start.elapsed() < Duration::from_secs(secs),
            "waited {secs} s for {what}"
        );
        assert!(child.try_wait().unwrap().is_none(), "the process ended before {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The running test lacks `what`, which `install` provides. Under `CI=true` that fails, naming
/// both: CI installs every such dependency (.ci/run), so a missing one is a broken CI, not a pass.
/// Elsewhere the test is skipped loudly; the caller returns.
#[track_caller]
pub fn missing(what: &str, install: &str) {
    let ci = std::env::var("CI").is_ok_and(|v| v == "true");
    assert!(
        !ci,
        "needs {what}: {install} (CI=true: a missing dependency fails the test)"
    );
    skipped(&format!("needs {what}: {install}; under CI=true this fails"));
}

/// Says on the terminal that the running test skipped its checks and why. libtest hides what a
/// passing test prints with `eprintln!`, so this writes to stderr directly, beside its
/// `test … ok` line; the caller returns.
pub fn skipped(why: &str) {
    use std::io::Write;
    let name = std::thread::current().name().unwrap_or("a test").to_string();
    let _ = writeln!(std::io::stderr(), "\nSKIPPED {name}: {why}");
}

/// Every element of a tensor as f64, flattened (for comparisons with reference values).
pub fn values(t: &candle_core::Tensor) -> Vec<f64> {
    t.flatten_all()
        .unwrap()
        .to_dtype(candle_core::DType::F64)
        .unwrap()
        .to_vec1()
        .unwrap()
}

/// Run the `ffmpeg` command line (the independent reference decoder and fixture maker).
pub fn ffmpeg(args: &[&str]) -> Vec<u8> {
    let out = Command::new("ffmpeg")
        .args(["-hide_banner", "-loglevel", "error", "-nostdin", "-y"])
        .args(args)
        .output()
        .expect("ffmpeg is installed (apt-get install ffmpeg)");
    assert!(out.status.success(), "ffmpeg {args:?} failed: {}", text(&out.stderr));
    out.stdout
}

/// `ffprobe -v error -select_streams v:0 <args> -of csv=p=0 <path>`, one value per line.
pub fn ffprobe(args: &[&str], path: &Path) -> Vec<String> {
    let out = Command::new("ffprobe")
        .args(["-v", "error", "-select_streams", "v:0"])
        .args(args)
        .args(["-of", "csv=p=0"])
        .arg(path)
        .output()
        .expect("ffprobe is installed");
    text(&out.stdout)
        .lines()
        .map(|l| l.trim().trim_end_matches(',').to_string())
        .filter(|l| !l.is_empty())
        .collect()
}

/// Frames FFmpeg's own decoder counts in the first video stream (`ffprobe -count_frames`).
pub fn ffprobe_frame_count(path: &Path) -> usize {
    let lines = ffprobe(&["-count_frames", "-show_entries", "stream=nb_read_frames"], path);
    lines
        .first()
        .and_then(|l| l.parse().ok())
        .unwrap_or_else(|| panic!("ffprobe count for {path:?}: {lines:?}"))
}

/// Presentation times (s) of every decoded frame, per ffprobe.
pub fn ffprobe_frame_times(path: &Path) -> Vec<f64> {
    ffprobe(&["-show_entries", "frame=best_effort_timestamp_time"], path)
        .iter()
        .map(|l| l.parse().unwrap())
        .collect()
}

/// Decode `path` to raw RGB24 frames at `w`x`h` with the FFmpeg CLI (`scale` with bilinear
/// filtering, no crop): the reference for pixel checks.
pub fn ffmpeg_rgb(path: &Path, w: u32, h: u32) -> Vec<u8> {
    ffmpeg_rgb_filtered(path, &format!("scale={w}:{h}:flags=bilinear"))
}

/// Decode `path` to raw RGB24 frames with the FFmpeg CLI through the filter chain `vf`.
pub fn ffmpeg_rgb_filtered(path: &Path, vf: &str) -> Vec<u8> {
    ffmpeg(&[
        "-i",
        path.to_str().unwrap(),
        "-vf",
        vf,
        "-vsync",
        "passthrough",
        "-pix_fmt",
        "rgb24",
        "-f",
        "rawvideo",
        "-",
    ])
}

/// A fresh temporary folder (`lfs-<name>-*` in the system's temporary folder), removed when the
/// guard drops, unless the test is failing: a failed test's files stay for a look (their path is
/// in its messages). A README walk leaves 1-3.6 GB; kept, 575 of them once filled the disk.
pub fn temp_dir(name: &str) -> TestDir {
    TestDir {
        path: fixture_dir(name),
    }
}

/// A fresh temporary folder for a fixture that tests share through a static (`OnceLock`): kept,
/// since statics never drop (small: videos, a probe set; `temp_dir` is for everything else).
pub fn fixture_dir(name: &str) -> PathBuf {
    tempfile::Builder::new()
        .prefix(&format!("lfs-{name}-"))
        .tempdir()
        .unwrap()
        .keep()
}

/// [`temp_dir`]'s folder: a path that removes itself unless the thread is panicking.
pub struct TestDir {
    path: PathBuf,
}

impl std::ops::Deref for TestDir {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.path
    }
}

impl AsRef<Path> for TestDir {
    fn as_ref(&self) -> &Path {
        &self.path
    }
}

impl Drop for TestDir {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

/// Mean and max absolute difference of two equally long byte slices.
pub fn abs_diff(a: &[u8], b: &[u8]) -> (f64, u8) {
    assert_eq!(a.len(), b.len(), "different lengths");
    let mut sum = 0u64;
    let mut max = 0u8;
    for (x, y) in a.iter().zip(b) {
        let d = x.abs_diff(*y);
        sum += u64::from(d);
        max = max.max(d);
    }
    (sum as f64 / a.len().max(1) as f64, max)
}

/// (n, 3, h, w) -> (n, h, w, 3).
pub fn chw_to_hwc(chw: &[u8], w: usize, h: usize) -> Vec<u8> {
    let plane = w * h;
    let mut out = vec![0u8; chw.len()];
    for (f, frame) in chw.chunks_exact(3 * plane).enumerate() {
        for p in 0..plane {
            for c in 0..3 {
                out[f * 3 * plane + p * 3 + c] = frame[c * plane + p];
            }
        }
    }
    out
}

/// An `lfs eval` run folder's results but for wall-clock: eval.csv's rows without their
/// `total_time` column, and train.jsonl's lines without `train/fps` and the `time/` parts.
pub fn run_results(dir: &Path) -> (Vec<String>, Vec<serde_json::Value>) {
    let eval = std::fs::read_to_string(dir.join("eval.csv")).unwrap();
    let rows = eval
        .lines()
        .map(|l| l.rsplit_once(',').unwrap().0.to_string())
        .collect();
    let train = std::fs::read_to_string(dir.join("train.jsonl"))
        .unwrap()
        .lines()
        .map(|l| {
            let mut v: serde_json::Value = serde_json::from_str(l).unwrap();
            let line = v.as_object_mut().unwrap();
            line.remove("train/fps");
            line.retain(|key, _| !key.starts_with("time/"));
            v
        })
        .collect();
    (rows, train)
}

/// Checks a run folder's TensorBoard event file against its own logs with TensorBoard's reader
/// (eval/check_tensorboard.py): every number of the logs, at its x, once.
pub fn check_tensorboard(run: &Path) {
    let out = Command::new(python())
        .arg(repo().join("eval/check_tensorboard.py"))
        .arg(run)
        .output()
        .expect("run eval/check_tensorboard.py");
    assert!(
        out.status.success(),
        "{}: TensorBoard's events differ from the logs:\n{}",
        run.display(),
        output_text(&out)
    );
}
