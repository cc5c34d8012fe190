#!/bin/bash
# Tiles of 8 rows (16 zmm accumulators) against 6 for the 512-bit kernel: /tmp/p6-* built at 88aae8b+ (6 rows),
# target/release/examples/* with P_WIDE = 8 in src/nn/kernels/conv_nhwc.rs (not committed: it did not pay).
cd /work/main
export RAYON_NUM_THREADS=2
for round in 1 2 3 4; do
  for v in p6 p8; do
    if [ $v = p6 ]; then d=/tmp/p6-; else d=target/release/examples/; fi
    tag="{\"tile\":\"$v\",\"round\":$round}"
    ${d}bench_conv --batch 128 --repeats 5 --no-stock | grep '"tape"' | sed "s/^/$tag /"
    ${d}bench_pretrain --batch 128 --updates 4 --warmup 2 | sed "s/^/$tag /"
  done
done
