#!/usr/bin/env bash
# End-to-end agent steps/s on a lent GPU machine (issue 29, part 2): `lfs eval` with
# pipelines/sac/mini.toml (SAC on a frozen random encoder, as BENCHMARKS "The SAC loop's
# throughput" measures it on the CPU) and `lfs train` with pipelines/e2e/mini.toml (end-to-end
# SAC + LFS), each on CUDA and on the machine's CPU cores, in one command of the device tool,
# from .gpu-carry/e2e.tar.xz (eval/gpu/pack-e2e.sh). The runs' small files are copied under
# $OUT (or gpu-check-out/); agent steps/s are the training episodes' train/fps / action_repeat.
#
#   run: eval/gpu/gpu-e2e.sh              (make gpu-e2e; carry .gpu-carry)
#   E2E_FRAMES (default 3000: a 1000-frame seed episode, then two training episodes),
#   E2E_DEVICES (default "cuda cpu"), E2E_CONFIGS (default "sac e2e"), E2E_TIMEOUT (seconds per
#   run, 120: four runs fit the device tool's 10 minutes; the CPU e2e run does not finish a
#   training episode in it)
#   dry run without a GPU (the archive packed with GPU_PYTHON=3.11 for this machine's venv):
#     LD_LIBRARY_PATH=<folder with target-cuda/cuda-link/libcuda.so as libcuda.so.1>:target-cuda/release/cuda-libs \
#     LFS_PYTHON=$PWD/.venv/bin/python __EGL_VENDOR_LIBRARY_FILENAMES=/usr/share/glvnd/egl_vendor.d/50_mesa.json \
#     E2E_DEVICES=cpu eval/gpu/gpu-e2e.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-gpu-check-out}
FRAMES=${E2E_FRAMES:-3000}
DEVICES=${E2E_DEVICES:-cuda cpu}
CONFIGS=${E2E_CONFIGS:-sac e2e}
TIMEOUT=${E2E_TIMEOUT:-120}
TASK=walker_walk
mkdir -p "$OUT"
WORK=$(mktemp -d /tmp/lfs-e2e.XXXXXX)
step() { echo; echo "== $*"; }

. eval/gpu/carry-env.sh
carry_env || exit 1
nproc
"$LFS" --version
"$LFS_PYTHON" - <<'PY' 2>&1 | tee "$OUT/e2e-env.txt"
import importlib.metadata as md, sys
print("python", sys.version.split()[0])
for d in ("mujoco", "dm-control", "dm-env", "dm-tree", "PyOpenGL", "numpy", "scipy", "lxml", "absl-py"):
    try:
        print(d, md.version(d))
    except md.PackageNotFoundError:
        print(d, "missing")
from dm_control import suite
env = suite.load("walker", "walk")
env.reset()
pixels = env.physics.render(84, 84, camera_id=0)
print("rendered", pixels.shape, "mean", float(pixels.mean()))
PY

for cfg in $CONFIGS; do
    case $cfg in
        sac) cmd=(eval --config pipelines/sac/mini.toml --encoder random) ;;
        e2e) cmd=(train --config pipelines/e2e/mini.toml) ;;
        *) echo "unknown config $cfg" >&2; exit 1 ;;
    esac
    for dev in $DEVICES; do
        run="$WORK/runs/$cfg-$dev"
        step "$cfg on $dev: lfs ${cmd[*]} --task $TASK --device $dev, $FRAMES frames"
        start=$(date +%s)
        timeout "$TIMEOUT" "$LFS" "${cmd[@]}" --task "$TASK" --device "$dev" --out-dir "$run" \
            --set run.num_train_frames="$FRAMES" --set run.num_seed_frames=1000 \
            --set run.eval_every_frames="$FRAMES" --set run.num_eval_episodes=1 \
            --set 'env.render_quality="fast"' --set run.tensorboard=false 2>&1 | grep -v "^ *[0-9]*: " | tail -6
        echo "exit ${PIPESTATUS[0]} after $(( $(date +%s) - start )) s"
        mkdir -p "$OUT/$cfg-$dev"
        cp "$run"/*.jsonl "$run"/*.csv "$run"/*.json "$OUT/$cfg-$dev/" 2>/dev/null
        python3 - "$run/train.jsonl" <<'PY'
import json, sys
try:
    lines = [json.loads(l) for l in open(sys.argv[1])]
except OSError:
    sys.exit("no train.jsonl")
for l in lines:
    fps, steps = l["train/fps"], l["train/episode_length"]
    parts = ", ".join(f"{k[5:-2]} {1000 * l[k] / steps:.1f}" for k in ("time/update_s", "time/aux_s", "time/env_wait_s") if l.get(k))
    print(f"episode {l['train/episode']} to frame {l['train/frame']}, {l.get('train/num_updates', 0)} updates: "
          f"{fps:.1f} frames/s = {fps / 2:.2f} agent steps/s" + (f" (ms per agent step: {parts})" if parts else ""))
PY
    done
done
rm -rf "$WORK"
