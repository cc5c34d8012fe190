#!/bin/bash
# The backward's ReLU mask as a select (after) against a store behind a branch (before): the
# same bench_pretrain built before and after, alternated, 2 threads. Lines: label, benchmark,
# round, then the benchmark's JSON line per timed update.
set -u
B=${B:-/tmp/s47}
for round in 1 2 3 4; do
  for v in before after; do
    bin=$B/bench_pretrain-proj2; [ $v = after ] && bin=$B/bench_pretrain-mask
    RAYON_NUM_THREADS=2 $bin --batch 128 --updates 8 --warmup 2 | sed "s/^/$v pretrain r$round /"
  done
done
