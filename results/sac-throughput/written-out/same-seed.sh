#!/usr/bin/env bash
# Same seed, same (random) encoder, before and after the written-out SAC update: HEAD's binary
# (3b14b84, candle's autograd) and this stop's, side by side at 1 thread each, 10K frames
# (half the earlier same-seed runs: the machine was shared with a TACO cell this time).
cd /work/main
run() { name=$1 bin=$2
  out=/work/side/$name
  env RAYON_NUM_THREADS=1 MUJOCO_GL=egl $bin eval --config pipelines/sac/mini.toml --encoder random \
    --task cartpole_swingup --seed 1 --set run.num_train_frames=10000 --out-dir $out > $out.log 2>&1
  echo "$name done $(date -u +%T)"
}
run before /work/bin/lfs-3b14b84 &
run after /work/bin/lfs-written-out &
wait
