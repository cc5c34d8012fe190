"""Proto-RL's and APT's exploration updates in PyTorch, the reference for the lfs explorers'
training dynamics (issue 54; docs/design.md, "Proto-RL and APT: exploration pre-training").

Transcriptions, written here from the upstream code (neither repository is a dependency):
- `--method proto`: Proto-RL (denisyarats/proto @e9899b422e5710d115eb22c13ff32d64cbcaa5c7),
  proto.py `Encoder` (conv on obs / 255, projector 39200 -> 128), `Actor` / `Critic` (pre_fc
  Linear -> LayerNorm, MLPs of 1024, squashed Gaussian with log std in [-10, 2]), `Proto`
  (predictor 128 -> 512 -> 128, 512 prototypes, T 0.1, Sinkhorn 3 iterations, queue 2048, topk
  3) and `ProtoAgent.update` with task_agnostic = True: every agent step the critic; every
  second step (encoder_update_frequency 2) the representation and the encoder target (tau
  0.05), and (actor_update_frequency 2) the actor, alpha and the critic target (tau 0.01);
  the intrinsic reward (kNN over the queue) every step, as reward. lr 1e-4, alpha 0.1.
- `--method apt`: URLB's APT (rll-research/url_benchmark @bb98f0c6d78b3c467fb5a9fa5bbba3b7c0250397),
  agent/icm_apt.py `ICMAPTAgent.update` with reward_free = True, update_encoder = True: encoder
  (obs / 255 - 0.5), ICM (trunk 39200 -> 512 LayerNorm Tanh, forward and backward nets of 1024)
  stepped by its loss together with the encoder, the PBE reward (k 12 within the batch,
  averaged, no running mean, clip 0) of the updated ICM trunk on obs, then DDPG (agent/ddpg.py:
  sigma 0.2, clip 0.3, critic on detached features, actor, critic target tau 0.01), 3-step
  returns; one update every second agent step (update_every_steps 2), each one complete.

`--frames DIR`: updates on a fixed replay (eval/bench/dump_frames.py's frames.npy and
episodes.json, sampled as eval/bench/drqv2_torch.py's `Replay`: 1-step for Proto-RL, whose
replay stores transitions; 3-step for APT), one record of metrics per update, written as one
JSON file; eval/bench/explore_dynamics.py cuts the curves into windows and compares them with
another implementation's.  The augmentation is the integer random shift (pad 4, replicate),
which kornia's RandomCrop (Proto-RL) and URLB's grid_sample shift both compute.

    /work/torchvenv/bin/python eval/bench/explore_torch.py --method proto \
        --frames bench-out/drqv2-dynamics/frames --seed 1 --batch 64 --updates 300 --out s1.json

Metrics (lists, one value per update that computes them): proto `repr_loss`, `actor_loss`,
`alpha_loss`, `actor_entropy` (every second step), `intr_reward` (batch mean), `critic_loss`,
`critic_q1`, `critic_target_q`, `alpha` (every step); apt `icm_loss`, `intr_reward`,
`critic_loss`, `critic_q1`, `critic_target_q`, `actor_loss` (every update).  `--updates` counts
calls of the agent's `update`: agent steps for Proto-RL (half of them train the encoder),
updates (every second agent step) for APT.

Sizes: at a batch below upstream's 512, pass `--protos B --queue 4B` to keep Proto-RL's ratios
(as many prototypes as batch rows, a queue of 4 enqueues).  With 512 prototypes each drawing
its candidate from 64 rows, every row enters the queue ~8 times per update, so its 3rd-nearest
queue entry is itself and the reward is 0 almost everywhere: the kNN would go untested.
"""
import argparse
import json
import math
import os
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from drqv2_torch import Replay, weight_init  # noqa: E402  (the same fixed-replay sampler)


def random_shift(x, pad=4):
    """ReplicationPad2d(pad) + an integer crop per sample, offsets uniform in [0, 2 pad]: upstream's
    per-sample slicing loop (`torch.stack([xp[i, :, oy:oy + h, ox:ox + w] for i ...])`) as one
    gather, the same draws and the same crops bit for bit (checked), 4x faster on a CPU at
    batch 64: the speed comparison's anchor is the version a user would write."""
    n, c, h, w = x.shape
    xp = F.pad(x, (pad,) * 4, mode="replicate")
    off = torch.randint(0, 2 * pad + 1, (n, 2))
    rows = off[:, 1, None] + torch.arange(h)  # (n, h)
    cols = off[:, 0, None] + torch.arange(w)  # (n, w)
    flat = (rows[:, :, None] * (w + 2 * pad) + cols[:, None, :]).reshape(n, 1, h * w).expand(n, c, h * w)
    return xp.reshape(n, c, -1).gather(2, flat).reshape(n, c, h, w)


def conv_net(in_ch=9):
    return nn.Sequential(nn.Conv2d(in_ch, 32, 3, stride=2), nn.ReLU(), nn.Conv2d(32, 32, 3, stride=1), nn.ReLU(),
                         nn.Conv2d(32, 32, 3, stride=1), nn.ReLU(), nn.Conv2d(32, 32, 3, stride=1), nn.ReLU())


def mlp(i, hidden, o):
    return nn.Sequential(nn.Linear(i, hidden), nn.ReLU(inplace=True), nn.Linear(hidden, hidden),
                         nn.ReLU(inplace=True), nn.Linear(hidden, o))


def soft_update(net, target, tau):
    with torch.no_grad():
        for p, p_t in zip(net.parameters(), target.parameters()):
            p_t.data.copy_(tau * p.data + (1 - tau) * p_t.data)


# ---- Proto-RL

class ProtoEncoder(nn.Module):
    def __init__(self, proj_dim=128):
        super().__init__()
        self.conv = conv_net()
        self.repr_dim = 32 * 35 * 35
        self.projector = nn.Linear(self.repr_dim, proj_dim)
        self.apply(weight_init)

    def encode(self, obs):
        return self.conv(obs / 255.0).view(obs.shape[0], -1)

    def forward(self, obs):
        return self.projector(self.encode(obs))


class SacActor(nn.Module):
    def __init__(self, repr_dim, action_dim, feature_dim=50, hidden_dim=1024, log_std_bounds=(-10.0, 2.0)):
        super().__init__()
        self.log_std_bounds = log_std_bounds
        self.pre_fc = nn.Sequential(nn.Linear(repr_dim, feature_dim), nn.LayerNorm(feature_dim))
        self.fc = mlp(feature_dim, hidden_dim, 2 * action_dim)
        self.apply(weight_init)

    def forward(self, obs):
        mu, log_std = self.fc(self.pre_fc(obs)).chunk(2, dim=-1)
        lo, hi = self.log_std_bounds
        log_std = lo + 0.5 * (hi - lo) * (torch.tanh(log_std) + 1)
        std = log_std.exp()
        return mu, std

    def rsample(self, obs):
        """SquashedNormal.rsample and its log_prob (the stable log-Jacobian)."""
        mu, std = self(obs)
        x = mu + std * torch.randn_like(mu)
        lp = torch.distributions.Normal(mu, std).log_prob(x) - 2.0 * (math.log(2.0) - x - F.softplus(-2.0 * x))
        return torch.tanh(x), lp.sum(-1, keepdim=True)


class SacCritic(nn.Module):
    def __init__(self, repr_dim, action_dim, feature_dim=50, hidden_dim=1024):
        super().__init__()
        self.pre_fc = nn.Sequential(nn.Linear(repr_dim, feature_dim), nn.LayerNorm(feature_dim))
        self.Q1 = mlp(feature_dim + action_dim, hidden_dim, 1)
        self.Q2 = mlp(feature_dim + action_dim, hidden_dim, 1)
        self.apply(weight_init)

    def forward(self, obs, action):
        h = torch.cat([self.pre_fc(obs), action], dim=-1)
        return self.Q1(h), self.Q2(h)


class Proto(nn.Module):
    def __init__(self, proj_dim=128, pred_dim=512, T=0.1, num_protos=512, topk=3, queue_size=2048):
        super().__init__()
        self.predictor = nn.Sequential(nn.Linear(proj_dim, pred_dim), nn.ReLU(), nn.Linear(pred_dim, proj_dim))
        self.T, self.topk, self.num_protos = T, topk, num_protos
        self.protos = nn.Linear(proj_dim, num_protos, bias=False)
        self.register_buffer("queue", torch.zeros(queue_size, proj_dim))
        self.queue_ptr = 0
        self.apply(weight_init)

    def normalize_protos(self):
        self.protos.weight.data.copy_(F.normalize(self.protos.weight.data.clone(), dim=1, p=2))

    def forward(self, s, t):
        self.normalize_protos()
        s = F.normalize(self.predictor(s), dim=1, p=2)
        t = F.normalize(t, dim=1, p=2)
        log_p_s = F.log_softmax(self.protos(s) / self.T, dim=1)
        with torch.no_grad():
            q_t = self.sinkhorn(self.protos(t))
        return -(q_t * log_p_s).sum(dim=1).mean()

    def compute_reward(self, z):
        self.normalize_protos()
        z = F.normalize(z, dim=1, p=2)
        idx = torch.distributions.Categorical(F.softmax(self.protos(z).T, dim=1)).sample()
        ptr = self.queue_ptr
        self.queue[ptr:ptr + self.num_protos] = z[idx]
        self.queue_ptr = (ptr + self.num_protos) % self.queue.shape[0]
        z_to_q = torch.norm(z[:, None, :] - self.queue[None, :, :], dim=2, p=2)
        return torch.topk(z_to_q, self.topk, dim=1, largest=False)[0][:, -1:]

    def sinkhorn(self, scores):
        q = scores / self.T
        q = torch.exp(q - q.max()).T
        q /= q.sum()
        r = torch.ones(q.shape[0]) / q.shape[0]
        c = torch.ones(q.shape[1]) / q.shape[1]
        for _ in range(3):  # Proto.__init__ hard-codes num_iters = 3
            q *= (r / q.sum(dim=1)).unsqueeze(1)
            q *= (c / q.sum(dim=0)).unsqueeze(0)
        return (q / q.sum(dim=0, keepdim=True)).T


class ProtoAgent:
    def __init__(self, action_dim, lr=1e-4, discount=0.99, init_temperature=0.1, num_protos=512, queue_size=2048):
        self.encoder, self.encoder_target = ProtoEncoder(), ProtoEncoder()
        self.encoder_target.load_state_dict(self.encoder.state_dict())
        repr_dim = self.encoder.repr_dim
        self.actor = SacActor(repr_dim, action_dim)
        self.critic, self.critic_target = SacCritic(repr_dim, action_dim), SacCritic(repr_dim, action_dim)
        self.critic_target.load_state_dict(self.critic.state_dict())
        self.proto = Proto(num_protos=num_protos, queue_size=queue_size)
        self.log_alpha = torch.tensor(np.log(init_temperature), dtype=torch.float32, requires_grad=True)
        self.target_entropy = -action_dim
        self.discount = discount
        self.actor_opt = torch.optim.Adam(self.actor.parameters(), lr=lr)
        self.critic_opt = torch.optim.Adam(self.critic.parameters(), lr=lr)
        self.proto_opt = torch.optim.Adam(list(self.encoder.parameters()) + list(self.proto.parameters()), lr=lr)
        self.log_alpha_opt = torch.optim.Adam([self.log_alpha], lr=lr)

    def update(self, obs, action, reward, discount, next_obs, step):
        m = {}
        obs, next_obs = random_shift(obs.float()), random_shift(next_obs.float())
        if step % 2 == 0:  # encoder_update_frequency
            z = self.encoder(obs)
            with torch.no_grad():
                next_z = self.encoder_target(next_obs)
            loss = self.proto(z, next_z)
            self.proto_opt.zero_grad()
            loss.backward()
            self.proto_opt.step()
            soft_update(self.encoder, self.encoder_target, 0.05)
            m["repr_loss"] = loss.item()
        with torch.no_grad():
            # encoder(next_obs) is projector(encode(next_obs)): the conv features are computed
            # once here and serve the reward and the critic, as the same numbers upstream
            obs, next_obs = self.encoder.encode(obs), self.encoder.encode(next_obs)
            reward = self.proto.compute_reward(self.encoder.projector(next_obs))
        m["intr_reward"] = reward.mean().item()
        alpha = self.log_alpha.exp().detach()
        with torch.no_grad():
            next_action, log_prob = self.actor.rsample(next_obs)
            tq1, tq2 = self.critic_target(next_obs, next_action)
            target_q = reward + discount * (torch.min(tq1, tq2) - alpha * log_prob)
        q1, q2 = self.critic(obs, action)
        critic_loss = F.mse_loss(q1, target_q) + F.mse_loss(q2, target_q)
        self.critic_opt.zero_grad()
        critic_loss.backward()
        self.critic_opt.step()
        m.update(critic_loss=critic_loss.item(), critic_q1=q1.mean().item(), critic_target_q=target_q.mean().item())
        if step % 2 == 0:  # actor_update_frequency
            a, log_prob = self.actor.rsample(obs)
            aq1, aq2 = self.critic(obs, a)
            actor_loss = (alpha * log_prob - torch.min(aq1, aq2)).mean()
            self.actor_opt.zero_grad()
            actor_loss.backward()
            self.actor_opt.step()
            alpha_loss = (self.log_alpha.exp() * (-log_prob - self.target_entropy).detach()).mean()
            self.log_alpha_opt.zero_grad()
            alpha_loss.backward()
            self.log_alpha_opt.step()
            m.update(actor_loss=actor_loss.item(), alpha_loss=alpha_loss.item(), actor_entropy=-log_prob.mean().item())
        if step % 2 == 0:  # critic_target_update_frequency
            soft_update(self.critic, self.critic_target, 0.01)
        m["alpha"] = self.log_alpha.exp().item()
        return m


# ---- APT (URLB icm_apt on DDPG)

class UrlbEncoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.repr_dim = 32 * 35 * 35
        self.convnet = conv_net()
        self.apply(weight_init)

    def forward(self, obs):
        return self.convnet(obs / 255.0 - 0.5).view(obs.shape[0], -1)


def ln_tanh_trunk(i, o):
    return nn.Sequential(nn.Linear(i, o), nn.LayerNorm(o), nn.Tanh())


class DdpgActor(nn.Module):
    def __init__(self, repr_dim, action_dim, feature_dim=50, hidden_dim=1024):
        super().__init__()
        self.trunk = ln_tanh_trunk(repr_dim, feature_dim)
        self.policy = mlp(feature_dim, hidden_dim, action_dim)
        self.apply(weight_init)

    def sample(self, obs, std=0.2, clip=0.3):
        """TruncatedNormal(tanh(policy), std).sample(clip): straight-through clamp."""
        mu = torch.tanh(self.policy(self.trunk(obs)))
        x = mu + torch.clamp(torch.randn_like(mu) * std, -clip, clip)
        clamped = torch.clamp(x, -1.0 + 1e-6, 1.0 - 1e-6)
        return x - x.detach() + clamped.detach()


class DdpgCritic(nn.Module):
    def __init__(self, repr_dim, action_dim, feature_dim=50, hidden_dim=1024):
        super().__init__()
        self.trunk = ln_tanh_trunk(repr_dim, feature_dim)
        self.Q1 = mlp(feature_dim + action_dim, hidden_dim, 1)
        self.Q2 = mlp(feature_dim + action_dim, hidden_dim, 1)
        self.apply(weight_init)

    def forward(self, obs, action):
        h = torch.cat([self.trunk(obs), action], dim=-1)
        return self.Q1(h), self.Q2(h)


class ICM(nn.Module):
    def __init__(self, obs_dim, action_dim, hidden_dim=1024, icm_rep_dim=512):
        super().__init__()
        self.trunk = ln_tanh_trunk(obs_dim, icm_rep_dim)
        self.forward_net = nn.Sequential(nn.Linear(icm_rep_dim + action_dim, hidden_dim), nn.ReLU(),
                                         nn.Linear(hidden_dim, icm_rep_dim))
        self.backward_net = nn.Sequential(nn.Linear(2 * icm_rep_dim, hidden_dim), nn.ReLU(),
                                          nn.Linear(hidden_dim, action_dim), nn.Tanh())
        self.apply(weight_init)

    def forward(self, obs, action, next_obs):
        obs, next_obs = self.trunk(obs), self.trunk(next_obs)
        next_obs_hat = self.forward_net(torch.cat([obs, action], dim=-1))
        action_hat = self.backward_net(torch.cat([obs, next_obs], dim=-1))
        return (torch.norm(next_obs - next_obs_hat, dim=-1, p=2, keepdim=True),
                torch.norm(action - action_hat, dim=-1, p=2, keepdim=True))


def pbe_reward(rep, k=12):
    """utils.PBE with knn_avg, no running mean, knn_clip 0 (icm_apt.yaml)."""
    b = rep.shape[0]
    d = torch.norm(rep[:, None, :] - rep[None, :, :], dim=-1, p=2)
    r, _ = d.topk(k, dim=1, largest=False, sorted=True)
    r = torch.maximum(r.reshape(-1, 1) - 0.0, torch.zeros(b * k, 1)).reshape(b, k).mean(dim=1, keepdim=True)
    return torch.log(r + 1.0)


class AptAgent:
    def __init__(self, action_dim, lr=1e-4, tau=0.01, knn_k=12):
        self.encoder = UrlbEncoder()
        repr_dim = self.encoder.repr_dim
        self.actor = DdpgActor(repr_dim, action_dim)
        self.critic, self.critic_target = DdpgCritic(repr_dim, action_dim), DdpgCritic(repr_dim, action_dim)
        self.critic_target.load_state_dict(self.critic.state_dict())
        self.icm = ICM(repr_dim, action_dim)
        self.encoder_opt = torch.optim.Adam(self.encoder.parameters(), lr=lr)
        self.actor_opt = torch.optim.Adam(self.actor.parameters(), lr=lr)
        self.critic_opt = torch.optim.Adam(self.critic.parameters(), lr=lr)
        self.icm_opt = torch.optim.Adam(self.icm.parameters(), lr=lr)
        self.tau, self.knn_k = tau, knn_k

    def update(self, obs, action, reward, discount, next_obs, step):
        obs = self.encoder(random_shift(obs.float()))
        with torch.no_grad():
            next_obs = self.encoder(random_shift(next_obs.float()))
        forward_error, backward_error = self.icm(obs, action, next_obs)
        icm_loss = forward_error.mean() + backward_error.mean()
        self.icm_opt.zero_grad()
        self.encoder_opt.zero_grad(set_to_none=True)
        icm_loss.backward()
        self.icm_opt.step()
        self.encoder_opt.step()
        with torch.no_grad():
            reward = pbe_reward(self.icm.trunk(obs), self.knn_k)
        obs, next_obs = obs.detach(), next_obs.detach()
        with torch.no_grad():
            next_action = self.actor.sample(next_obs)
            tq1, tq2 = self.critic_target(next_obs, next_action)
            target_q = reward + discount * torch.min(tq1, tq2)
        q1, q2 = self.critic(obs, action)
        critic_loss = F.mse_loss(q1, target_q) + F.mse_loss(q2, target_q)
        self.critic_opt.zero_grad(set_to_none=True)
        critic_loss.backward()
        self.critic_opt.step()
        aq1, aq2 = self.critic(obs, self.actor.sample(obs))
        actor_loss = -torch.min(aq1, aq2).mean()
        self.actor_opt.zero_grad(set_to_none=True)
        actor_loss.backward()
        self.actor_opt.step()
        soft_update(self.critic, self.critic_target, self.tau)
        return {"icm_loss": icm_loss.item(), "intr_reward": reward.mean().item(), "critic_loss": critic_loss.item(),
                "critic_q1": q1.mean().item(), "critic_target_q": target_q.mean().item(),
                "actor_loss": actor_loss.item()}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--method", choices=["proto", "apt"], required=True)
    p.add_argument("--frames", required=True, help="a dump_frames.py folder")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--updates", type=int, default=300)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--first-step", type=int, default=2000, help="agent step of the first update (even)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--protos", type=int, default=512, help="proto: prototypes (upstream 512, = its batch)")
    p.add_argument("--queue", type=int, default=2048, help="proto: candidate queue (upstream 2048 = 4 x 512)")
    p.add_argument("--out", required=True)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    nstep = 1 if a.method == "proto" else 3
    replay = Replay(a.frames, nstep, 0.99)
    if a.method == "proto":
        agent = ProtoAgent(replay.action_dim, num_protos=a.protos, queue_size=a.queue)
    else:
        agent = AptAgent(replay.action_dim)
    rng = np.random.default_rng(a.seed)
    metrics = {}
    update_seconds = []
    start = time.perf_counter()
    for i in range(a.updates):
        started = time.perf_counter()
        obs, action, reward, discount, next_obs = replay.sample(a.batch, rng)
        # Proto-RL's update runs every agent step; URLB's only every second one (update_every_steps)
        step = a.first_step + (i if a.method == "proto" else 2 * i)
        for k, v in agent.update(obs, action, reward, discount, next_obs, step).items():
            metrics.setdefault(k, []).append(v)
        update_seconds.append(time.perf_counter() - started)
    out = {"method": a.method, "seed": a.seed, "batch": a.batch, "nstep": nstep, "updates": a.updates,
           "first_step": a.first_step, "torch": torch.__version__, "seconds": time.perf_counter() - start,
           "metrics": metrics, "impl": "torch", "update_seconds": update_seconds}
    if a.method == "proto":
        out.update(protos=a.protos, queue=a.queue)
    with open(a.out, "w") as f:
        json.dump(out, f)


if __name__ == "__main__":
    main()
