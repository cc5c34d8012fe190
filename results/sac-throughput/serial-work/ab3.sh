#!/bin/bash
# Three builds in one window, alternated, 2 threads, LFS update at B = 128: "before" (stop 47's
# last build), "fused" (the bias and ReLU in registers, no redundant zero-fill) and "after"
# (fused + the serial work). Lines: label, benchmark, round, then the JSON line per update.
set -u
B=${B:-/tmp/s48}
for round in 1 2 3 4 5; do
  for v in before fused after; do
    case $v in before) p=$B/bp-base;; fused) p=$B/bench_pretrain-new;; after) p=$B/bp-serial;; esac
    RAYON_NUM_THREADS=2 $p --batch 128 --updates 8 --warmup 2 | sed "s/^/$v pretrain r$round /"
  done
done
