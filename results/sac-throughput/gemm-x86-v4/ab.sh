#!/bin/bash
# Interleaved A/B: gemm without (base) and with (v4) its AVX-512 kernels; 2 threads, nothing else running.
export RAYON_NUM_THREADS=2
for round in 1 2 3; do
  for v in base v4; do
    /tmp/bench_sac-$v --batch 128 --updates 8 --warmup 2 2>/dev/null | sed "s/^/{\"v\":\"$v\",\"round\":$round,\"b\":128} /"
    /tmp/bench_sac-$v --batch 512 --updates 4 --warmup 1 2>/dev/null | sed "s/^/{\"v\":\"$v\",\"round\":$round,\"b\":512} /"
    /tmp/bench_pretrain-$v --batch 64 --updates 5 --warmup 1 2>/dev/null | sed "s/^/{\"v\":\"$v\",\"round\":$round,\"b\":64,\"pretrain\":1} /"
  done
done
