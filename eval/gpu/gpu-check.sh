#!/usr/bin/env bash
# The CUDA build's checks on a machine with an NVIDIA GPU (issue 29, part 2): a workstation that
# ran make build-cuda, or a lent machine with the archive eval/gpu/pack.sh made (carried as
# .gpu-carry), in one command well inside the device tool's 10 minutes:
#   1. parity: examples/device_check --device cuda against the CPU kernels (encoder features and
#      gradients, one update of LFS, ATC and CURL, one SAC, one DrQ-v2 and one TACO update from
#      pixels (the critic's gradient, and TACO's loss, stepping the encoder), checkpoint files
#      written on one device and resumed on the other; each relative error <= 1e-4), then its
#      timings on the GPU (LFS at B=512, SAC on cached features at B=128 and 512, DrQ-v2 at 256);
#   1b. with GPU_CHECK_LONG=1: device_check --long 100 (LFS B=512, SAC on cached features
#      B=128/512, DrQ-v2 B=256: every update's loss within 5% of the CPU kernels') and --memory
#      2000 (the LFS update's GPU memory flat within 64 MB);
#   2. PyTorch's time for the same updates on the same GPU (eval/bench/strong_torch.py, the
#      same JSON lines: median and quartiles), when python3 has torch (the GPU image does).
# Everything it prints is also written under $OUT (the device tool's folder) or gpu-check-out/.
#
# Which device_check: .gpu-carry/device_check.xz (make gpu-pack) or make build-cuda's
# target-cuda/release/examples/device_check, whichever is newer (a lent machine has only the
# carry; a workstation that built lfs itself may have only target-cuda/). The built one runs
# where it is and finds make build-cuda's target-cuda/release/cuda-libs/ through its RPATH; the
# carried one runs with the CUDA libraries of python3's packages (the lent GPU image's torch,
# eval/gpu/cuda-libs.sh) on LD_LIBRARY_PATH.
#
#   run: eval/gpu/gpu-check.sh            (make gpu-check; on a lent machine, carry .gpu-carry)
#   dry run without a GPU: cargo build --release --example device_check && eval/gpu/pack.sh target &&
#       GPU_CHECK_DEVICE=cpu eval/gpu/gpu-check.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
DEVICE=${GPU_CHECK_DEVICE:-cuda}
OUT=${OUT:-gpu-check-out}
mkdir -p "$OUT"
WORK=$(mktemp -d /tmp/lfs-gpu.XXXXXX)
failed=()
step() { echo; echo "== $*"; }

CARRIED=.gpu-carry/device_check.xz
BUILT=target-cuda/release/examples/device_check
if [ -f "$CARRIED" ] && ! { [ -x "$BUILT" ] && [ "$BUILT" -nt "$CARRIED" ]; }; then
    step "unpack $CARRIED into $WORK"
    DC=$WORK/device_check
    xz -dc "$CARRIED" > "$DC" || { echo "cannot unpack $CARRIED" >&2; exit 1; }
    chmod +x "$DC"
    # Not beside a cuda-libs/: the CUDA libraries of the machine's Python packages (the lent
    # GPU image's torch, eval/gpu/cuda-libs.sh).
    . eval/gpu/cuda-libs.sh
    cuda_dirs=$(cuda_lib_dirs)
    export LD_LIBRARY_PATH="${cuda_dirs}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
elif [ -x "$BUILT" ]; then
    # make build-cuda's binary where it was built: its RPATH finds ../cuda-libs/ by itself, as
    # a user's `lfs` does (no LD_LIBRARY_PATH).
    DC=$BUILT
    cuda_dirs="$(dirname "$BUILT")/../cuda-libs (its RPATH)"
else
    echo "no device_check: make build-cuda on this machine, or make gpu-pack and carry .gpu-carry" >&2
    exit 1
fi
echo "device $DEVICE; CUDA libraries from: ${cuda_dirs:-none found}"
command -v nvidia-smi >/dev/null && nvidia-smi -L
ldd "$DC" | grep "not found" && failed+=("libraries")

step "1. parity and timings: device_check --device $DEVICE --bench"
if ! "$DC" --device "$DEVICE" --bench 2>&1 | tee "$OUT/device_check.jsonl"; then
    failed+=("device_check")
fi

# GPU_CHECK_LONG=1 (issue 52's correctness at scale; minutes, so not by default): every
# training step at its real batch size for 100 updates against the CPU kernels (a 5% band on
# each update's loss), and the LFS update's GPU memory over 2,000 updates (flat within 64 MB).
if [ "${GPU_CHECK_LONG:-0}" = 1 ]; then
    step "1b. parity at scale: device_check --long 100, then --memory 2000"
    "$DC" --device "$DEVICE" --long 100 2>&1 | tee "$OUT/device_check_long.jsonl" || failed+=("long")
    "$DC" --device "$DEVICE" --memory 2000 2>&1 | tee "$OUT/device_check_memory.jsonl" || failed+=("memory")
fi

step "2. PyTorch on the same device (eval/bench/strong_torch.py --device $DEVICE, FP32)"
if python3 -c "import torch" 2>/dev/null; then
    python3 eval/bench/strong_torch.py --device "$DEVICE" --suite lfs,sac-features,drqv2 2>&1 | tee "$OUT/strong_torch.jsonl"
else
    echo "python3 has no torch: skipped"
fi

rm -rf "$WORK"
echo
if [ ${#failed[@]} -gt 0 ]; then
    echo "gpu-check FAILED: ${failed[*]}"
    exit 1
fi
echo "gpu-check passed on $DEVICE"
