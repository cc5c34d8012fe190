"""One frozen-encoder SAC update in PyTorch (CPU), the reference for `make bench-sac`.

A transcription of Proto-RL's `ProtoAgent.update` with the intrinsic bonus off
(denisyarats/proto@e9899b4, proto.py: `update_critic`, `update_actor_and_alpha`, the
task_agnostic=False path of `update`; utils.py: `SquashedNormal`), on the shapes of
docs/design.md §6: random shift (replicate pad 4 + integer crop, as kornia's RandomCrop after
ReplicationPad2d) of obs and next obs, the frozen conv encoder under no_grad, then the critic
(two Q heads, target by EMA 0.01), and the actor and log alpha (Adam lr 1e-4). Every timed
update is a full one (critic, actor, alpha and target), the kind lfs runs every other step, as
examples/bench_sac.rs times it. One JSON line per timed update. `sac_nets`, `encode_shifted` and
`sac_update` are reused by e2e_torch.py.

    .venv-bench/bin/python eval/bench/sac_torch.py --batch 128 --updates 5 --warmup 2 --threads 2
"""
import argparse
import json
import math
import time
from types import SimpleNamespace

import torch
import torch.nn as nn
import torch.nn.functional as F

from pretrain_torch import Encoder, random_shift, weight_init

ACTION_DIM = 6  # walker/cheetah
REPR_DIM = 39200  # the encoder's (32, 35, 35) output


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


def sac_nets():
    """Actor, critic, target critic (a copy of the critic), log alpha and their three Adams,
    initialised from the global torch seed (in this order)."""
    actor, critic, critic_target = Actor(), Critic(), Critic()
    critic_target.load_state_dict(critic.state_dict())
    log_alpha = torch.tensor(math.log(0.1), requires_grad=True)
    opt = lambda params: torch.optim.Adam(params, lr=1e-4, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0)
    return SimpleNamespace(actor=actor, critic=critic, critic_target=critic_target, log_alpha=log_alpha,
                           actor_opt=opt(actor.parameters()), critic_opt=opt(critic.parameters()),
                           alpha_opt=opt([log_alpha]))


def encode_shifted(convnet, obs, gen):
    """Random shift, then the conv encoder without gradient (decouple representation, Proto-RL):
    (b, 9, 84, 84) uint8 -> (b, 32, 35, 35) -> (b, 39200)."""
    with torch.no_grad():
        return convnet(random_shift(obs.float(), gen) / 255.0).flatten(1)


def sac_update(agent, h, next_h, action, reward, update_actor=True, update_target=True):
    """Proto-RL's update on encoder features h, next_h (b, 39200), action (b, A), reward (b, 1):
    the critic; the actor and alpha when `update_actor`; the target's EMA when `update_target`.
    Returns the losses (critic, actor, alpha) as tensors, the last two None without the actor
    (read by strong_check.py)."""
    actor, critic, log_alpha = agent.actor, agent.critic, agent.log_alpha
    alpha = log_alpha.exp().detach()
    with torch.no_grad():
        next_action, log_prob = actor(next_h)
        tq1, tq2 = agent.critic_target(next_h, next_action)
        target_q = reward + 0.99 * (torch.min(tq1, tq2) - alpha * log_prob)
    q1, q2 = critic(h, action)
    critic_loss = F.mse_loss(q1, target_q) + F.mse_loss(q2, target_q)
    agent.critic_opt.zero_grad(set_to_none=True)
    critic_loss.backward()
    agent.critic_opt.step()
    actor_loss = alpha_loss = None
    if update_actor:
        new_action, log_prob = actor(h)
        aq1, aq2 = critic(h, new_action)
        actor_loss = (alpha * log_prob - torch.min(aq1, aq2)).mean()
        agent.actor_opt.zero_grad(set_to_none=True)
        actor_loss.backward()
        agent.actor_opt.step()
        alpha_loss = (log_alpha.exp() * (-log_prob - (-ACTION_DIM)).detach()).mean()
        agent.alpha_opt.zero_grad(set_to_none=True)
        alpha_loss.backward()
        agent.alpha_opt.step()
    if update_target:
        with torch.no_grad():
            for p_t, p in zip(agent.critic_target.parameters(), critic.parameters()):
                p_t.lerp_(p, 0.01)
    return critic_loss, actor_loss, alpha_loss


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--updates", type=int, default=5)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--features", action="store_true",
                   help="update on fixed features (b, 39200), as with lfs's feature cache: no shift, no encoder")
    p.add_argument("--device", default="cpu",
                   help="torch device: cpu, or cuda on a GPU machine (each timed update ends with a GPU sync)")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    torch.set_default_device(a.device)  # networks, data and noise all live there
    gen = torch.Generator(device=a.device).manual_seed(0)
    sync = torch.cuda.synchronize if a.device.startswith("cuda") else (lambda: None)
    encoder = Encoder()
    encoder.apply(weight_init)
    agent = sac_nets()
    b = a.batch
    obs = torch.randint(0, 256, (b, 9, 84, 84), generator=gen, dtype=torch.uint8)
    next_obs = torch.randint(0, 256, (b, 9, 84, 84), generator=gen, dtype=torch.uint8)
    # what the feature cache hands the update: the encoder's (b, 39200) features, no graph
    features = torch.rand(b, REPR_DIM, generator=gen) * 0.5
    next_features = torch.rand(b, REPR_DIM, generator=gen) * 0.5
    for i in range(a.warmup + a.updates):
        sync()
        start = time.perf_counter()
        action = torch.rand(b, ACTION_DIM) * 2 - 1
        reward = torch.rand(b, 1)
        if a.features:
            h, next_h = features, next_features
        else:
            h = encode_shifted(encoder.convnet, obs, gen)
            next_h = encode_shifted(encoder.convnet, next_obs, gen)
        sync()
        encoded = time.perf_counter()
        # the actor, alpha and the target every update (every other agent step in lfs)
        sac_update(agent, h, next_h, action, reward)
        sync()
        end = time.perf_counter()
        if i >= a.warmup:
            print(json.dumps({"impl": "torch", "batch": b, "pixels": not a.features, "update_seconds": end - start,
                              "encode_seconds": encoded - start, "device": a.device}))


if __name__ == "__main__":
    main()
