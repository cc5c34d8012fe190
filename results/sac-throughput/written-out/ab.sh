#!/bin/bash
# Interleaved A/B of the SAC update on cached features: candle's autograd (before, built at
# 3b14b84) against the written-out update (after), the same bench_sac, 2 threads, the machine's
# other jobs stopped (kill -STOP) for the run. One JSON line per timed update.
export RAYON_NUM_THREADS=2
for round in 1 2 3; do
  for v in before after; do
    /tmp/bench_sac-$v --batch 128 --updates 8 --warmup 2 2>/dev/null | sed "s/^/{\"v\":\"$v\",\"round\":$round,\"b\":128} /"
    /tmp/bench_sac-$v --batch 512 --updates 4 --warmup 1 2>/dev/null | sed "s/^/{\"v\":\"$v\",\"round\":$round,\"b\":512} /"
  done
done
