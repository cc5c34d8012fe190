#!/bin/bash
# The projector's forward over pixels split by rows over the threads (after) against candle's
# matmul (before): the same benchmarks built before and after, alternated, 2 threads. Lines:
# label, benchmark, round, then the benchmark's JSON line per timed update.
set -u
B=${B:-/tmp/s47}
for round in 1 2 3 4; do
  for v in before after; do
    pre=$B/bench_pretrain-tape; e2e=$B/bench_e2e-final
    [ $v = after ] && { pre=$B/bench_pretrain-proj; e2e=$B/bench_e2e-proj; }
    RAYON_NUM_THREADS=2 $pre --batch 32 --updates 12 --warmup 2 | sed "s/^/$v pretrain32 r$round /"
    RAYON_NUM_THREADS=2 $pre --batch 128 --updates 8 --warmup 2 | sed "s/^/$v pretrain r$round /"
    RAYON_NUM_THREADS=2 $e2e --batch 128 --updates 3 --warmup 2 | sed "s/^/$v e2e r$round /"
  done
done
