"""`make bench-ingest`: frames/s of `lfs ingest` against the FFmpeg command line decoding and
scaling the same files to raw 84x84 RGB, and against eval/bench/ingest_pyav.py, in one run,
interleaved, medians of --reps. All three use --jobs parallel workers with one FFmpeg thread
each. Prints a Markdown table (paste it into BENCHMARKS.md with the command).

    python eval/bench/bench_ingest.py --lfs target/release/lfs [--videos 16 --frames 150]
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent


def sh(cmd, **kw):
    subprocess.run(cmd, check=True, stdin=subprocess.DEVNULL, **kw)


# The two workloads: camera-like demonstration videos, and what `lfs collect` writes for the
# paper's DMControl set (84x84 lossless FFV1, 250 frames).
WORKLOADS = {
    "demo": {"size": "640x480", "frames": 150, "videos": 16, "ext": "mp4",
             "codec": ["-c:v", "libx264", "-preset", "veryfast", "-pix_fmt", "yuv420p"]},
    "dmc": {"size": "84x84", "frames": 250, "videos": 24, "ext": "mkv",
            "codec": ["-c:v", "ffv1", "-pix_fmt", "gbrp"]},
}


def make_videos(root: Path, w: dict) -> list:
    """Clips of a moving test pattern. Each starts at another time of the pattern, so no two
    files are alike (lfs skips duplicate content, which would make it do less work)."""
    paths = []
    for i in range(w["videos"]):
        p = root / "task" / f"clip{i:03d}.{w['ext']}"
        p.parent.mkdir(parents=True, exist_ok=True)
        if not p.exists():
            sh(["ffmpeg", "-loglevel", "error", "-y", "-ss", str(7 * i), "-f", "lavfi", "-i",
                f"testsrc2=size={w['size']}:rate=30", "-frames:v", str(w["frames"]), *w["codec"], str(p)])
        paths.append(p)
    return paths


def crop_filter(w: int, h: int, out: int = 84) -> str:
    s = max(out / w, out / h)
    sw, sh_ = max(out, round(w * s)), max(out, round(h * s))
    return f"scale={sw}:{sh_}:flags=bilinear,crop={out}:{out}:{(sw - out) // 2}:{(sh_ - out) // 2}"


def run_lfs(lfs: str, videos: Path, out: Path, jobs: int, expect_frames: int):
    shutil.rmtree(out, ignore_errors=True)
    res = subprocess.run([lfs, "ingest", str(videos), "--out", str(out), "-j", str(jobs)], check=True,
                         stdin=subprocess.DEVNULL, capture_output=True, text=True)
    # Same work as the others: every frame of every file ingested.
    assert f", {expect_frames} frames in" in res.stdout, res.stdout


def run_ffmpeg(paths: list, vf: str, jobs: int):
    def one(p):
        sh(["ffmpeg", "-nostdin", "-loglevel", "error", "-threads", "1", "-filter_threads", "1", "-i", str(p),
            "-vf", vf, "-pix_fmt", "rgb24", "-f", "rawvideo", "-y", "/dev/null"])
    with ThreadPoolExecutor(jobs) as ex:
        list(ex.map(one, paths))


def run_pyav(videos: Path, out: Path, jobs: int):
    sh([sys.executable, str(HERE / "ingest_pyav.py"), str(videos), str(out), "--jobs", str(jobs)], stdout=subprocess.DEVNULL)


def bench(args, name: str, w: dict) -> None:
    work = Path(args.work)
    videos = work / f"videos-{name}-{w['size']}-{w['videos']}x{w['frames']}f"
    paths = make_videos(videos, w)
    width, height = map(int, w["size"].split("x"))
    vf = crop_filter(width, height)
    total = w["videos"] * w["frames"]
    runners = {
        "lfs ingest (PNG, Parquet)": lambda: run_lfs(args.lfs, videos, work / "lfs-ds", args.jobs, total),
        "ffmpeg CLI (decode+scale to raw RGB, no output)": lambda: run_ffmpeg(paths, vf, args.jobs),
        "PyAV + PIL + pyarrow (PNG, Parquet)": lambda: run_pyav(videos, work / "pyav.parquet", args.jobs),
    }
    times = {k: [] for k in runners}
    for _ in range(args.reps):
        for key, run in runners.items():  # interleaved
            t = time.perf_counter()
            run()
            times[key].append(time.perf_counter() - t)
    med = {k: statistics.median(v) for k, v in times.items()}
    lfs_key = next(iter(runners))
    print(f"\n### {name}: {w['videos']} videos x {w['frames']} frames, {w['size']} {w['ext']} -> 84x84, "
          f"jobs={args.jobs}, median of {args.reps} interleaved runs\n")
    print("| pipeline | median s | frames/s | lfs speed-up (x) |")
    print("|---|---|---|---|")
    for k in runners:
        print(f"| {k} | {med[k]:.2f} | {total / med[k]:.0f} | {med[k] / med[lfs_key]:.2f} |")
    (work / f"result-{name}.json").write_text(json.dumps({"times": times, "frames": total, "workload": w}, indent=1))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--lfs", default="target/release/lfs")
    ap.add_argument("--work", default="bench-out/ingest")
    ap.add_argument("--workload", choices=[*WORKLOADS, "all"], default="all")
    ap.add_argument("--jobs", type=int, default=os.cpu_count())
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    print(f"load average before: {os.getloadavg()}")
    for name, w in WORKLOADS.items():
        if args.workload in (name, "all"):
            bench(args, name, w)
    print(f"\nload average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
