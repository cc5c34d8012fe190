#!/usr/bin/env bash
# Packs what `make gpu-check` runs on a lent GPU machine into .gpu-carry/ (git-ignored), under the
# device tool's 64 MiB carry: the CUDA build's examples/device_check (make build-cuda),
# stripped and xz-compressed. It needs no FFmpeg (only the C runtime, the NVIDIA driver's
# libcuda and CUDA 13's libraries, which the GPU image's Python packages hold: gpu-check.sh
# finds them), unlike the `lfs` binary, whose FFmpeg libraries would not fit the carry.
#
#   eval/gpu/pack.sh [TARGET_DIR]     (TARGET_DIR: target-cuda, the default; target for a dry
#                                      run of gpu-check.sh with the CPU build)
#   GPU_PACK_ONLY_CUDNN=1             only the cuDNN build, packed as device_check.xz: every
#                                      stage's "lfs" arm is then that build, one parity run
#                                      and two arms a round instead of three (~30% of a session)
set -euo pipefail
cd "$(dirname "$0")/../.."
TARGET=${1:-target-cuda}
OUT=.gpu-carry
BIN="$TARGET/release/examples/device_check"
[ -x "$BIN" ] || { echo "no $BIN: run make build-cuda first (or name the CPU build: eval/gpu/pack.sh target)" >&2; exit 1; }
if readelf -d "$BIN" | grep -q 'NEEDED.*libav'; then
    echo "$BIN links FFmpeg's libraries, which the GPU machine lacks" >&2
    exit 1
fi
mkdir -p "$OUT"
# The commit the binaries were built from (+dirty when the tree had changes), for the session's
# header: the device tool's copy of .git is the session's first, not necessarily this one.
{ git rev-parse --short HEAD; git diff --quiet HEAD -- src examples Cargo.toml Cargo.lock || echo dirty; } |
    paste -sd+ > "$OUT/COMMIT"
CUDNN_BIN="$TARGET/release/device_check-cudnn"
rm -f "$OUT/device_check-cudnn.xz"
if [ "${GPU_PACK_ONLY_CUDNN:-0}" = 1 ]; then
    [ -x "$CUDNN_BIN" ] || { echo "GPU_PACK_ONLY_CUDNN=1 but no $CUDNN_BIN (make build-cuda with LFS_CUDNN=1)" >&2; exit 1; }
    strip -o "$OUT/device_check" "$CUDNN_BIN"
    xz -9 -T2 -f "$OUT/device_check"
    echo "packed $OUT/device_check.xz from $CUDNN_BIN (the cuDNN build alone): $(($(stat -c %s "$OUT/device_check.xz") / 1024 / 1024)) MiB"
    exit 0
fi
strip -o "$OUT/device_check" "$BIN"
xz -9 -T2 -f "$OUT/device_check"
size=$(stat -c %s "$OUT/device_check.xz")
echo "packed $OUT/device_check.xz from $BIN: $((size / 1024 / 1024)) MiB (the carry's limit: 64 MiB)"
# The cuDNN build beside it (eval/gpu/build-cuda.sh, LFS_CUDNN=1), when there is one.
if [ -x "$CUDNN_BIN" ]; then
    strip -o "$OUT/device_check-cudnn" "$CUDNN_BIN"
    xz -9 -T2 -f "$OUT/device_check-cudnn"
    cudnn_size=$(stat -c %s "$OUT/device_check-cudnn.xz")
    echo "packed $OUT/device_check-cudnn.xz from $CUDNN_BIN: $((cudnn_size / 1024 / 1024)) MiB"
    size=$((size + cudnn_size))
fi
[ "$size" -lt $((60 * 1024 * 1024)) ] || { echo "too large to carry" >&2; exit 1; }
