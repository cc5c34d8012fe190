#!/usr/bin/env bash
# One lent-GPU session for issue 52, in one command of the device tool: lfs's CUDA build against
# the strong PyTorch twins (eval/bench/strong_torch.py) on the same GPU, ABBA rounds, raw output
# under $OUT, and a summary table printed last. eval/gpu/README.md says what each stage measures.
#
#   run (device tool, carry .gpu-carry):  eval/gpu/gpu-session.sh          (make gpu-session)
#   the DrQ-v2 anchor, a second command:  GPU_SESSION_STAGES="info drqv2" eval/gpu/gpu-session.sh
#   dry run on the CPU:                   eval/gpu/gpu-session-dry.sh
#
# Stages (GPU_SESSION_STAGES, in this order; each skipped when its estimate no longer fits
# GPU_SESSION_BUDGET seconds, measured from the start):
#   info     nvidia-smi, torch, cuDNN, the carried builds                                  ~10 s
#   parity   device_check --bench: lfs's CUDA ops against its CPU kernels (also warms the
#            driver's JIT cache, ~25 s on a fresh machine)                                  ~90 s
#            and device_check-cudnn's checks, when carried                                  ~45 s
#   rounds   GPU_SESSION_ROUNDS (3) rounds in ABBA order: lfs (device_check --bench-only: LFS
#            B=512, SAC on cached features B=128/512, DrQ-v2 from pixels B=256, medians of 10
#            after 3 warm-ups), lfs with cuDNN's convolutions (device_check-cudnn, when carried)
#            and strong PyTorch (the same four updates, 10 timed after 5 warm-ups), each
#            precision of GPU_SESSION_PRECISIONS (fp32); and lfs with each of GPU_SESSION_ALT_ARMS'
#            switches (default arm lfs-wxt, LFS_LONG_PRODUCT=w-xt: the last untimed A/B of
#            the LFS update)                                                               ~60 s a round
#   parts    lfs's LFS update with a true split: LFS_SYNC_PARTS=1 (the trainer waits for the
#            device at each part's end), and with GPU_SESSION_LFS_PARTS_ARGS if set;
#            the conv backward as lfs's GEMMs (src/nn/gemm_conv.rs), and the cuDNN build's
#            (when carried): its
#            default, with Adam/EMA as candle's ops (LFS_FUSED_STEP=0), with SAC's gradients
#            by candle's autograd (LFS_SAC_GRADIENTS=autograd) and written out without the row
#            kernels (LFS_FUSED_SAC=0; both: their SAC benches), DrQ-v2's by autograd
#            (LFS_DRQV2_GRADIENTS=autograd: its DrQ-v2 bench), the projector's product with
#            its operands swapped (LFS_LONG_PRODUCT=w-xt), with cuDNN's
#            heuristic algorithms (LFS_CUDNN_ALGO=heuristic), with lfs's GEMM backward, and
#            at TF32; a split each                                                         ~200 s
#   e2e      lfs eval, walker_walk, random encoder: sac/mini (B=128, feature cache, fast
#            rendering) and sac/paper (B=512, no cache, dm_control's rendering),
#            GPU_SESSION_E2E_FRAMES (3000) frames, 1000 of them seed frames               ~150 s
#   anchors  strong PyTorch once more at fp32 and tf32: LFS with its parts (CUDA events), SAC
#            on cached features (eager and as one CUDA graph), pixel SAC B=512, DrQ-v2 B=256 ~60 s
#   compile  the same with torch.compile (not in the default list)                         ~150 s
#   history  the old twins as written (pretrain_torch.py, sac_torch.py --features)           ~30 s
#   drqv2    lfs train (pipelines/drqv2/easy.toml) and upstream drqv2's own train.py
#            (eval/gpu/pack-drqv2.sh) on cartpole_swingup, GPU_SESSION_DRQV2_FRAMES (8000)
#            frames each (upstream 10 more: it logs an episode when the next step starts, so
#            that it logs its last one too); upstream once per GPU_SESSION_DRQV2_PRECISIONS
#            ("default fp32": PyTorch's defaults as upstream ran, then TF32 off)           ~240 s
#   drqv2-seeds (not in the default list; issue 55, a command of its own) lfs train
#            (pipelines/drqv2/easy.toml: upstream-like replay) and upstream's train.py on
#            GPU_SESSION_DRQV2_TASK, seeds GPU_SESSION_DRQV2_SEEDS ("1 2 3"), all 2 × 3 at once
#            (2 threads each), GPU_SESSION_DRQV2_SEED_RUN_FRAMES (10000) frames, evaluated at 0
#            and at the end with 10 episodes as upstream does; every eval.csv into the log  ~480 s
#   stats    (not in the default list; GPU_SESSION_STAGES="info stats") the LFS update with its
#            statistics on the device (the GPU default) against the host
#            (LFS_UPDATE_STATISTICS=host), GPU_SESSION_ROUNDS rounds in ABBA order, the cuDNN
#            build when carried                                                             ~120 s
#   kprof    (not in the default list) each build's --bench-only under eval/gpu/kprof (CUPTI):
#            GPU time per kernel name and launches per update of each bench's timed updates,
#            into kprof-<arm>.txt                                                           ~40 s
#   trainbatch (not in the default list) device_check --training-batch-only at B=6, 16, 64,
#            96, 128, 160, 192, 224, 256 (every tensor's error, and the note of the gradients
#            against the CPU's own forward), per build: the B=256 check's 4.08e-4 of
#            2026-11-28 (ReLU masks flipped by rounding, results/relu-kink-2026-11-28/)
#            against the check's new form                                                 ~60 s
#   long     (not in the default list; GPU_SESSION_STAGES="info long") device_check --long
#            GPU_SESSION_LONG_UPDATES (100): LFS B=512, SAC on cached features B=128/512, DrQ-v2
#            B=256, every update's loss on the GPU against the CPU kernels' (band 5%), per build
#            (GPU_SESSION_LONG_ARMS, "lfs lfs-cudnn")                                       ~150 s
#   memory   (not in the default list) device_check --memory GPU_SESSION_MEMORY_UPDATES (2000):
#            the LFS update's GPU memory every 100 updates, growth after 200 under 64 MB    ~300 s
#   video    (not in the default list; GPU_SESSION_STAGES="info video") the LFS update with its
#            batches gathered and shifted on the device from the videos' frames kept there (the
#            GPU default, src/data/device_stacks.rs) against made on the host and uploaded
#            (LFS_VIDEO_FRAMES=host), GPU_SESSION_ROUNDS rounds in ABBA order, the candle build ~80 s
#   cache    (not in the default list; GPU_SESSION_STAGES="info cache") e2e's sac/mini with its
#            feature cache on the device (the GPU default, src/rl/device_feature_cache.rs)
#            against on the host (LFS_FEATURE_CACHE=host: rows gathered on the host and uploaded
#            with every batch), GPU_SESSION_ROUNDS rounds in ABBA order                     ~360 s
#   frames   (not in the default list; GPU_SESSION_STAGES="info frames") sac/paper (pixels,
#            B=512, frozen encoder) of GPU_SESSION_FRAMES_FRAMES (2000) frames with its batches
#            stacked and shifted on the device from a copy of the replay's frames (the GPU
#            default, src/rl/device_frames.rs) against on the host (LFS_REPLAY_FRAMES=host),
#            GPU_SESSION_ROUNDS rounds in ABBA order                                       ~300 s
#   frames-e2e (not in the default list) the same for lfs train's Algorithm 1
#            (pipelines/e2e/mini.toml, walker_walk, B=64, SAC + LFS: the objective's pairs made
#            from the device's frames too), GPU_SESSION_FRAMES_E2E_FRAMES (4000)            ~450 s
#   frames-drqv2 (not in the default list) the same for lfs train's DrQ-v2
#            (pipelines/drqv2/easy.toml, GPU_SESSION_DRQV2_TASK, B=256, the critic trains the
#            encoder from the device's batches), GPU_SESSION_FRAMES_DRQV2_FRAMES (6000: the 4000
#            seed frames, then two training episodes)                                       ~360 s
#   pool     (not in the default list; GPU_SESSION_STAGES="info pool" as its own command) `lfs
#            suite run` of GPU_SESSION_POOL_CELLS (16) sac/mini cells on this GPU (walker_walk,
#            random encoder, seeds 1..N, budgets no window reaches): one cell at a time (-j 1)
#            against the default pool (cores and GPU memory, src/suite/gpu_share.rs), in
#            GPU_SESSION_POOL_ROUNDS (3) rounds in ABBA order of one GPU_SESSION_POOL_WINDOW (70)
#            s window per arm, each from an empty folder, so the default pays its warm-up and
#            ramp in every window; frames done per window (episodes that ended) and the
#            cells' own paces; GPU_SESSION_POOL_CONFIG (pipelines/sac/mini.toml) for another
#            config's cells (pipelines/sac/paper.toml with GPU_SESSION_POOL_CELLS=8)          ~480 s
#   table3-row (not in the default list; GPU_SESSION_STAGES="info table3-row", a command of
#            its own, run again on the same warm machine to go on) one Table 3 row at 50K frames:
#            eval/suites/gpu_table3_row.toml (the committed study-2 LFS encoder × the nine tasks ×
#            seed 1, sac/paper on the GPU, the pool sharing it) into GPU_SESSION_ROW_DIR
#            (runs/gpu-table3-row, kept between commands), stopped after GPU_SESSION_ROW_SECONDS
#            (480); every cell's small files come back under $OUT/table3-row for `lfs report` ~500 s
#
# Precision: lfs computes FP32 unless a run says run.precision = "tf32" (device_check:
# --precision tf32), which turns on candle's TF32 GEMMs (its convolutions' im2col products and
# lfs's GEMM backward among them). The cuDNN build's convolutions would be allowed TF32 whatever
# that says (candle leaves cuDNN's math type at its default), so its fp32 arms run with
# NVIDIA_TF32_OVERRIDE=0; parts adds one unblocked run without it. The rounds run each of
# GPU_SESSION_PRECISIONS (fp32), both sides at the same precision; tf32 rounds are a command of
# their own (GPU_SESSION_STAGES='info rounds' GPU_SESSION_PRECISIONS=tf32, ~3 min), lfs's
# arguments for them GPU_SESSION_LFS_TF32_ARGS ("--precision tf32").
#
# Output under $OUT (at most 8 files come back): info.txt, log.txt (every command's raw output
# between "== stage key=value" markers), smi.csv (utilisation, memory, clocks every 500 ms),
# summary.txt and summary.json (eval/gpu/session_summary.py over log.txt).
#
# Other environment: GPU_SESSION_LFS_BUILD (empty: the plain CUDA lfs; cudnn: lfs-cudnn, cuDNN's
# convolutions, for every stage that runs lfs), GPU_SESSION_DEVICE (cuda; cpu for a dry run), GPU_SESSION_CARRY
# (.gpu-carry), GPU_SESSION_DEVICE_CHECK / GPU_SESSION_DEVICE_CHECK_CUDNN / GPU_SESSION_LFS
# (binaries to use instead of the carried ones), GPU_SESSION_PYTHON (python3), GPU_SESSION_UPDATES (10), GPU_SESSION_WARMUP (5),
# GPU_SESSION_BATCH_LFS (512), GPU_SESSION_BATCH_SAC (128,512), GPU_SESSION_BATCH_PIXELS (512),
# GPU_SESSION_BATCH_DRQV2 (256), GPU_SESSION_TIMEOUT_SCALE (1: multiplies every timeout and
# estimate), GPU_SESSION_E2E_SET / GPU_SESSION_DRQV2_SET (extra --set
# arguments for lfs), GPU_SESSION_DRQV2_UPSTREAM_ARGS (extra hydra overrides for upstream).
set -uo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
T0=$SECONDS
DEVICE=${GPU_SESSION_DEVICE:-cuda}
STAGES=${GPU_SESSION_STAGES:-info parity rounds parts e2e anchors history}
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
# "NAME VAR=value ...; NAME VAR=value ...": more lfs arms in every round, lfs-NAME each,
# device_check with those variables (same-round A/Bs of switches; the summary sets each against
# PyTorch like the others, ~12 s a round each). The default: the projector's long product with
# its operands swapped (src/nn/kernels/row_split.rs), the LFS update's last untimed A/B; empty
# for none. (The graph backward and the split-K product lost on 2026-11-28 and are gone.)
IFS=';' read -r -a alt_parts <<< "${GPU_SESSION_ALT_ARMS-wxt LFS_LONG_PRODUCT=w-xt}"
ALT_ARMS=()
for part in "${alt_parts[@]}"; do part=$(echo "$part" | xargs); [ -z "$part" ] || ALT_ARMS+=("$part"); done
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
# fits NAME ESTIMATE: whether a stage's estimate fits what is left of the budget
fits() {
    local left=$((BUDGET - (SECONDS - T0))) need=$(($2 * SCALE))
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

# ---- the builds ---------------------------------------------------------------------------
DC=${GPU_SESSION_DEVICE_CHECK:-}
if [ -z "$DC" ] && [ -f "$CARRY/device_check.xz" ]; then
    xz -dc "$CARRY/device_check.xz" > "$WORK/device_check" && chmod +x "$WORK/device_check" && DC=$WORK/device_check
fi
# device_check built with cuDNN's convolutions (eval/gpu/build-cuda.sh), when carried: a second
# lfs arm in the rounds and the parts
DC_CUDNN=${GPU_SESSION_DEVICE_CHECK_CUDNN:-}
if [ -z "$DC_CUDNN" ] && [ -f "$CARRY/device_check-cudnn.xz" ]; then
    xz -dc "$CARRY/device_check-cudnn.xz" > "$WORK/device_check-cudnn" && chmod +x "$WORK/device_check-cudnn" &&
        DC_CUDNN=$WORK/device_check-cudnn
fi
LFS=${GPU_SESSION_LFS:-}
E2E=$WORK/e2e
if [ -f "$CARRY/e2e.tar.xz" ] && { has e2e || has drqv2 || has drqv2-seeds || has pool || has table3-row; }; then
    mkdir -p "$E2E" && xz -dc "$CARRY/e2e.tar.xz" | tar -C "$E2E" -x
    # GPU_SESSION_LFS_BUILD=cudnn: the e2e stages' lfs is the one with cuDNN's convolutions
    lfs_bin=$E2E/bin/lfs${GPU_SESSION_LFS_BUILD:+-$GPU_SESSION_LFS_BUILD}
    [ -z "$LFS" ] && [ -x "$lfs_bin" ] && LFS=$lfs_bin
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
say "device_check: ${DC:-none}; with cuDNN: ${DC_CUDNN:-none}; lfs: ${LFS:-none}; python: $(command -v "$PY")"
for st in parity rounds parts; do
    has $st && [ -z "$DC" ] && mark "skip stage=$st reason=no-device_check($CARRY/device_check.xz:make-build-cuda-and-gpu-pack)"
done
for st in e2e pool table3-row; do
    has $st && [ -z "$LFS" ] && mark "skip stage=$st reason=no-lfs($CARRY/e2e.tar.xz:make-build-cuda-and-gpu-pack)"
done

if command -v nvidia-smi >/dev/null; then
    nvidia-smi --query-gpu=timestamp,utilization.gpu,memory.used,clocks.sm,clocks.mem,temperature.gpu,power.draw \
        --format=csv -lms 500 > "$OUT/smi.csv" 2>&1 &
    SMI=$!
fi

# ---- info ---------------------------------------------------------------------------------
if has info; then
    fits info 15 && {
        {
            date -u
            uname -a
            nproc
            command -v nvidia-smi >/dev/null && nvidia-smi && nvidia-smi -q -d CLOCK,POWER,PERFORMANCE | head -80
            "$PY" -c "import torch, sys; print('python', sys.version.split()[0]); print('torch', torch.__version__, 'cuda', torch.version.cuda, 'cudnn', torch.backends.cudnn.version()); print('gpu', torch.cuda.get_device_name() if torch.cuda.is_available() else 'none')"
            echo "carry:"; ls -la "$CARRY" 2>&1
            [ -n "$DC" ] && { echo "device_check libraries:"; ldd "$DC" | grep -E 'not found|cublas|cudnn|curand|nvrtc'; }
            [ -n "$DC_CUDNN" ] && { echo "device_check-cudnn libraries:"; ldd "$DC_CUDNN" | grep -E 'not found|cublas|cudnn|curand|nvrtc'; }
            [ -n "$LFS" ] && "$LFS" --version
            [ -f "$CARRY/drqv2/SOURCE" ] && cat "$CARRY/drqv2/SOURCE"
            echo "LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}"
        } > "$OUT/info.txt" 2>&1
        cat "$OUT/info.txt" >> "$LOG"
    }
fi

# ---- parity -------------------------------------------------------------------------------
if has parity && [ -n "$DC" ]; then
    fits parity 90 && { mark "parity"; run 240 "$DC" --device "$DEVICE" --bench; }
    # the cuDNN build's checks (no bench: the rounds time it), without NVIDIA_TF32_OVERRIDE: its
    # convolutions are src/nn/cudnn_conv.rs's, FP32 by cuDNN's math type (candle's own cuDNN
    # forward left the math type at the default, and the first 2026-11-27 session's pre-training
    # checks failed so, 0.35, until NVIDIA_TF32_OVERRIDE=0 kept it FP32)
    [ -n "$DC_CUDNN" ] && fits parity-cudnn 45 && { mark "parity arm=lfs-cudnn"; run 150 "$DC_CUDNN" --device "$DEVICE"; }
fi

# ---- rounds -------------------------------------------------------------------------------
lfs_arm() {  # round precision [cudnn | alt "NAME VAR=value ..."]: device_check, with "cudnn" its
    # cuDNN build, with "alt" device_check with an arm of GPU_SESSION_ALT_ARMS (arm lfs-NAME)
    local extra= arm=lfs bin=$DC switches=
    [ "$2" = tf32 ] && extra=$LFS_TF32_ARGS
    if [ "${3:-}" = cudnn ]; then
        [ -n "$DC_CUDNN" ] || return 0
        arm=lfs-cudnn bin=$DC_CUDNN
    elif [ "${3:-}" = alt ]; then
        arm=lfs-${4%% *} switches=${4#* }
    fi
    mark "bench arm=$arm round=$1 precision=$2${switches:+ switches=[$switches]}"
    # fp32: NVIDIA_TF32_OVERRIDE=0 keeps cuDNN's convolutions FP32 (candle leaves their math type
    # at CUDNN_DEFAULT_MATH, which lets cuDNN use TF32 for FP32 data on an H100/H200)
    if [ "$2" = fp32 ]; then run 120 env NVIDIA_TF32_OVERRIDE=0 $switches "$bin" --device "$DEVICE" --bench-only $extra
    else run 120 env $switches "$bin" --device "$DEVICE" --bench-only $extra; fi
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
            fits "rounds-$r-$prec" 60 || break
            if [ $((r % 2)) = 1 ]; then
                lfs_arm "$r" "$prec"; lfs_arm "$r" "$prec" cudnn
                for ((i = 0; i < ${#ALT_ARMS[@]}; i++)); do lfs_arm "$r" "$prec" alt "${ALT_ARMS[i]}"; done
                torch_arm "$r" "$prec"
            else
                torch_arm "$r" "$prec"
                for ((i = ${#ALT_ARMS[@]} - 1; i >= 0; i--)); do lfs_arm "$r" "$prec" alt "${ALT_ARMS[i]}"; done
                lfs_arm "$r" "$prec" cudnn; lfs_arm "$r" "$prec"
            fi
        done
    done
fi

# ---- parts --------------------------------------------------------------------------------
# The plain build's split (its convolutions' backward as lfs's GEMMs); then the cuDNN build's.
if has parts && [ -n "$DC" ]; then
    fits parts 200 && {
        mark "parts arm=lfs mode=LFS_SYNC_PARTS conv=gemm"
        LFS_SYNC_PARTS=1 run 150 "$DC" --device "$DEVICE" --bench-only
        if [ -n "$DC_CUDNN" ]; then
            # the cuDNN build: cuDNN's forward and both gradients (FP32 by cuDNN's math type),
            # then at TF32 (unblocked: only the whole is exact)
            mark "parts arm=lfs-cudnn mode=LFS_SYNC_PARTS conv=cudnn"
            LFS_SYNC_PARTS=1 run 150 "$DC_CUDNN" --device "$DEVICE" --bench-only
            # Adam and the EMA as candle's ops (LFS_FUSED_STEP=0, the way before
            # src/nn/cuda_step.rs's one kernel per parameter): the optimiser part side by side
            mark "parts arm=lfs-cudnn mode=LFS_SYNC_PARTS conv=cudnn step=candle"
            LFS_FUSED_STEP=0 LFS_SYNC_PARTS=1 run 150 "$DC_CUDNN" --device "$DEVICE" --bench-only
            # cuDNN's heuristic algorithms (LFS_CUDNN_ALGO=heuristic, the way before 2026-11-28)
            # against the timed search (the default, as PyTorch's cudnn.benchmark)
            # SAC's gradients through candle's autograd (LFS_SAC_GRADIENTS=autograd, the way
            # before src/rl/sac/on_device.rs) against the default written-out tensor ops: the SAC
            # benches of the two runs side by side (the LFS update is the same code in both)
            mark "parts arm=lfs-cudnn mode=unblocked conv=cudnn sac=autograd"
            LFS_SAC_GRADIENTS=autograd run 150 "$DC_CUDNN" --device "$DEVICE" --bench-only
            # the same written out with candle's element-wise ops for the LayerNorms and the
            # squashed Gaussian (LFS_FUSED_SAC=0) instead of src/rl/sac/row_ops.rs' kernels
            mark "parts arm=lfs-cudnn mode=unblocked conv=cudnn sac=elementwise"
            LFS_FUSED_SAC=0 run 150 "$DC_CUDNN" --device "$DEVICE" --bench-only
            # DrQ-v2's gradients through candle's autograd (LFS_DRQV2_GRADIENTS=autograd, the way
            # before src/rl/drqv2/on_device.rs): its DrQ-v2 bench beside the rounds' default
            mark "parts arm=lfs-cudnn mode=unblocked conv=cudnn drqv2=autograd"
            LFS_DRQV2_GRADIENTS=autograd run 150 "$DC_CUDNN" --device "$DEVICE" --bench-only
            # the projector's long product x · Wᵀ (K = 39,200) with its operands swapped
            # (LFS_LONG_PRODUCT=w-xt): the LFS update's whole beside the unblocked arms above
            mark "parts arm=lfs-cudnn mode=unblocked conv=cudnn long=w-xt"
            LFS_LONG_PRODUCT=w-xt run 150 "$DC_CUDNN" --device "$DEVICE" --bench-only
            mark "parts arm=lfs-cudnn mode=LFS_SYNC_PARTS conv=cudnn-heuristic"
            LFS_CUDNN_ALGO=heuristic LFS_SYNC_PARTS=1 run 150 "$DC_CUDNN" --device "$DEVICE" --bench-only
            mark "parts arm=lfs-cudnn mode=unblocked-tf32 conv=cudnn"
            run 120 "$DC_CUDNN" --device "$DEVICE" --bench-only $LFS_TF32_ARGS
        fi
        if [ -n "${GPU_SESSION_LFS_PARTS_ARGS:-}" ]; then
            mark "parts arm=lfs mode=args args=[${GPU_SESSION_LFS_PARTS_ARGS}]"
            run 150 "$DC" --device "$DEVICE" --bench-only $GPU_SESSION_LFS_PARTS_ARGS
        fi
    }
fi

# ---- stats --------------------------------------------------------------------------------
# The LFS update's statistics (LNC's distances, Sinkhorn, spread, entropy) on the device, read
# with the loss in one copy (the default on a GPU), against the CPU's way on the host
# (LFS_UPDATE_STATISTICS=host): ABBA rounds of device_check --bench-only, FP32, on the cuDNN
# build when carried (its update is the fastest, so its host stops weigh the most).
if has stats && [ -n "$DC" ]; then
    stats_bin=${DC_CUDNN:-$DC}
    stats_arm() {  # round statistics
        mark "stats round=$1 statistics=$2 build=$(basename "$stats_bin")"
        NVIDIA_TF32_OVERRIDE=0 LFS_UPDATE_STATISTICS=$2 run 120 "$stats_bin" --device "$DEVICE" --bench-only
    }
    for r in $(seq 1 "$ROUNDS"); do
        fits "stats-$r" 40 || break
        if [ $((r % 2)) = 1 ]; then stats_arm "$r" device; stats_arm "$r" host
        else stats_arm "$r" host; stats_arm "$r" device; fi
    done
fi

# ---- kprof --------------------------------------------------------------------------------
# Where the GPU time of each bench's timed updates goes, kernel by kernel (eval/gpu/kprof: CUPTI's
# records of the ranges device_check marks), per update, for each build: kprof-<arm>.txt.
KPROF_LIB=$CARRY/kprof/libkprof.so
if has kprof && [ -n "$DC" ]; then
    if [ ! -f "$KPROF_LIB" ]; then
        mark "skip stage=kprof reason=no-$KPROF_LIB(make-gpu-pack)"
    else
        for arm in lfs-cudnn lfs; do
            bin=$DC; [ "$arm" = lfs-cudnn ] && bin=$DC_CUDNN
            [ -n "$bin" ] || continue
            fits "kprof-$arm" 25 || break
            mark "kprof arm=$arm"
            KPROF_OUT="$OUT/kprof-$arm.txt" KPROF_DIV=10 LD_PRELOAD="$KPROF_LIB" run 120 "$bin" --device "$DEVICE" --bench-only
            head -40 "$OUT/kprof-$arm.txt" >> "$LOG" 2>/dev/null || true
        done
    fi
fi

# ---- trainbatch ---------------------------------------------------------------------------
# 2026-11-28's one failing check ("encoder at a training batch": 4.08e-4 at B=256 on CUDA in
# every build, 9.9e-6 on the CPU's candle path; 6, 16 and 64 pass at ~1e-6): ReLU masks flipped
# by a forward that differs by rounding (results/relu-kink-2026-11-28/). The check now runs the
# CPU's backward on the GPU's own activations and notes the gradients against the CPU's own
# forward; here alone at batches 6 to 256 for each build, every tensor's error printed. Every
# line goes to the log; the summary lists each batch's check and note.
if has trainbatch && [ -n "$DC" ]; then
    for arm in lfs lfs-cudnn; do
        bin=$DC; [ "$arm" = lfs-cudnn ] && bin=$DC_CUDNN
        [ -n "$bin" ] || continue
        fits "trainbatch-$arm" 60 || break
        for b in 6 16 64 96 128 160 192 224 256; do
            mark "trainbatch arm=$arm batch=$b"
            run 60 "$bin" --device "$DEVICE" --training-batch "$b" --training-batch-only
        done
    done
fi

# ---- long, memory -----------------------------------------------------------------------------
# Issue 52's correctness at scale: device_check --long (each training step at its real batch
# size, 100 updates on the GPU and on the CPU kernels from the same start and data, every
# update's loss within 5% of the CPU's) for each build, then --memory (2,000 LFS updates at
# B=512, the GPU's memory in use every 100, growth after update 200 under 64 MB).
if has long && [ -n "$DC" ]; then
    for arm in ${GPU_SESSION_LONG_ARMS:-lfs lfs-cudnn}; do
        bin=$DC; [ "$arm" = lfs-cudnn ] && bin=$DC_CUDNN
        [ -n "$bin" ] || continue
        fits "long-$arm" 150 || break
        mark "long arm=$arm"
        run 400 "$bin" --device "$DEVICE" --long "${GPU_SESSION_LONG_UPDATES:-100}"
    done
fi
if has memory && [ -n "$DC" ]; then
    fits memory 300 && { mark "memory arm=lfs"; run 500 "$DC" --device "$DEVICE" --memory "${GPU_SESSION_MEMORY_UPDATES:-2000}"; }
fi

# ---- video --------------------------------------------------------------------------------
# The LFS update's batches gathered and shifted on the device from the videos' frames kept there
# (the default on a GPU, src/data/device_stacks.rs) against stacked, shifted and uploaded by the
# host (LFS_VIDEO_FRAMES=host): ABBA rounds of device_check --bench-only, FP32, the candle build.
if has video && [ -n "$DC" ]; then
    video_arm() {  # round frames
        mark "video round=$1 frames=$2 build=$(basename "$DC")"
        LFS_VIDEO_FRAMES=$2 run 120 "$DC" --device "$DEVICE" --bench-only
    }
    for r in $(seq 1 "$ROUNDS"); do
        fits "video-$r" 30 || break
        if [ $((r % 2)) = 1 ]; then video_arm "$r" device; video_arm "$r" host
        else video_arm "$r" host; video_arm "$r" device; fi
    done
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
    fits e2e-sac-mini 60 && lfs_run sac-mini 150 eval --config pipelines/sac/mini.toml "${common[@]}" \
        --set 'env.render_quality="fast"' "${extra[@]}"
    fits e2e-sac-paper 90 && lfs_run sac-paper 200 eval --config pipelines/sac/paper.toml "${common[@]}" "${extra[@]}"
fi

# ---- cache, frames ---------------------------------------------------------------------------
# host_device STAGE VAR ESTIMATE ARGS...: ROUNDS rounds in ABBA order of one lfs eval with VAR=device
# (a GPU's default) and with VAR=host, runs named STAGE-device-rN and STAGE-host-rN
host_device() {
    local stage=$1 var=$2 estimate=$3; shift 3
    local r where order
    for r in $(seq 1 "$ROUNDS"); do
        fits "$stage-$r" "$estimate" || break
        order="device host"; [ $((r % 2)) = 0 ] && order="host device"
        for where in $order; do
            ( export "$var=$where"; lfs_run "$stage-$where-r$r" 150 "$@" )
        done
    done
}
if has cache && [ -n "$LFS" ]; then
    host_device cache LFS_FEATURE_CACHE 120 eval --config pipelines/sac/mini.toml "${common[@]}" \
        --set 'env.render_quality="fast"' "${extra[@]}"
fi
if has frames && [ -n "$LFS" ]; then
    frames=${GPU_SESSION_FRAMES_FRAMES:-2000}
    host_device frames LFS_REPLAY_FRAMES 100 eval --config pipelines/sac/paper.toml "${common[@]}" \
        --set run.num_train_frames="$frames" --set run.eval_every_frames="$frames" "${extra[@]}"
fi
if has frames-drqv2 && [ -n "$LFS" ]; then
    # DrQ-v2's 4,000 seed frames, then two training episodes
    frames=${GPU_SESSION_FRAMES_DRQV2_FRAMES:-6000}
    drq_extra=()
    for s in ${GPU_SESSION_DRQV2_SET:-}; do drq_extra+=(--set "$s"); done
    host_device frames-drqv2 LFS_REPLAY_FRAMES 120 train --config pipelines/drqv2/easy.toml --task "$DRQ_TASK" \
        --seed 1 --device "$DEVICE" --set run.num_train_frames="$frames" --set run.eval_every_frames=100000 \
        --set run.num_eval_episodes=1 --set run.tensorboard=false "${drq_extra[@]}"
fi

if has frames-e2e && [ -n "$LFS" ]; then
    # Algorithm 1 (lfs train, SAC + LFS on the SAC batch, pipelines/e2e/mini.toml, B=64): its
    # batches and the objective's pairs from the replay's frames on the device, against the
    # host's; the 2,000 seed frames, then two training episodes
    frames=${GPU_SESSION_FRAMES_E2E_FRAMES:-4000}
    host_device frames-e2e LFS_REPLAY_FRAMES 150 train --config pipelines/e2e/mini.toml --task walker_walk \
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
has anchors && fits anchors 60 && anchors anchors
has compile && fits compile 150 && anchors compile --compile

# ---- history ------------------------------------------------------------------------------
if has history; then
    fits history 30 && {
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
    elif fits drqv2 200; then
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
    elif fits drqv2-seeds 420; then
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
