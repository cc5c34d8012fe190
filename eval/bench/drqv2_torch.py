"""DrQ-v2's and TACO's updates in PyTorch, the reference for `make bench-drqv2` and
`make bench-dynamics-drqv2`.

A transcription of DrQ-v2 (facebookresearch/drqv2 @c0c650b76c6e5d22a7eb5f2edffd1440fe94f8ef):
drqv2.py `RandomShiftsAug` (pad 4 replicate + grid_sample), `Encoder` (obs / 255 - 0.5, four
3x3 convs of 32, strides 2, 1, 1, 1), `Actor` and `Critic` (trunk Linear -> LayerNorm -> Tanh,
MLPs of 1024), `DrQV2Agent.update` (augment obs and next obs, encode obs with gradient and next
obs without, `update_critic` stepping the encoder and the critic on the n-step target,
`update_actor` on detached features, soft update tau = 0.01); utils.py `TruncatedNormal`,
`schedule` (linear), `weight_init`; replay_buffer.py `_sample` (n-step reward and discount).
Written here from that code, not imported: the DrQ-v2 repo is not a dependency. With `--taco`,
TACO's agent (FrankZheng2022/TACO @84c38e34f4f9dfd2b059fb6d1356757e8d40712e): agents/taco.py
`TACOAgent` (DrQ-v2's with the critic on latent actions of utils.py `ActionEncoding`, and
`update_taco` after every update: proj_s, proj_sa, the reward head and W; CURL, reward and taco
terms; `taco_opt` over the heads, the action encoder and the encoder), and replay_buffer.py's
action sequences and O_t+K (multistep 3).

Two uses:
- `--bench`: seconds per update (each one a full one: encoder, critic, actor, target) on
  random pixels, one JSON line per timed update; examples/bench_drqv2.rs times ours.
- `--frames DIR`: updates on a fixed replay, the episodes eval/bench/dump_frames.py wrote
  (frames.npy, and episodes.json with each episode's actions and rewards), one JSON line of
  metrics per update: examples/bench_drqv2.rs --frames runs ours on the same episodes, and
  eval/bench/drqv2_dynamics.py compares the two in windows.

    .venv-bench/bin/python eval/bench/drqv2_torch.py --bench --batch 256 --updates 5 --threads 2
    .venv-bench/bin/python eval/bench/drqv2_torch.py --frames bench-out/drqv2-dynamics/frames \
        --seed 1 --batch 64 --updates 300 --out bench-out/drqv2-dynamics/torch/s1.json
"""
import argparse
import json
import re
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


def weight_init(m):
    if isinstance(m, nn.Linear):
        nn.init.orthogonal_(m.weight.data)
        if hasattr(m.bias, "data"):
            m.bias.data.fill_(0.0)
    elif isinstance(m, nn.Conv2d):
        nn.init.orthogonal_(m.weight.data, nn.init.calculate_gain("relu"))
        if hasattr(m.bias, "data"):
            m.bias.data.fill_(0.0)


class RandomShiftsAug(nn.Module):
    def __init__(self, pad):
        super().__init__()
        self.pad = pad

    def forward(self, x):
        n, c, h, w = x.size()
        x = F.pad(x, (self.pad,) * 4, "replicate")
        eps = 1.0 / (h + 2 * self.pad)
        arange = torch.linspace(-1.0 + eps, 1.0 - eps, h + 2 * self.pad, device=x.device, dtype=x.dtype)[:h]
        arange = arange.unsqueeze(0).repeat(h, 1).unsqueeze(2)
        base_grid = torch.cat([arange, arange.transpose(1, 0)], dim=2).unsqueeze(0).repeat(n, 1, 1, 1)
        shift = torch.randint(0, 2 * self.pad + 1, size=(n, 1, 1, 2), device=x.device, dtype=x.dtype)
        shift *= 2.0 / (h + 2 * self.pad)
        return F.grid_sample(x, base_grid + shift, padding_mode="zeros", align_corners=False)


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.repr_dim = 32 * 35 * 35
        self.convnet = nn.Sequential(nn.Conv2d(9, 32, 3, stride=2), nn.ReLU(), nn.Conv2d(32, 32, 3, stride=1),
                                     nn.ReLU(), nn.Conv2d(32, 32, 3, stride=1), nn.ReLU(),
                                     nn.Conv2d(32, 32, 3, stride=1), nn.ReLU())
        self.apply(weight_init)

    def forward(self, obs):
        return self.convnet(obs / 255.0 - 0.5).view(obs.shape[0], -1)


class TruncatedNormal(torch.distributions.Normal):
    def __init__(self, loc, scale, low=-1.0, high=1.0, eps=1e-6):
        super().__init__(loc, scale, validate_args=False)
        self.low, self.high, self.eps = low, high, eps

    def _clamp(self, x):
        clamped_x = torch.clamp(x, self.low + self.eps, self.high - self.eps)
        return x - x.detach() + clamped_x.detach()

    def sample(self, clip=None, sample_shape=torch.Size()):
        shape = self._extended_shape(sample_shape)
        eps = torch.randn(shape, dtype=self.loc.dtype, device=self.loc.device) * self.scale
        if clip is not None:
            eps = torch.clamp(eps, -clip, clip)
        return self._clamp(self.loc + eps)


def trunk(repr_dim, feature_dim):
    return nn.Sequential(nn.Linear(repr_dim, feature_dim), nn.LayerNorm(feature_dim), nn.Tanh())


def mlp(i, hidden, o):
    return nn.Sequential(nn.Linear(i, hidden), nn.ReLU(inplace=True), nn.Linear(hidden, hidden),
                         nn.ReLU(inplace=True), nn.Linear(hidden, o))


class Actor(nn.Module):
    def __init__(self, repr_dim, action_dim, feature_dim=50, hidden_dim=1024):
        super().__init__()
        self.trunk = trunk(repr_dim, feature_dim)
        self.policy = mlp(feature_dim, hidden_dim, action_dim)
        self.apply(weight_init)

    def forward(self, obs, std):
        mu = torch.tanh(self.policy(self.trunk(obs)))
        return TruncatedNormal(mu, torch.ones_like(mu) * std)


class Critic(nn.Module):
    def __init__(self, repr_dim, action_dim, feature_dim=50, hidden_dim=1024):
        super().__init__()
        self.trunk = trunk(repr_dim, feature_dim)
        self.Q1 = mlp(feature_dim + action_dim, hidden_dim, 1)
        self.Q2 = mlp(feature_dim + action_dim, hidden_dim, 1)
        self.apply(weight_init)

    def forward(self, obs, action):
        h_action = torch.cat([self.trunk(obs), action], dim=-1)
        return self.Q1(h_action), self.Q2(h_action)


def schedule(schdl, step):
    init, final, duration = [float(g) for g in re.match(r"linear\((.+),(.+),(.+)\)", schdl).groups()]
    mix = np.clip(step / duration, 0.0, 1.0)
    return (1.0 - mix) * init + mix * final


class DrQV2Agent:
    """DrQV2Agent of drqv2.py without act(): lr 1e-4, tau 0.01, stddev_clip 0.3,
    'linear(1.0,0.1,100000)' (the easy tasks')."""

    def __init__(self, action_dim, lr=1e-4, stddev_schedule="linear(1.0,0.1,100000)", stddev_clip=0.3, tau=0.01):
        self.encoder = Encoder()
        self.actor = Actor(self.encoder.repr_dim, action_dim)
        self.critic = Critic(self.encoder.repr_dim, action_dim)
        self.critic_target = Critic(self.encoder.repr_dim, action_dim)
        self.critic_target.load_state_dict(self.critic.state_dict())
        self.encoder_opt = torch.optim.Adam(self.encoder.parameters(), lr=lr)
        self.actor_opt = torch.optim.Adam(self.actor.parameters(), lr=lr)
        self.critic_opt = torch.optim.Adam(self.critic.parameters(), lr=lr)
        self.aug = RandomShiftsAug(pad=4)
        self.stddev_schedule, self.stddev_clip, self.tau = stddev_schedule, stddev_clip, tau

    def q(self, critic, obs, action):
        return critic(obs, action)

    def update_critic(self, obs, action, reward, discount, next_obs, step):
        with torch.no_grad():
            dist = self.actor(next_obs, schedule(self.stddev_schedule, step))
            next_action = dist.sample(clip=self.stddev_clip)
            target_q1, target_q2 = self.q(self.critic_target, next_obs, next_action)
            target_q = reward + discount * torch.min(target_q1, target_q2)
        q1, q2 = self.q(self.critic, obs, action)
        critic_loss = F.mse_loss(q1, target_q) + F.mse_loss(q2, target_q)
        self.encoder_opt.zero_grad(set_to_none=True)
        self.critic_opt.zero_grad(set_to_none=True)
        critic_loss.backward()
        self.critic_opt.step()
        self.encoder_opt.step()
        return {"critic_loss": critic_loss.item(), "critic_q1": q1.mean().item(), "critic_q2": q2.mean().item(),
                "critic_target_q": target_q.mean().item()}

    def update_actor(self, obs, step):
        dist = self.actor(obs, schedule(self.stddev_schedule, step))
        action = dist.sample(clip=self.stddev_clip)
        q1, q2 = self.q(self.critic, obs, action)
        actor_loss = -torch.min(q1, q2).mean()
        self.actor_opt.zero_grad(set_to_none=True)
        actor_loss.backward()
        self.actor_opt.step()
        return {"actor_loss": actor_loss.item()}

    def update(self, obs, action, reward, discount, next_obs, step):
        obs = self.aug(obs.float())
        next_obs = self.aug(next_obs.float())
        obs = self.encoder(obs)
        with torch.no_grad():
            next_obs = self.encoder(next_obs)
        metrics = {"batch_reward": reward.mean().item()}
        metrics.update(self.update_critic(obs, action, reward, discount, next_obs, step))
        metrics.update(self.update_actor(obs.detach(), step))
        with torch.no_grad():
            for p, p_t in zip(self.critic.parameters(), self.critic_target.parameters()):
                p_t.data.copy_(self.tau * p.data + (1 - self.tau) * p_t.data)
        return metrics


class ActionEncoding(nn.Module):
    def __init__(self, action_dim, latent_action_dim, multistep):
        super().__init__()
        self.action_tokenizer = nn.Sequential(nn.Linear(action_dim, 64), nn.Tanh(), nn.Linear(64, latent_action_dim))
        self.action_seq_tokenizer = nn.Sequential(nn.Linear(latent_action_dim * multistep, latent_action_dim * multistep),
                                                  nn.LayerNorm(latent_action_dim * multistep), nn.Tanh())
        self.apply(weight_init)

    def forward(self, action, seq=False):
        if seq:
            b = action.shape[0]
            return self.action_seq_tokenizer(self.action_tokenizer(action).reshape(b, -1))
        return self.action_tokenizer(action)


class TACOHeads(nn.Module):
    """TACO's `TACO` module without the encoder and act_tok it also holds (they are stepped
    by taco_opt here too, listed beside it)."""

    def __init__(self, repr_dim, feature_dim, latent_a_dim, hidden_dim, multistep):
        super().__init__()
        self.proj_sa = nn.Sequential(nn.Linear(feature_dim + latent_a_dim * multistep, hidden_dim),
                                     nn.ReLU(inplace=True), nn.Linear(hidden_dim, feature_dim))
        self.proj_s = trunk(repr_dim, feature_dim)
        self.reward = nn.Sequential(nn.Linear(feature_dim + latent_a_dim * multistep, hidden_dim),
                                    nn.ReLU(inplace=True), nn.Linear(hidden_dim, 1))
        self.W = nn.Parameter(torch.rand(feature_dim, feature_dim))
        self.apply(weight_init)

    def compute_logits(self, z_a, z_pos):
        logits = torch.matmul(z_a, torch.matmul(self.W, z_pos.T))
        return logits - torch.max(logits, 1)[0][:, None]


class TACOAgent(DrQV2Agent):
    """TACOAgent of agents/taco.py: DrQ-v2's networks with the critic on latent actions, the
    encoder's Adam holding the action encoder too, and taco_opt after every update."""

    def __init__(self, action_dim, multistep=3, lr=1e-4, hidden_dim=1024, **kw):
        super().__init__(action_dim, lr=lr, **kw)
        latent = int(action_dim * 1.25) + 1
        self.act_tok = ActionEncoding(action_dim, latent, multistep)
        self.critic = Critic(self.encoder.repr_dim, latent)
        self.critic_target = Critic(self.encoder.repr_dim, latent)
        self.critic_target.load_state_dict(self.critic.state_dict())
        self.heads = TACOHeads(self.encoder.repr_dim, 50, latent, hidden_dim, multistep)
        self.encoder_opt = torch.optim.Adam(list(self.encoder.parameters()) + list(self.act_tok.parameters()), lr=lr)
        self.critic_opt = torch.optim.Adam(self.critic.parameters(), lr=lr)
        self.taco_opt = torch.optim.Adam(list(self.heads.parameters()) + list(self.encoder.parameters())
                                         + list(self.act_tok.parameters()), lr=lr)

    def q(self, critic, obs, action):
        return critic(obs, self.act_tok(action))

    def update_taco(self, obs, action_seq, r_next_obs, reward):
        z_a = self.heads.proj_s(self.encoder(self.aug(obs.float())))
        with torch.no_grad():
            z_pos = self.heads.proj_s(self.encoder(self.aug(obs.float())))
        curl_loss = F.cross_entropy(self.heads.compute_logits(z_a, z_pos), torch.arange(z_a.shape[0]))
        action_seq_en = self.act_tok(action_seq, seq=True)
        reward_loss = F.mse_loss(self.heads.reward(torch.cat([z_a, action_seq_en], dim=-1)), reward)
        with torch.no_grad():
            next_z = self.heads.proj_s(self.encoder(self.aug(r_next_obs.float())))
        curr_za = self.heads.proj_sa(torch.cat([z_a, action_seq_en], dim=-1))
        taco_loss = F.cross_entropy(self.heads.compute_logits(curr_za, next_z), torch.arange(z_a.shape[0]))
        self.taco_opt.zero_grad()
        (taco_loss + curl_loss + reward_loss).backward()
        self.taco_opt.step()
        return {"taco_loss": taco_loss.item(), "curl_loss": curl_loss.item(), "reward_loss": reward_loss.item()}

    def update_sequence(self, obs, action, action_seq, reward, discount, next_obs, r_next_obs, step):
        metrics = self.update(obs, action, reward, discount, next_obs, step)
        metrics.update(self.update_taco(obs, action_seq, r_next_obs, reward))
        return metrics


class Replay:
    """Fixed episodes (frames (N, 3, 84, 84) uint8, each episode's actions and rewards), sampled
    as DrQ-v2's replay samples: a uniform draw over the steps whose n-step window lies in the
    episode, observations of 3 stacked frames (the first repeated at the start)."""

    def __init__(self, frames_dir, nstep, discount, multistep=0):
        self.frames = np.load(f"{frames_dir}/frames.npy")
        with open(f"{frames_dir}/episodes.json") as f:
            self.episodes = json.load(f)
        self.nstep, self.discount, self.multistep = nstep, discount, multistep
        window = max(nstep, multistep)
        self.steps = [(e, t) for e, ep in enumerate(self.episodes) for t in range(len(ep["rewards"]) - window + 1)]
        self.action_dim = len(self.episodes[0]["actions"][0])

    def obs(self, ep, t):
        start = ep["start"]
        return np.concatenate([self.frames[start + max(t - k, 0)] for k in (2, 1, 0)])  # (9, 84, 84)

    def sample(self, batch, rng):
        """(obs, action, reward, discount, next_obs), and with multistep K also (action_seq,
        O_t+K)."""
        obs, action, reward, discount, next_obs, action_seq, r_next_obs = [], [], [], [], [], [], []
        for i in rng.integers(0, len(self.steps), size=batch):
            e, t = self.steps[i]
            ep = self.episodes[e]
            r, d = 0.0, 1.0
            for k in range(self.nstep):
                r += d * ep["rewards"][t + k]
                d *= self.discount
            obs.append(self.obs(ep, t))
            next_obs.append(self.obs(ep, t + self.nstep))
            action.append(ep["actions"][t])
            reward.append([r])
            discount.append([d])
            if self.multistep:
                action_seq.append(ep["actions"][t:t + self.multistep])
                r_next_obs.append(self.obs(ep, t + self.multistep))
        f32 = lambda x: torch.tensor(np.asarray(x), dtype=torch.float32)
        out = (torch.from_numpy(np.stack(obs)), f32(action), f32(reward), f32(discount), torch.from_numpy(np.stack(next_obs)))
        if self.multistep:
            out = out + (f32(action_seq), torch.from_numpy(np.stack(r_next_obs)))
        return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--bench", action="store_true", help="time updates on random pixels")
    p.add_argument("--frames", help="a dump_frames.py folder: updates on its episodes, metrics per update")
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--updates", type=int, default=5)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--nstep", type=int, default=3)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--first-step", type=int, default=2000, help="agent step of the first update (the seed steps)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--out", help="--frames: write the metrics here as one JSON file")
    p.add_argument("--device", default="cpu", help="cpu, or cuda on a GPU machine (timed updates end with a sync)")
    p.add_argument("--taco", action="store_true", help="TACO's agent and update instead of DrQ-v2's")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    torch.set_default_device(a.device)
    sync = torch.cuda.synchronize if a.device.startswith("cuda") else (lambda: None)
    b = a.batch
    if a.bench:
        action_dim = 6  # walker/cheetah
        agent = TACOAgent(action_dim) if a.taco else DrQV2Agent(action_dim)
        obs = torch.randint(0, 256, (b, 9, 84, 84), dtype=torch.uint8)
        next_obs = torch.randint(0, 256, (b, 9, 84, 84), dtype=torch.uint8)
        for i in range(a.warmup + a.updates):
            action = torch.rand(b, action_dim) * 2 - 1
            reward, discount = torch.rand(b, 1), torch.full((b, 1), 0.99 ** a.nstep)
            sync()
            start = time.perf_counter()
            if a.taco:
                action_seq = torch.rand(b, 3, action_dim) * 2 - 1
                agent.update_sequence(obs, action, action_seq, reward, discount, next_obs, next_obs,
                                      a.first_step + 2 * i)
            else:
                agent.update(obs, action, reward, discount, next_obs, a.first_step + 2 * i)
            sync()
            if i >= a.warmup:
                print(json.dumps({"impl": "torch", "batch": b, "update_seconds": time.perf_counter() - start,
                                  "device": a.device}))
        return
    replay = Replay(a.frames, a.nstep, 0.99, multistep=3 if a.taco else 0)
    agent = TACOAgent(replay.action_dim) if a.taco else DrQV2Agent(replay.action_dim)
    rng = np.random.default_rng(a.seed)
    rows = []
    for i in range(a.updates):
        batch = [x.to(a.device) for x in replay.sample(b, rng)]
        if a.taco:
            obs, action, reward, discount, next_obs, action_seq, r_next_obs = batch
            rows.append(agent.update_sequence(obs, action, action_seq, reward, discount, next_obs, r_next_obs,
                                              a.first_step + 2 * i))
        else:
            rows.append(agent.update(*batch, a.first_step + 2 * i))
    out = {"agent": "taco" if a.taco else "drqv2", "seed": a.seed, "batch": b, "nstep": a.nstep, "updates": a.updates,
           "torch": torch.__version__,
           "metrics": {k: [r[k] for r in rows] for k in rows[0]}}
    with open(a.out, "w") as f:
        json.dump(out, f)


if __name__ == "__main__":
    main()
