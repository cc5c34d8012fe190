#!/usr/bin/env bash
# Agent steps/s of `lfs eval` with sac/mini.toml, before (3b14b84: candle's autograd) and after
# (the written-out update), alternated over two rounds, 2 threads, the machine's other jobs
# stopped; 4000 frames each (1000 seed frames, then one update per agent step).
cd /work/main
for round in 1 2; do
  for v in before after; do
    bin=/work/bin/lfs-3b14b84; [ $v = after ] && bin=/work/bin/lfs-written-out
    out=/work/side/loop-$v-$round
    rm -rf $out
    env RAYON_NUM_THREADS=2 MUJOCO_GL=egl $bin eval --config pipelines/sac/mini.toml --encoder random \
      --task walker_walk --set run.num_train_frames=4000 --set run.num_seed_frames=1000 \
      --set run.eval_every_frames=4000 --set run.num_eval_episodes=1 --set 'env.render_quality="fast"' \
      --out-dir $out > $out.log 2>&1
    python3 -c "
import json
for l in open('$out/train.jsonl'):
    d = json.loads(l)
    if d.get('train/num_updates', 0) > 0:
        print(json.dumps({'v': '$v', 'round': $round, 'frame': d['train/frame'], 'agent_steps_per_s': d['train/fps'] / 2,
                          **{k: v for k, v in d.items() if k.startswith('time/')}}))
"
  done
done
