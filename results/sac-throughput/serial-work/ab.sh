#!/bin/bash
# The main thread's serial work between the passes: the encoder's dh read in place instead of
# copied out, and LNC's distances over the threads (after), against the build before (before),
# alternated, 2 threads. Lines: label, benchmark, round, then the JSON line per timed update.
set -u
B=${B:-/tmp/s48}
for round in 1 2 3 4; do
  for v in before after; do
    p=$B/bench_pretrain-new; [ $v = after ] && p=$B/bp-serial
    RAYON_NUM_THREADS=2 $p --batch 128 --updates 8 --warmup 2 | sed "s/^/$v pretrain r$round /"
    RAYON_NUM_THREADS=2 $p --batch 32 --updates 16 --warmup 2 | sed "s/^/$v pretrain32 r$round /"
  done
done
