#!/bin/bash
# Tape buffers reused (after) against a fresh zeroed tape per forward (before); with
# AFTER=final, "final" also converts the image pixel by pixel. The same benchmarks built
# before and after each change, alternated, 2 threads. Lines: label, benchmark, round, then the
# benchmark's JSON line per timed update.
set -u
B=${B:-/tmp/s47}
for round in 1 2 3 4; do
  for v in before ${AFTER:-after}; do
    RAYON_NUM_THREADS=2 $B/bench_pretrain-$v --batch 128 --updates 8 --warmup 2 | sed "s/^/$v pretrain r$round /"
    RAYON_NUM_THREADS=2 $B/bench_e2e-$v --batch 128 --updates 3 --warmup 2 | sed "s/^/$v e2e r$round /"
  done
done
