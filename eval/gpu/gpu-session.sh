#!/usr/bin/env bash
# One lent-GPU session for issue 52, in one command of the device tool: lfs's CUDA build against
# the strong PyTorch twins (eval/bench/strong_torch.py) on the same GPU, ABBA rounds, raw output
# under $OUT, and a summary table printed last. eval/gpu/README.md says what each stage measures.
#
#   run (device tool, carry .gpu-carry):  eval/gpu/gpu-session.sh          (make gpu-session)
#   the DrQ-v2 anchor, a second command:  GPU_SESSION_STAGES="info drqv2" eval/gpu/gpu-session.sh
#   dry run on the CPU:                   eval/gpu/gpu-session-dry.sh
#
# One build: make build-cuda's lfs and examples/device_check (the cargo feature cuda, with
# cuDNN), carried as .gpu-carry/device_check.xz and e2e.tar.xz's bin/lfs (make gpu-pack). The
# A/B switches of the 2026-11-2x sessions are gone with their slower paths (eval/gpu/README.md
# lists each with the measurement that decided it); a GPU keeps the replay's frames, the feature
# cache, the videos' frames and the LFS update's statistics on the device, with no host arm.
#
# Stages: STAGE_TABLE below, one row each in the order they run (GPU_SESSION_STAGES picks
# them; its default is the rows marked "yes"); eval/gpu/README.md describes each, in the same
# order, and `eval/gpu/gpu-session.sh --stages` prints the table. Each stage is skipped when its
# estimate no longer fits GPU_SESSION_BUDGET seconds, measured from the start.
#
# Precision: lfs computes FP32 unless a run says run.precision = "tf32" (device_check:
# --precision tf32), which turns on candle's TF32 GEMMs. lfs's own cuDNN convolutions
# (src/cuda/cudnn_conv.rs, src/cuda/conv_block.rs) follow it by cuDNN's math type (FMA at fp32,
# the default, TF32 allowed, at tf32); a convolution
# through candle's own cuDNN call would be allowed TF32 whatever run.precision says (candle
# leaves cuDNN's math type at its default), so the rounds' fp32 arms run with
# NVIDIA_TF32_OVERRIDE=0 as they did for the former cuDNN build; parity and parts run without it.
# The rounds run each of GPU_SESSION_PRECISIONS (fp32), both sides at the same precision; tf32
# rounds are a command of their own (GPU_SESSION_STAGES='info rounds'
# GPU_SESSION_PRECISIONS=tf32, ~3 min), lfs's arguments for them GPU_SESSION_LFS_TF32_ARGS
# ("--precision tf32").
#
# Output under $OUT (at most 8 files come back): info.txt, log.txt (every command's raw output
# between "== stage key=value" markers), smi.csv (utilisation, memory, clocks every 500 ms),
# summary.txt and summary.json (eval/gpu/session_summary.py over log.txt); kprof-lfs.txt with
# the kprof stage.
#
# Other environment: GPU_SESSION_DEVICE (cuda; cpu for a dry run), GPU_SESSION_CARRY
# (.gpu-carry), GPU_SESSION_DEVICE_CHECK / GPU_SESSION_LFS (binaries to use instead of the
# carried ones), GPU_SESSION_PYTHON (python3), GPU_SESSION_UPDATES (10), GPU_SESSION_WARMUP (5),
# GPU_SESSION_BATCH_LFS (512), GPU_SESSION_BATCH_SAC (128,512), GPU_SESSION_BATCH_PIXELS (512),
# GPU_SESSION_BATCH_DRQV2 (256), GPU_SESSION_TIMEOUT_SCALE (1: multiplies every timeout and
# estimate), GPU_SESSION_E2E_SET / GPU_SESSION_DRQV2_SET (extra --set
# arguments for lfs), GPU_SESSION_DRQV2_UPSTREAM_ARGS (extra hydra overrides for upstream).
set -uo pipefail
cd "$(dirname "$0")/../.."

# The stages, in the order they run: name; in the default list; estimate, the seconds on an
# H200 (times GPU_SESSION_TIMEOUT_SCALE) its `fits` check asks before it starts (rounds: before
# each round; e2e: before sac/mini, sac/paper asking 90; drqv2: before lfs's run, each upstream
# run asking 70; pool and table3-row: at their defaults, computed from their variables); what.
STAGE_TABLE='
info        yes   15  nvidia-smi, torch / CUDA / cuDNN versions, the carry, the libraries device_check loads
parity      yes   90  device_check --bench: lfs CUDA ops against its CPU kernels (and the driver JIT warm-up)
rounds      yes   60  per round, GPU_SESSION_ROUNDS (3) in ABBA order: lfs device_check --bench-only, strong PyTorch
parts       yes   60  the LFS update split (LFS_SYNC_PARTS=1), one unblocked TF32 run, GPU_SESSION_LFS_PARTS_ARGS
kprof       no    25  device_check --bench-only under eval/gpu/kprof (CUPTI): GPU time per kernel, kprof-lfs.txt
trainbatch  no    60  device_check --training-batch-only at B=6..256: the check and the own-forward note
long        no   150  device_check --long GPU_SESSION_LONG_UPDATES (100): losses on the GPU against the CPU (5%)
memory      no   300  device_check --memory GPU_SESSION_MEMORY_UPDATES (2000): GPU memory growth under 64 MB
e2e         yes   60  lfs eval sac/mini and sac/paper, walker_walk, GPU_SESSION_E2E_FRAMES (3000) frames
e2e-train   no    90  lfs train pipelines/e2e/mini.toml (Algorithm 1), GPU_SESSION_E2E_TRAIN_FRAMES (4000) frames
anchors     yes   60  strong PyTorch at fp32 and tf32: LFS parts, SAC eager and CUDA graph, pixel SAC, DrQ-v2
compile     no   150  the anchors with torch.compile
history     yes   30  the old twins as written (pretrain_torch.py, sac_torch.py --features)
drqv2       no   200  lfs train pipelines/drqv2/easy.toml against upstream train.py, GPU_SESSION_DRQV2_FRAMES (8000)
drqv2-seeds no   420  lfs and upstream DrQ-v2 on GPU_SESSION_DRQV2_SEEDS (1 2 3) at once, returns by frame
pool        no   480  lfs suite run: the default pool against -j 1, GPU_SESSION_POOL_ROUNDS (3) ABBA windows
table3-row  no   500  one Table 3 row at 50K frames (eval/suites/gpu_table3_row.toml), resumed command by command
'
if [ "${1:-}" = --stages ]; then
    echo "# name      default estimate_s what"
    echo "$STAGE_TABLE" | sed '/^$/d'
    exit 0
fi
# est NAME: the stage's estimate from STAGE_TABLE
est() { echo "$STAGE_TABLE" | awk -v n="$1" '$1 == n { print $3; exit }'; }
ROOT=$PWD
T0=$SECONDS
DEVICE=${GPU_SESSION_DEVICE:-cuda}
STAGES=${GPU_SESSION_STAGES:-$(echo "$STAGE_TABLE" | awk '$2 == "yes" { printf "%s%s", sep, $1; sep = " " }')}
BUDGET=${GPU_SESSION_BUDGET:-540}
ROUNDS=${GPU_SESSION_ROUNDS:-3}
PRECISIONS=${GPU_SESSION_PRECISIONS:-fp32}
LFS_TF32_ARGS=${GPU_SESSION_LFS_TF32_ARGS-"--precision tf32"}
CARRY=${GPU_SESSION_CARRY:-.gpu-carry}
PY=${GPU_SESSION_PYTHON:-python3}
UPDATES=${GPU_SESSION_UPDATES:-10}
WARMUP=${GPU_SESSION_WARMUP:-5}
B_LFS=${GPU_SESSION_BATCH_LFS:-512}
B_SAC=${GPU_SESSION_BATCH_SAC:-128,512}
B_PIX=${GPU_SESSION_BATCH_PIXELS:-512}
B_DRQ=${GPU_SESSION_BATCH_DRQV2:-256}
E2E_FRAMES=${GPU_SESSION_E2E_FRAMES:-3000}
DRQ_FRAMES=${GPU_SESSION_DRQV2_FRAMES:-8000}
DRQ_TASK=${GPU_SESSION_DRQV2_TASK:-cartpole_swingup}
DRQ_PRECISIONS=${GPU_SESSION_DRQV2_PRECISIONS:-default fp32}
SCALE=${GPU_SESSION_TIMEOUT_SCALE:-1}  # each command's timeout and each stage's estimate times this (a dry run's CPU)
export PYTHONUNBUFFERED=1
OUT=${OUT:-gpu-check-out}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
LOG=$OUT/log.txt
WORK=$(mktemp -d /tmp/lfs-session.XXXXXX)
SMI=
trap '[ -n "$SMI" ] && kill "$SMI" 2>/dev/null; rm -rf "$WORK"' EXIT

say() { echo "$*" | tee -a "$LOG"; }
mark() { say "== $* t=$(date -u +%FT%T.%3N) at=$((SECONDS - T0))s"; }
# run SECONDS CMD...: the command's output into the log, its exit status recorded
run() {
    local limit=$(($1 * SCALE)) left=$((BUDGET + 30 - (SECONDS - T0))); shift
    # never past the budget (+30 s): the summary must be written inside the tool's 10 minutes
    [ "$left" -lt "$limit" ] && limit=$left
    if [ "$limit" -lt 5 ]; then
        say "!! skipped, no time left: $*"
        return 124
    fi
    timeout "$limit" "$@" >> "$LOG" 2>&1
    local rc=$?
    [ $rc = 0 ] || say "!! exit $rc: $*"
    return $rc
}
# fits NAME [ESTIMATE]: whether a stage's estimate (default: NAME's in STAGE_TABLE) fits what
# is left of the budget
fits() {
    local left=$((BUDGET - (SECONDS - T0))) need=$((${2:-$(est "$1")} * SCALE))
    if [ "$need" -gt "$left" ]; then
        mark "skip stage=$1 needs=${need}s left=${left}s"
        return 1
    fi
    mark "stage stage=$1 estimate=${need}s left=${left}s"
}
has() { case " $STAGES " in *" $1 "*) return 0 ;; esac; return 1; }

: > "$LOG"
# The binaries' commit, as eval/gpu/pack.sh recorded it (the device tool's copy of .git may be
# older than the tree the binaries were built from); else the checkout's HEAD.
BUILT=$(cat "$CARRY/COMMIT" 2>/dev/null || git rev-parse --short HEAD 2>/dev/null || echo none)
mark "session device=$DEVICE stages=[$STAGES] rounds=$ROUNDS precisions=[$PRECISIONS] budget=${BUDGET}s commit=$BUILT"
# a name STAGE_TABLE lacks (misspelt, or a removed stage: stats, video, cache, frames, frames-e2e,
# frames-drqv2, eval/gpu/README.md "The decided A/Bs") runs nothing: say so
for st in $STAGES; do
    [ -n "$(est "$st")" ] || mark "skip stage=$st reason=unknown-stage(removed-or-misspelt:gpu-session.sh--stages-lists-them)"
done

# ---- the build ----------------------------------------------------------------------------
# make build-cuda's one CUDA build (with cuDNN), as make gpu-pack carried it
DC=${GPU_SESSION_DEVICE_CHECK:-}
if [ -z "$DC" ] && [ -f "$CARRY/device_check.xz" ]; then
    xz -dc "$CARRY/device_check.xz" > "$WORK/device_check" && chmod +x "$WORK/device_check" && DC=$WORK/device_check
fi
LFS=${GPU_SESSION_LFS:-}
E2E=$WORK/e2e
if [ -f "$CARRY/e2e.tar.xz" ] && { has e2e || has e2e-train || has drqv2 || has drqv2-seeds || has pool || has table3-row; }; then
    mkdir -p "$E2E" && xz -dc "$CARRY/e2e.tar.xz" | tar -C "$E2E" -x
    [ -z "$LFS" ] && [ -x "$E2E/bin/lfs" ] && LFS=$E2E/bin/lfs
fi
if [ "$DEVICE" = cuda ]; then
    . eval/gpu/cuda-libs.sh
    cuda_dirs=$(cuda_lib_dirs)
    export LD_LIBRARY_PATH="${cuda_dirs}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
if [ -d "$E2E/lib" ]; then
    export LD_LIBRARY_PATH="$E2E/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    export PYTHONPATH="$E2E/python${PYTHONPATH:+:$PYTHONPATH}"
fi
export LFS_PYTHON=${LFS_PYTHON:-$(command -v "$PY")}
export MUJOCO_GL=${MUJOCO_GL:-egl}
if [ -f "$E2E/egl/10_nvidia.json" ] && ! ls /usr/share/glvnd/egl_vendor.d/*nvidia* /etc/glvnd/egl_vendor.d/*nvidia* >/dev/null 2>&1; then
    export __EGL_VENDOR_LIBRARY_FILENAMES=${__EGL_VENDOR_LIBRARY_FILENAMES:-$E2E/egl/10_nvidia.json}
fi
say "device_check: ${DC:-none}; lfs: ${LFS:-none}; python: $(command -v "$PY")"
for st in parity rounds parts kprof trainbatch long memory; do
    has $st && [ -z "$DC" ] && mark "skip stage=$st reason=no-device_check($CARRY/device_check.xz:make-build-cuda-and-gpu-pack)"
done
for st in e2e e2e-train pool table3-row; do
    has $st && [ -z "$LFS" ] && mark "skip stage=$st reason=no-lfs($CARRY/e2e.tar.xz:make-build-cuda-and-gpu-pack)"
done

if command -v nvidia-smi >/dev/null; then
    nvidia-smi --query-gpu=timestamp,utilization.gpu,memory.used,clocks.sm,clocks.mem,temperature.gpu,power.draw \
        --format=csv -lms 500 > "$OUT/smi.csv" 2>&1 &
    SMI=$!
fi

# ---- info ---------------------------------------------------------------------------------
if has info; then
    fits info && {
        {
            date -u
            uname -a
            nproc
            command -v nvidia-smi >/dev/null && nvidia-smi && nvidia-smi -q -d CLOCK,POWER,PERFORMANCE | head -80
            "$PY" -c "import torch, sys; print('python', sys.version.split()[0]); print('torch', torch.__version__, 'cuda', torch.version.cuda, 'cudnn', torch.backends.cudnn.version()); print('gpu', torch.cuda.get_device_name() if torch.cuda.is_available() else 'none')"
            echo "carry:"; ls -la "$CARRY" 2>&1
            [ -n "$DC" ] && { echo "device_check libraries:"; ldd "$DC" | grep -E 'not found|cublas|cudnn|curand|nvrtc'; }
            [ -n "$LFS" ] && "$LFS" --version
            [ -f "$CARRY/drqv2/SOURCE" ] && cat "$CARRY/drqv2/SOURCE"
            echo "LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}"
        } > "$OUT/info.txt" 2>&1
        cat "$OUT/info.txt" >> "$LOG"
    }
fi

# ---- parity -------------------------------------------------------------------------------
if has parity && [ -n "$DC" ]; then
    # without NVIDIA_TF32_OVERRIDE: lfs's convolutions are src/cuda/cudnn_conv.rs's, FP32 by
    # cuDNN's math type (candle's own cuDNN forward left the math type at the default, and the
    # first 2026-11-27 session's pre-training checks failed so, 0.35, until
    # NVIDIA_TF32_OVERRIDE=0 kept it FP32; its replacement passed without it on 2026-11-28)
    fits parity && { mark "parity"; run 240 "$DC" --device "$DEVICE" --bench; }
fi

# ---- rounds -------------------------------------------------------------------------------
lfs_arm() {  # round precision: device_check --bench-only
    local extra=
    [ "$2" = tf32 ] && extra=$LFS_TF32_ARGS
    mark "bench arm=lfs round=$1 precision=$2"
    # fp32: NVIDIA_TF32_OVERRIDE=0 keeps any cuDNN convolution FP32, as the rounds of the former
    # cuDNN build ran (lfs's own set FP32 by their math type; candle leaves its own at
    # CUDNN_DEFAULT_MATH, which lets cuDNN use TF32 for FP32 data on an H100/H200)
    if [ "$2" = fp32 ]; then run 120 env NVIDIA_TF32_OVERRIDE=0 "$DC" --device "$DEVICE" --bench-only $extra
    else run 120 "$DC" --device "$DEVICE" --bench-only $extra; fi
}
torch_arm() {
    mark "bench arm=torch-strong round=$1 precision=$2"
    run 150 "$PY" eval/bench/strong_torch.py --device "$DEVICE" --suite lfs,sac-features,drqv2 --precision "$2" \
        --batch-lfs "$B_LFS" --batch-sac "$B_SAC" --batch-drqv2 "$B_DRQ" --updates "$UPDATES" --warmup "$WARMUP"
}
if has rounds && [ -n "$DC" ]; then
    for prec in $PRECISIONS; do
        if [ "$prec" = tf32 ] && [ -z "$LFS_TF32_ARGS" ]; then
            mark "skip stage=rounds precision=tf32 reason=lfs-has-no-tf32-switch"
            continue
        fi
        for r in $(seq 1 "$ROUNDS"); do
            fits "rounds-$r-$prec" "$(est rounds)" || break
            if [ $((r % 2)) = 1 ]; then lfs_arm "$r" "$prec"; torch_arm "$r" "$prec"
            else torch_arm "$r" "$prec"; lfs_arm "$r" "$prec"; fi
        done
    done
fi

# ---- parts --------------------------------------------------------------------------------
# The LFS update's true split (cuDNN's forward, backward-data and backward-filter, FP32 by cuDNN's
# math type; Adam and the EMA one CUDA kernel per parameter), then one unblocked run at TF32 (only
# its whole is exact).
if has parts && [ -n "$DC" ]; then
    fits parts && {
        mark "parts arm=lfs mode=LFS_SYNC_PARTS"
        LFS_SYNC_PARTS=1 run 150 "$DC" --device "$DEVICE" --bench-only
        mark "parts arm=lfs mode=unblocked-tf32"
        run 120 "$DC" --device "$DEVICE" --bench-only $LFS_TF32_ARGS
        if [ -n "${GPU_SESSION_LFS_PARTS_ARGS:-}" ]; then
            mark "parts arm=lfs mode=args args=[${GPU_SESSION_LFS_PARTS_ARGS}]"
            run 150 "$DC" --device "$DEVICE" --bench-only $GPU_SESSION_LFS_PARTS_ARGS
        fi
    }
fi

# ---- kprof --------------------------------------------------------------------------------
# Where the GPU time of each bench's timed updates goes, kernel by kernel (eval/gpu/kprof: CUPTI's
# records of the ranges device_check marks), per update: kprof-lfs.txt.
KPROF_LIB=$CARRY/kprof/libkprof.so
if has kprof && [ -n "$DC" ]; then
    if [ ! -f "$KPROF_LIB" ]; then
        mark "skip stage=kprof reason=no-$KPROF_LIB(make-gpu-pack)"
    else
        fits kprof && {
            mark "kprof arm=lfs"
            KPROF_OUT="$OUT/kprof-lfs.txt" KPROF_DIV=10 LD_PRELOAD="$KPROF_LIB" run 120 "$DC" --device "$DEVICE" --bench-only
            head -40 "$OUT/kprof-lfs.txt" >> "$LOG" 2>/dev/null || true
        }
    fi
fi

# ---- trainbatch ---------------------------------------------------------------------------
# 2026-11-28's one failing check ("encoder at a training batch": 4.08e-4 at B=256 on CUDA in
# every build, 9.9e-6 on the CPU's candle path; 6, 16 and 64 pass at ~1e-6): ReLU masks flipped
# by a forward that differs by rounding (results/relu-kink-2026-11-28/). The check now runs the
# CPU's backward on the GPU's own activations and notes the gradients against the CPU's own
# forward; here alone at batches 6 to 256, every tensor's error printed. Every
# line goes to the log; the summary lists each batch's check and note.
if has trainbatch && [ -n "$DC" ]; then
    fits trainbatch && for b in 6 16 64 96 128 160 192 224 256; do
        mark "trainbatch arm=lfs batch=$b"
        run 60 "$DC" --device "$DEVICE" --training-batch "$b" --training-batch-only
    done
fi

# ---- long, memory -----------------------------------------------------------------------------
# Issue 52's correctness at scale: device_check --long (each training step at its real batch
# size, 100 updates on the GPU and on the CPU kernels from the same start and data, every
# update's loss within 5% of the CPU's), then --memory (2,000 LFS updates at
# B=512, the GPU's memory in use every 100, growth after update 200 under 64 MB).
if has long && [ -n "$DC" ]; then
    fits long && { mark "long arm=lfs"; run 400 "$DC" --device "$DEVICE" --long "${GPU_SESSION_LONG_UPDATES:-100}"; }
fi
if has memory && [ -n "$DC" ]; then
    fits memory && { mark "memory arm=lfs"; run 500 "$DC" --device "$DEVICE" --memory "${GPU_SESSION_MEMORY_UPDATES:-2000}"; }
fi

# ---- e2e ----------------------------------------------------------------------------------
# lfs_run NAME LIMIT ARGS...: one lfs run, its train.jsonl into the log
lfs_run() {
    local name=$1 limit=$2; shift 2
    local dir="$WORK/runs/$name"
    mark "run name=$name"
    run "$limit" "$LFS" "$@" --out-dir "$dir"
    mark "train.jsonl name=$name"
    cat "$dir/train.jsonl" >> "$LOG" 2>/dev/null
    mark "eval.csv name=$name"
    cat "$dir/eval.csv" >> "$LOG" 2>/dev/null
}
common=(--task walker_walk --device "$DEVICE" --encoder random --set run.num_train_frames="$E2E_FRAMES"
        --set run.num_seed_frames=1000 --set run.eval_every_frames="$E2E_FRAMES" --set run.num_eval_episodes=1
        --set run.tensorboard=false)
extra=()
for s in ${GPU_SESSION_E2E_SET:-}; do extra+=(--set "$s"); done
if has e2e && [ -n "$LFS" ]; then
    fits e2e-sac-mini "$(est e2e)" && lfs_run sac-mini 150 eval --config pipelines/sac/mini.toml "${common[@]}" \
        --set 'env.render_quality="fast"' "${extra[@]}"
    fits e2e-sac-paper 90 && lfs_run sac-paper 200 eval --config pipelines/sac/paper.toml "${common[@]}" "${extra[@]}"
fi

# ---- e2e-train ----------------------------------------------------------------------------
# Algorithm 1 (lfs train, SAC + LFS on the SAC batch, pipelines/e2e/mini.toml, B=64): its batches
# and the objective's pairs made from the replay's frames on the device; the 2,000 seed frames,
# then two training episodes
if has e2e-train && [ -n "$LFS" ]; then
    frames=${GPU_SESSION_E2E_TRAIN_FRAMES:-4000}
    fits e2e-train && lfs_run e2e-train 150 train --config pipelines/e2e/mini.toml --task walker_walk \
        --seed 1 --device "$DEVICE" --set run.num_train_frames="$frames" --set run.eval_every_frames=100000 \
        --set run.num_eval_episodes=1 --set run.tensorboard=false --set 'env.render_quality="fast"'
fi

# ---- anchors, compile -----------------------------------------------------------------------
anchors() {  # stage extra-args...
    local stage=$1; shift
    mark "anchors arm=torch-strong stage=$stage"
    run 300 "$PY" eval/bench/strong_torch.py --device "$DEVICE" --suite lfs,sac-features,sac-pixels,drqv2 \
        --precision fp32,tf32 --parts --graph --batch-lfs "$B_LFS" --batch-sac "$B_SAC" --batch-pixels "$B_PIX" \
        --batch-drqv2 "$B_DRQ" --updates "$UPDATES" --warmup "$WARMUP" "$@"
}
has anchors && fits anchors && anchors anchors
has compile && fits compile && anchors compile --compile

# ---- history ------------------------------------------------------------------------------
if has history; then
    fits history && {
        mark "history arm=torch-old suite=lfs precision=torch-defaults"
        run 120 "$PY" eval/bench/pretrain_torch.py --device "$DEVICE" --batch "$B_LFS" --updates "$UPDATES" --warmup 3
        for b in ${B_SAC//,/ }; do
            mark "history arm=torch-old suite=sac-features batch=$b precision=torch-defaults"
            run 60 "$PY" eval/bench/sac_torch.py --device "$DEVICE" --features --batch "$b" --updates "$UPDATES" --warmup 3
        done
    }
fi

# ---- drqv2 --------------------------------------------------------------------------------
# upstream's packages that the GPU image lacks (hydra and its kin), into $site once
site=$WORK/site
upstream_site() {
    [ -d "$site" ] && return 0
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$site" "$CARRY"/drqv2-whl/*.whl >> "$LOG" 2>&1
}
if has drqv2; then
    if [ -z "$LFS" ] || [ ! -f "$CARRY/drqv2/train.py" ]; then
        mark "skip stage=drqv2 reason=needs-lfs-and-$CARRY/drqv2 (eval/gpu/pack-e2e.sh, eval/gpu/pack-drqv2.sh)"
    elif fits drqv2; then
        extra=()
        for s in ${GPU_SESSION_DRQV2_SET:-}; do extra+=(--set "$s"); done
        lfs_run drqv2-lfs 200 train --config pipelines/drqv2/easy.toml --task "$DRQ_TASK" --seed 1 --device "$DEVICE" \
            --set run.num_train_frames="$DRQ_FRAMES" --set run.eval_every_frames=100000 --set run.num_eval_episodes=1 \
            --set run.tensorboard=false "${extra[@]}"
        upstream_site
        for prec in $DRQ_PRECISIONS; do
            fits "drqv2-upstream-$prec" 70 || break
            dir=$WORK/up-$prec
            mark "run name=drqv2-upstream-$prec"
            ( cd "$CARRY/drqv2" && export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}" &&
              if [ "$prec" = default ]; then unset DRQV2_PRECISION; else export DRQV2_PRECISION=$prec; fi &&
              run 200 "$PY" train.py task@_global_="$DRQ_TASK" num_train_frames=$((DRQ_FRAMES + 10)) eval_every_frames=100000 \
                  num_eval_episodes=1 save_video=false use_tb=false device="$DEVICE" hydra.run.dir="$dir" \
                  ${GPU_SESSION_DRQV2_UPSTREAM_ARGS:-} )
            mark "train.csv name=drqv2-upstream-$prec"
            cat "$dir/train.csv" >> "$LOG" 2>/dev/null
            mark "eval.csv name=drqv2-upstream-$prec"
            cat "$dir/eval.csv" >> "$LOG" 2>/dev/null
        done
    fi
fi

# ---- drqv2-seeds ---------------------------------------------------------------------------
SEED_RUN_FRAMES=${GPU_SESSION_DRQV2_SEED_RUN_FRAMES:-10000}
if has drqv2-seeds; then
    if [ -z "$LFS" ] || [ ! -f "$CARRY/drqv2/train.py" ]; then
        mark "skip stage=drqv2-seeds reason=needs-lfs-and-$CARRY/drqv2 (eval/gpu/pack-e2e.sh, eval/gpu/pack-drqv2.sh)"
    elif fits drqv2-seeds; then
        upstream_site
        # its own cap, so that a stage after it in the same command still runs
        limit=$(( BUDGET + 30 - (SECONDS - T0) - 20 ))
        [ "$limit" -gt $((480 * SCALE)) ] && limit=$((480 * SCALE))
        mark "drqv2-seeds task=$DRQ_TASK seeds=[${GPU_SESSION_DRQV2_SEEDS:-1 2 3}] frames=$SEED_RUN_FRAMES limit=${limit}s"
        pids=()
        for seed in ${GPU_SESSION_DRQV2_SEEDS:-1 2 3}; do
            # every run its own log; 2 threads each beside five others on the machine's cores
            RAYON_NUM_THREADS=2 timeout "$limit" "$LFS" train --config pipelines/drqv2/easy.toml --task "$DRQ_TASK" \
                --seed "$seed" --device "$DEVICE" --set run.num_train_frames="$SEED_RUN_FRAMES" \
                --set run.eval_every_frames="$SEED_RUN_FRAMES" --set run.tensorboard=false \
                --out-dir "$WORK/seeds/lfs-s$seed" > "$WORK/seeds-lfs-s$seed.log" 2>&1 &
            pids+=($!)
            ( cd "$CARRY/drqv2" && export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}" OMP_NUM_THREADS=2 MKL_NUM_THREADS=2 &&
              exec timeout "$limit" "$PY" train.py task@_global_="$DRQ_TASK" seed="$seed" \
                  num_train_frames=$((SEED_RUN_FRAMES + 10)) eval_every_frames="$SEED_RUN_FRAMES" save_video=false \
                  use_tb=false device="$DEVICE" hydra.run.dir="$WORK/seeds/up-s$seed" \
                  ${GPU_SESSION_DRQV2_UPSTREAM_ARGS:-} ) > "$WORK/seeds-up-s$seed.log" 2>&1 &
            pids+=($!)
        done
        for pid in "${pids[@]}"; do wait "$pid" || say "!! exit $? (a drqv2-seeds run, pid $pid)"; done
        for seed in ${GPU_SESSION_DRQV2_SEEDS:-1 2 3}; do
            for side in lfs up; do
                name=drqv2-seeds-$side-s$seed
                mark "log name=$name"
                tail -n 20 "$WORK/seeds-$side-s$seed.log" >> "$LOG" 2>/dev/null
                if [ $side = lfs ]; then
                    mark "train.jsonl name=$name"
                    cat "$WORK/seeds/lfs-s$seed/train.jsonl" >> "$LOG" 2>/dev/null
                else
                    mark "train.csv name=$name"
                    cat "$WORK/seeds/up-s$seed/train.csv" >> "$LOG" 2>/dev/null
                fi
                mark "eval.csv name=$name"
                cat "$WORK/seeds/$side-s$seed/eval.csv" >> "$LOG" 2>/dev/null
            done
        done
    fi
fi

# ---- pool ---------------------------------------------------------------------------------
POOL_CELLS=${GPU_SESSION_POOL_CELLS:-16}
POOL_WINDOW=${GPU_SESSION_POOL_WINDOW:-70}
POOL_ROUNDS=${GPU_SESSION_POOL_ROUNDS:-3}
POOL_CONFIG=${GPU_SESSION_POOL_CONFIG:-pipelines/sac/mini.toml}
# pool_window ARM ROUND [lfs suite run flags...]: one window from an empty folder, then a JSON
# line of what the cells did in it
pool_window() {
    local arm=$1 round=$2; shift 2
    local dir="$WORK/pool-$arm-$round"
    mark "pool arm=$arm round=$round window=${POOL_WINDOW}s"
    local t0=$SECONDS
    # the window is the measurement: its timeout is the expected end, not a failure
    timeout "$((POOL_WINDOW * SCALE))" "$LFS" suite run "$WORK/pool.toml" --out "$dir" "$@" >> "$LOG" 2>&1
    "$PY" - "$dir" "$arm" "$round" "$((SECONDS - t0))" >> "$LOG" 2>&1 <<'PY'
import glob, json, os, sys
d, arm, rnd, secs = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
cells = [json.load(open(p)) for p in glob.glob(os.path.join(d, "cells", "*", "cell.json"))]
print(json.dumps({"pool": arm, "round": rnd, "seconds": secs, "cells_started": len(cells),
                  "frames": sum(c["frames_done"] for c in cells),
                  "pace_fps": sum(c["frames_done"] / c["wall_clock_s"] for c in cells if c["wall_clock_s"] > 0)}))
PY
}
if has pool && [ -n "$LFS" ] && fits pool $((2 * POOL_ROUNDS * POOL_WINDOW + 60)); then
    {
        echo 'name = "gpu-pool"'
        case "$POOL_CONFIG" in *paper*) echo 'scale = "paper"' ;; *) echo 'scale = "mini"' ;; esac
        echo "sac_config = \"$POOL_CONFIG\""
        echo "set = [\"run.device=$DEVICE\", \"env.render_quality=fast\", \"run.num_seed_frames=1000\","
        echo '       "run.eval_every_frames=1000000", "run.num_eval_episodes=1", "run.tensorboard=false"]'
        echo 'num_train_frames = 1000000'
        echo 'tasks = ["walker_walk"]'
        echo "seeds = [$(seq -s ', ' 1 "$POOL_CELLS")]"
        echo '[[encoders]]'
        echo 'name = "random"'
        echo 'source = "random"'
    } > "$WORK/pool.toml"
    say "pool suite: $(tr '\n' ' ' < "$WORK/pool.toml")"
    for round in $(seq 1 "$POOL_ROUNDS"); do
        if [ $((round % 2)) = 1 ]; then order="j1 default"; else order="default j1"; fi
        for arm in $order; do
            if [ $arm = j1 ]; then pool_window j1 $round -j 1; else pool_window default $round; fi
        done
    done
fi

# ---- table3-row ---------------------------------------------------------------------------
ROW_DIR=${GPU_SESSION_ROW_DIR:-runs/gpu-table3-row}
ROW_SECONDS=${GPU_SESSION_ROW_SECONDS:-480}
if has table3-row && [ -n "$LFS" ] && fits table3-row $((ROW_SECONDS + 20)); then
    mark "table3-row dir=$ROW_DIR seconds=$ROW_SECONDS"
    # Stopped at its time, the suite resumes every cell from its checkpoint in the next command.
    timeout "$((ROW_SECONDS * SCALE))" "$LFS" suite run eval/suites/gpu_table3_row.toml --out "$ROW_DIR" >> "$LOG" 2>&1 ||
        say "table3-row: stopped after ${ROW_SECONDS}s (run the command again to go on)"
    "$LFS" suite status "$ROW_DIR" >> "$LOG" 2>&1 || true
    # The small files of every cell (not its checkpoint), for `lfs report` on any machine.
    mkdir -p "$OUT/table3-row"
    (cd "$ROW_DIR" && find . -type f \( -name '*.csv' -o -name '*.jsonl' -o -name '*.json' -o -name '*.toml' \) -print0 |
        tar --null -cf - -T -) | tar -xf - -C "$OUT/table3-row"
fi

# ---- summary ------------------------------------------------------------------------------
mark "done"
[ -n "$SMI" ] && kill "$SMI" 2>/dev/null
SMI=
python3 eval/gpu/session_summary.py "$LOG" --json "$OUT/summary.json" > "$OUT/summary.txt" 2>&1 ||
    echo "session_summary.py failed" >> "$OUT/summary.txt"
echo
cat "$OUT/summary.txt"
echo "session: $((SECONDS - T0)) s; raw output in $OUT"
