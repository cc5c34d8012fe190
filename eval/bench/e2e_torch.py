"""One agent step of `lfs train` in PyTorch (CPU), the reference for `make bench-e2e`.

The paper's Algorithm 1 after the seed frames (docs/design.md §7) on the shapes of
pipelines/e2e/paper.toml with batch B (M = B), as examples/bench_e2e.rs times it: draw B
transitions (stacked uint8 obs and next obs, unshifted, random actions and rewards) from
procedural episodes; one LFS update on the B real pairs and B frame-mask candidates
(pretrain_torch.py's `lfs_update`: shift, LNC, clustering loss, Adam, EMA); then one SAC update
(sac_torch.py's Proto-RL transcription) on obs and next obs shifted and encoded, without
gradient, by the LFS online encoder just updated. Step i is agent step i: the critic updates
every step, the actor, alpha and the target critic on even steps only, as in the run. The
environment step and the acting are left out, as in examples/bench_e2e.rs. One JSON line per
timed step, with the same split (aux_seconds: the LFS update with its candidates' sampling;
sac_seconds: shift, encode, SAC update).

    .venv-bench/bin/python eval/bench/e2e_torch.py --batch 128 --updates 3 --warmup 2 --threads 2
"""
import argparse
import json
import time

import torch

from pretrain_torch import lfs_nets, lfs_update, moving_squares, sample
from sac_torch import ACTION_DIM, encode_shifted, sac_nets, sac_update

# SAC of docs/design.md §6: actor, alpha and target critic every 2nd agent step.
ACTOR_UPDATE_EVERY_STEPS = 2
CRITIC_TARGET_UPDATE_EVERY_STEPS = 2


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--updates", type=int, default=3)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--threads", type=int, default=2)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    gen = torch.Generator().manual_seed(1)
    lfs = lfs_nets()
    agent = sac_nets()
    # The replay: one task, 4 episodes of 250 frames, as examples/bench_e2e.rs fills its own.
    frames = moving_squares(num_tasks=1, num_episodes=4, num_frames=250)  # (1, 4, 250, 3, 84, 84)
    b = a.batch
    for step in range(a.warmup + a.updates):
        start = time.perf_counter()
        obs, next_obs = sample(frames, 0, b, False, gen)  # (b, 9, 84, 84) uint8 each
        action = torch.rand(b, ACTION_DIM) * 2 - 1
        reward = torch.rand(b, 1)
        sampled = time.perf_counter()
        # Algorithm 1: the LFS update on the (unshifted) batch and b frame-mask candidates ...
        cand_prev, cand_next = sample(frames, 0, b, True, gen)  # (b, 9, 84, 84) uint8 each
        loss, n = lfs_update(lfs, obs, next_obs, cand_prev, cand_next, gen)
        aux_done = time.perf_counter()
        # ... then SAC on the batch encoded by the updated online encoder, without gradient.
        h = encode_shifted(lfs.enc.convnet, obs, gen)  # (b, 39200)
        next_h = encode_shifted(lfs.enc.convnet, next_obs, gen)
        encoded = time.perf_counter()
        actor_update = step % ACTOR_UPDATE_EVERY_STEPS == 0
        sac_update(agent, h, next_h, action, reward, update_actor=actor_update,
                   update_target=step % CRITIC_TARGET_UPDATE_EVERY_STEPS == 0)
        end = time.perf_counter()
        if step >= a.warmup:
            print(json.dumps({"impl": "torch", "batch": b, "step": step, "actor_update": actor_update,
                              "update_seconds": round(end - start, 6),
                              "sample_seconds": round(sampled - start, 6),
                              "aux_seconds": round(aux_done - sampled, 6),
                              "sac_seconds": round(end - aux_done, 6),
                              "encode_seconds": round(encoded - aux_done, 6),
                              "aux_loss": loss.item(), "num_synthetic": n,
                              "threads": torch.get_num_threads()}), flush=True)


if __name__ == "__main__":
    main()
