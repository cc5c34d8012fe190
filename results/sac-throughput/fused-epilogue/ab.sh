#!/bin/bash
# The conv forward's bias and ReLU in the AVX-512 tile's registers, and the backward without
# its redundant zero-fills (after), against the build before (before): each benchmark built
# before and after, alternated, 2 threads. Lines: label, benchmark, round, then the
# benchmark's JSON line per timed update.
set -u
B=${B:-/tmp/s48}
for round in 1 2 3 4; do
  for v in before after; do
    if [ $v = before ]; then p=$B/bp-base; s=$B/bs-base; else p=$B/bench_pretrain-new; s=$B/bench_sac-new; fi
    RAYON_NUM_THREADS=2 $p --batch 128 --updates 8 --warmup 2 | sed "s/^/$v pretrain r$round /"
    RAYON_NUM_THREADS=2 $p --batch 32 --updates 16 --warmup 2 | sed "s/^/$v pretrain32 r$round /"
    RAYON_NUM_THREADS=2 $s --pixels --batch 128 --updates 6 --warmup 2 | sed "s/^/$v sacpixels r$round /"
  done
done
