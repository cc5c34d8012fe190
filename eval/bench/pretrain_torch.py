"""One LFS pre-training update in PyTorch (CPU), the reference for `make bench-pretrain`.

The same work as lfs's `Trainer::update` for method `lfs` (pipelines/paper.toml): sample M real
pairs and M frame-mask candidates from in-memory episodes, random shift (replicate pad 4 +
integer crop) on every image, LNC with the online encoder+projector (no grad), the clustering
loss with 3 Sinkhorn iterations over 512 prototypes, Adam (lr 1e-4, no weight decay) over
encoder, projector, predictor (128-1024-128) and prototypes, EMA (0.05) of encoder+projector.
Orthogonal init as Proto-RL. One JSON line per timed update. `lfs_nets` and `lfs_update` are
the update's networks and step, reused by e2e_torch.py.

    .venv-bench/bin/python eval/bench/pretrain_torch.py --batch 32 --updates 3 --warmup 1 --threads 2
"""
import argparse
import copy
import json
import time
from types import SimpleNamespace

import torch
import torch.nn as nn
import torch.nn.functional as F


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.convnet = nn.Sequential(nn.Conv2d(9, 32, 3, stride=2), nn.ReLU(), nn.Conv2d(32, 32, 3), nn.ReLU(),
                                     nn.Conv2d(32, 32, 3), nn.ReLU(), nn.Conv2d(32, 32, 3), nn.ReLU())
        self.projector = nn.Linear(39200, 128)

    def forward(self, obs):
        h = self.convnet(obs / 255.0).flatten(1)
        return self.projector(h)


def weight_init(m):
    if isinstance(m, nn.Linear):
        nn.init.orthogonal_(m.weight.data)
        if m.bias is not None:
            m.bias.data.fill_(0.0)
    elif isinstance(m, nn.Conv2d):
        nn.init.orthogonal_(m.weight.data, nn.init.calculate_gain("relu"))
        m.bias.data.fill_(0.0)


def moving_squares(num_tasks=3, num_episodes=4, num_frames=60):
    """(task, episode, frame, 3, 84, 84) uint8, the same pattern as lfs::data::moving_squares."""
    y = torch.arange(84).view(84, 1)
    x = torch.arange(84).view(1, 84)
    out = torch.zeros(num_tasks, num_episodes, num_frames, 3, 84, 84, dtype=torch.uint8)
    for k in range(num_tasks):
        for e in range(num_episodes):
            speed = 2 + e + 3 * k
            for t in range(num_frames):
                x0 = (5 + t * speed) % 72
                y0 = (10 + t * (speed // 2 + 1)) % 72
                inside = (y >= y0) & (y < y0 + 12) & (x >= x0) & (x < x0 + 12)
                for c in range(3):
                    bg = (x + 2 * y + 17 * c + 5 * k) % 40
                    out[k, e, t, c] = torch.where(inside, torch.tensor(200 + 20 * c), bg).to(torch.uint8)
    return out


def sample(frames, task, n, synthetic, gen):
    """Stacks (n, 9, 84, 84) for prev and cur, oldest first."""
    _, ne, nf = frames.shape[:3]
    e = torch.randint(ne, (n,), generator=gen)
    lo = 4 if synthetic else 1
    t = torch.randint(lo, nf, (n,), generator=gen)
    if synthetic:
        prev_idx = torch.stack([t - 4, t - 3, t - 1], 1)
        cur_idx = torch.stack([t - 3, t - 1, t], 1)
    else:
        prev_idx = torch.stack([(t - 3).clamp(min=0), (t - 2).clamp(min=0), t - 1], 1)
        cur_idx = torch.stack([(t - 2).clamp(min=0), t - 1, t], 1)
    # frames[task]: (ne, nf, 3, 84, 84); indexed by (n, 1) episodes and (n, 3) frames ->
    # (n, 3, 3, 84, 84) -> (n, 9, 84, 84). Only the 3n frames are copied, not n whole episodes.
    gather = lambda idx: frames[task][e[:, None], idx].reshape(n, 9, 84, 84)
    return gather(prev_idx), gather(cur_idx)


def random_shift(x, gen, pad=4):
    n = x.shape[0]
    padded = F.pad(x.float(), (pad, pad, pad, pad), mode="replicate")
    off = torch.randint(0, 2 * pad + 1, (n, 2), generator=gen)
    return torch.stack([padded[i, :, off[i, 0]:off[i, 0] + 84, off[i, 1]:off[i, 1] + 84] for i in range(n)])


def sinkhorn(scores, T=0.1, iters=3):
    Q = scores / T
    Q = Q - Q.max()
    Q = torch.exp(Q).T
    Q /= Q.sum()
    r = torch.ones(Q.shape[0]) / Q.shape[0]
    c = torch.ones(Q.shape[1]) / Q.shape[1]
    for _ in range(iters):
        Q *= (r / Q.sum(dim=1)).unsqueeze(1)
        Q *= (c / Q.sum(dim=0)).unsqueeze(0)
    return (Q / Q.sum(dim=0, keepdim=True)).T


def lnc(enc, real_prev, syn_prev, k=1, c=0.6, r=0.1):
    with torch.no_grad():
        hs, hr = enc(syn_prev), enc(real_prev)
    d = torch.topk(torch.norm(hs[:, None] - hr[None], dim=2), k, dim=1, largest=False)[0][:, -1]
    di = torch.topk(torch.norm(hr[:, None] - hr[None], dim=2), k + 1, dim=1, largest=False)[0][:, -1].mean()
    return ((d > di * (c - r / 2)) & (d < di * (c + r / 2))).nonzero().flatten()


def lfs_nets():
    """Online encoder+projector, its EMA target, predictor, prototypes and their Adam, initialised
    from the global torch seed (in this order)."""
    enc = Encoder()
    enc.apply(weight_init)
    target = copy.deepcopy(enc)
    predictor = nn.Sequential(nn.Linear(128, 1024), nn.ReLU(), nn.Linear(1024, 128))
    predictor.apply(weight_init)
    protos = nn.Linear(128, 512, bias=False)
    weight_init(protos)
    params = list(enc.parameters()) + list(predictor.parameters()) + list(protos.parameters())
    opt = torch.optim.Adam(params, lr=1e-4, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0)
    return SimpleNamespace(enc=enc, target=target, predictor=predictor, protos=protos, opt=opt)


def lfs_update(nets, rp, rc, sp, sc, gen):
    """One LFS update on M real pairs (rp -> rc) and M frame-mask candidates (sp -> sc), each
    (M, 9, 84, 84) uint8 and unshifted: shift, LNC, clustering loss, Adam, EMA.
    Returns (loss, number of synthetic pairs kept)."""
    M = rp.shape[0]
    rp, rc, sp, sc = (random_shift(x, gen) for x in (rp, rc, sp, sc))
    chosen = lnc(nets.enc, rp, sp)
    n = chosen.numel()
    keep = torch.randperm(M, generator=gen)[: M - n]
    obs = torch.cat([sp[chosen], rp[keep]])  # (M, 9, 84, 84)
    next_obs = torch.cat([sc[chosen], rc[keep]])
    protos = nets.protos
    with torch.no_grad():
        protos.weight.data.copy_(F.normalize(protos.weight.data, dim=1))
    z = F.normalize(nets.predictor(nets.enc(obs)), dim=1)
    log_p = F.log_softmax(protos(z) / 0.1, dim=1)
    with torch.no_grad():
        t = F.normalize(nets.target(next_obs), dim=1)
        q = sinkhorn(protos(t))
    loss = -(q * log_p).sum(1).mean()
    nets.opt.zero_grad(set_to_none=True)
    loss.backward()
    nets.opt.step()
    with torch.no_grad():
        for pt, po in zip(nets.target.parameters(), nets.enc.parameters()):
            pt.data.lerp_(po.data, 0.05)
    return loss, n


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--updates", type=int, default=3)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--threads", type=int, default=0, help="torch intra-op threads (0: torch default)")
    p.add_argument("--device", default="cpu",
                   help="torch device: cpu, or cuda on a GPU machine (each timed update ends with a GPU sync)")
    a = p.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    torch.set_default_device(a.device)  # networks, data and noise all live there
    gen = torch.Generator(device=a.device).manual_seed(1)
    sync = torch.cuda.synchronize if a.device.startswith("cuda") else (lambda: None)
    nets = lfs_nets()
    frames = moving_squares()
    M = a.batch
    for i in range(a.warmup + a.updates):
        sync()
        start = time.perf_counter()
        task = i % frames.shape[0]
        rp, rc = sample(frames, task, M, False, gen)
        sp, sc = sample(frames, task, M, True, gen)
        loss, n = lfs_update(nets, rp, rc, sp, sc, gen)
        sync()
        secs = time.perf_counter() - start
        if i >= a.warmup:
            print(json.dumps({"impl": "torch", "batch": M, "update_seconds": round(secs, 6), "loss": loss.item(),
                              "num_synthetic": n, "threads": torch.get_num_threads(), "device": a.device}), flush=True)


if __name__ == "__main__":
    main()
