#!/bin/bash
# Interleaved A/B of the conv tiles in one build: LFS_CONV_KERNEL=avx2 (6 x 16 tiles in ymm
# registers) against avx512 (6 x 32 tiles in zmm registers where a pass has 32k output channels).
# 2 threads, the machine's other jobs stopped. Output: one JSON line per process line, prefixed
# with the kernel and the round.
cd "$(dirname "$0")/../../.."
export RAYON_NUM_THREADS=2
for round in 1 2 3 4; do
  for k in avx2 avx512; do
    tag="{\"kernel\":\"$k\",\"round\":$round}"
    LFS_CONV_KERNEL=$k target/release/examples/bench_conv --batch 128 --repeats 5 --no-stock | grep '"tape"' | sed "s/^/$tag /"
    LFS_CONV_KERNEL=$k target/release/examples/bench_pretrain --batch 128 --updates 4 --warmup 2 | sed "s/^/$tag /"
    LFS_CONV_KERNEL=$k target/release/examples/bench_sac --batch 128 --updates 4 --warmup 2 --pixels | sed "s/^/$tag /"
  done
done
