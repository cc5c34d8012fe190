#!/usr/bin/env bash
# Same seed, same encoder: before (HEAD binary, f32 cache), after (row-split trunks + overlap, f32), after with the f16 cache.
cd /work/main
ENC=runs/study-mini-regen/lfs/encoder.safetensors
run() { name=$1 bin=$2; shift 2
  out=/work/study2/side/$name
  env RAYON_NUM_THREADS=2 /work/study2/$bin eval --config pipelines/sac/mini.toml --encoder $ENC --task cartpole_swingup --seed 1 \
    --set run.num_train_frames=20000 "$@" --out-dir $out > $out.log 2>&1
  echo "$name done $(date -u +%T)"
}
run before-f32 lfs-head
run after-f32 lfs-new
run after-f16 lfs-new --set 'replay.feature_cache_dtype="f16"'
