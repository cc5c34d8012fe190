#!/usr/bin/env bash
# Builds eval/gpu/kprof/kprof.c into .gpu-carry/kprof/libkprof.so (make gpu-pack runs it): CUPTI 13's
# headers and libcupti.so.13 from the nvidia-cuda-cupti wheel (fetched into target-cuda/cupti/,
# never committed); at run time the GPU image's libcupti.so.13 is used.
set -euo pipefail
cd "$(dirname "$0")/../../.."
WHEEL_DIR=target-cuda/cupti
CUPTI=$WHEEL_DIR/nvidia/cu13
if [ ! -f "$CUPTI/include/cupti.h" ]; then
    mkdir -p "$WHEEL_DIR"
    python3 -m pip download --disable-pip-version-check --no-deps -q -d "$WHEEL_DIR" nvidia-cuda-cupti==13.0.85
    python3 -m zipfile -e "$WHEEL_DIR"/nvidia_cuda_cupti-13.0.85-*.whl "$WHEEL_DIR"
fi
CUDA_INCLUDE=$(echo .venv-cuda/lib/python3*/site-packages/nvidia/cu13/include)
mkdir -p .gpu-carry/kprof
# libcupti.so.13 beside it (found through the rpath), in case the GPU image's is missing
cp "$CUPTI/lib/libcupti.so.13" .gpu-carry/kprof/
gcc -O2 -shared -fPIC -Wall -Wextra -o .gpu-carry/kprof/libkprof.so eval/gpu/kprof/kprof.c \
    -I"$CUPTI/include" -I"$CUDA_INCLUDE" -L"$CUPTI/lib" -l:libcupti.so.13 -Wl,-rpath,'$ORIGIN'
echo "built .gpu-carry/kprof/libkprof.so"

