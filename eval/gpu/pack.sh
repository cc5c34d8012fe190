#!/usr/bin/env bash
# Packs what `make gpu-check` runs on a lent GPU machine into .gpu-carry/ (git-ignored), under the
# device tool's 64 MiB carry: the CUDA build's examples/device_check (make build-cuda; the one
# CUDA build, with cuDNN), stripped and xz-compressed. It needs no FFmpeg (only the C runtime,
# the NVIDIA driver's libcuda and CUDA 13's and cuDNN 9's libraries, which the GPU image's
# Python packages hold: eval/gpu/cuda-libs.sh finds them), unlike the `lfs` binary, whose
# FFmpeg libraries would not fit the carry (eval/gpu/pack-e2e.sh packs stand-ins for them).
#
#   eval/gpu/pack.sh [TARGET_DIR]     (TARGET_DIR: target-cuda, the default; target for a dry
#                                      run of gpu-check.sh with the CPU build)
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
# an older pack's second build (device_check-cudnn.xz, before the one CUDA build): not carried
rm -f "$OUT/device_check-cudnn.xz"
strip -o "$OUT/device_check" "$BIN"
xz -9 -T2 -f "$OUT/device_check"
size=$(stat -c %s "$OUT/device_check.xz")
echo "packed $OUT/device_check.xz from $BIN: $((size / 1024 / 1024)) MiB (the carry's limit: 64 MiB)"
[ "$size" -lt $((60 * 1024 * 1024)) ] || { echo "too large to carry" >&2; exit 1; }
