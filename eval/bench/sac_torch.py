"""One frozen-encoder SAC update in PyTorch (CPU), the reference for `make bench-sac`.

A transcription of Proto-RL's `ProtoAgent.update` with the intrinsic bonus off
(denisyarats/proto@e9899b4, proto.py: `update_critic`, `update_actor_and_alpha`, the
task_agnostic=False path of `update`; utils.py: `SquashedNormal`), on the shapes of
docs/design.md §6: random shift (replicate pad 4 + integer crop, as kornia's RandomCrop after
ReplicationPad2d) of obs and next obs, the frozen conv encoder under no_grad, then the critic
(two Q heads, target by EMA 0.01), and the actor and log alpha (Adam lr 1e-4). Every timed
update is a full one (critic, actor, alpha and target), the kind lfs runs every other step, as
examples/bench_sac.rs times it. One JSON line per timed update.

    .venv-bench/bin/python eval/bench/sac_torch.py --batch 128 --updates 5 --warmup 2 --threads 2
"""
import argparse
import json
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

from pretrain_torch import Encoder, random_shift, weight_init

ACTION_DIM = 6  # walker/cheetah


def mlp(i, hidden, o):
    return nn.Sequential(nn.Linear(i, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, o))


class Actor(nn.Module):
    def __init__(self, repr_dim=39200, feature_dim=50, hidden=1024):
        super().__init__()
        self.trunk = nn.Sequential(nn.Linear(repr_dim, feature_dim), nn.LayerNorm(feature_dim))
        self.policy = mlp(feature_dim, hidden, 2 * ACTION_DIM)
        self.apply(weight_init)

    def forward(self, h):
        mu, log_std = self.policy(self.trunk(h)).chunk(2, dim=-1)
        log_std = -10 + 0.5 * (2 - (-10)) * (torch.tanh(log_std) + 1)
        std = log_std.exp()
        eps = torch.randn_like(mu)
        x = mu + std * eps
        normal = (-0.5 * eps.pow(2) - log_std - 0.5 * math.log(2 * math.pi))
        log_det = 2 * (math.log(2) - x - F.softplus(-2 * x))
        return torch.tanh(x), (normal - log_det).sum(-1, keepdim=True)


class Critic(nn.Module):
    def __init__(self, repr_dim=39200, feature_dim=50, hidden=1024):
        super().__init__()
        self.trunk = nn.Sequential(nn.Linear(repr_dim, feature_dim), nn.LayerNorm(feature_dim))
        self.Q1 = mlp(feature_dim + ACTION_DIM, hidden, 1)
        self.Q2 = mlp(feature_dim + ACTION_DIM, hidden, 1)
        self.apply(weight_init)

    def forward(self, h, a):
        x = torch.cat([self.trunk(h), a], dim=-1)
        return self.Q1(x), self.Q2(x)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--updates", type=int, default=5)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--threads", type=int, default=2)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(0)
    encoder = Encoder()
    encoder.apply(weight_init)
    actor, critic, critic_target = Actor(), Critic(), Critic()
    critic_target.load_state_dict(critic.state_dict())
    log_alpha = torch.tensor(math.log(0.1), requires_grad=True)
    opt = lambda params: torch.optim.Adam(params, lr=1e-4, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0)
    actor_opt, critic_opt, alpha_opt = opt(actor.parameters()), opt(critic.parameters()), opt([log_alpha])
    b = a.batch
    obs = torch.randint(0, 256, (b, 9, 84, 84), generator=gen, dtype=torch.uint8)
    next_obs = torch.randint(0, 256, (b, 9, 84, 84), generator=gen, dtype=torch.uint8)
    for i in range(a.warmup + a.updates):
        start = time.perf_counter()
        action = torch.rand(b, ACTION_DIM) * 2 - 1
        reward = torch.rand(b, 1)
        with torch.no_grad():  # decouple representation (Proto-RL)
            h = encoder.convnet(random_shift(obs.float(), gen) / 255.0).flatten(1)
            next_h = encoder.convnet(random_shift(next_obs.float(), gen) / 255.0).flatten(1)
        encoded = time.perf_counter()
        alpha = log_alpha.exp().detach()
        with torch.no_grad():
            next_action, log_prob = actor(next_h)
            tq1, tq2 = critic_target(next_h, next_action)
            target_q = reward + 0.99 * (torch.min(tq1, tq2) - alpha * log_prob)
        q1, q2 = critic(h, action)
        critic_loss = F.mse_loss(q1, target_q) + F.mse_loss(q2, target_q)
        critic_opt.zero_grad(set_to_none=True)
        critic_loss.backward()
        critic_opt.step()
        # the actor, alpha and the target (every other agent step in lfs; here every update)
        new_action, log_prob = actor(h)
        aq1, aq2 = critic(h, new_action)
        actor_loss = (alpha * log_prob - torch.min(aq1, aq2)).mean()
        actor_opt.zero_grad(set_to_none=True)
        actor_loss.backward()
        actor_opt.step()
        alpha_loss = (log_alpha.exp() * (-log_prob - (-ACTION_DIM)).detach()).mean()
        alpha_opt.zero_grad(set_to_none=True)
        alpha_loss.backward()
        alpha_opt.step()
        with torch.no_grad():
            for p_t, p in zip(critic_target.parameters(), critic.parameters()):
                p_t.lerp_(p, 0.01)
        end = time.perf_counter()
        if i >= a.warmup:
            print(json.dumps({"impl": "torch", "batch": b, "pixels": True, "update_seconds": end - start,
                              "encode_seconds": encoded - start}))


if __name__ == "__main__":
    main()
