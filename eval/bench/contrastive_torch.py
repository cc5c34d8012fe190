"""ATC and CURL pre-training in PyTorch: the reference curves of issue 14's dynamics check.

A transcription of each upstream training step, run at lfs's settings (pipelines/tiny.toml
with run.batch_size = 64) so the curves are comparable with `lfs pretrain`:

ATC    astooke/rlpyt @ f04f23db1eb7b5915d88401fca67869968a07a37
       rlpyt/ul/algos/ul_for_rl/augmented_temporal_contrast.py (`atc_loss`, `optimize`)
       rlpyt/ul/models/ul/atc_models.py (`ContrastModel.forward`)
       anchor O_{t} through the online encoder, c = z + MLP(z) (128-512-128, ReLU), pred = W(c)
       (Linear, no bias: pred = c·Wᵀ), logits = pred·kᵀ minus the row max, cross-entropy with
       labels on the diagonal; the positive O_{t+1} through the EMA target under no_grad;
       after the optimizer step the target follows θ' ← (1 − τ)θ' + τθ, τ = 0.01, every update.
CURL   MishaLaskin/curl @ 8416d6e3869e38ca0e46fcbc54a2f784dc09d7fc
       curl_sac.py (`CURL.compute_logits`, `CurlSacAgent.update_cpc`)
       query and key: two independent augmentations of the same O_t; z_a online, z_pos through
       the EMA key encoder under no_grad; logits = z_a·(W·z_posᵀ) minus the row max,
       cross-entropy with labels on the diagonal; EMA τ = 0.05 (train.py's encoder_tau).

At lfs's settings rather than upstream's (each is an lfs config field, docs/design.md §5):
encoder = lfs's conv net (9→32 stride 2, three 32→32, ReLU, no padding) + Linear(39200→128)
projector, orthogonal init (gain √2 convs, 1 linear layers, zero biases) for every weight
including the ATC head and both W; Adam lr 1e-4, betas 0.9/0.999, eps 1e-8, no weight decay, no
gradient clipping (rlpyt's ATC clips at 10: `--clip-grad-norm 10`); random shift with replicate
padding 4 on every image (CURL: random crop 100→84 upstream); CURL's LayerNorm after the
projection is off (`--curl-layer-norm` puts it back); CURL's EMA every update (upstream every
second update, with the critic's); one Adam over everything (upstream CURL steps its encoder
with two Adams). Real pairs (O_{t-1}, O_t) are drawn uniformly with replacement from all
episodes (mixed batches), O_t = [F_{t-2}, F_{t-1}, F_t] with the first frame repeated at an
episode start, as lfs's sampler.

Logs per update: loss, the mean pairwise cosine and mean norm of the target (positive / key)
projections, the gradient norm. Writes one JSON with the per-update lists.

    TORCH_PYTHON eval/bench/contrastive_torch.py --frames bench-out/dynamics/frames \
        --method atc --seed 1 --updates 300 --batch 64 --out atc-s1.json
"""
import argparse
import copy
import json
import os
import platform
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pretrain_torch import weight_init  # noqa: E402  (orthogonal init, as lfs's nn::init)


class Encoder(nn.Module):
    """lfs's f and g: the conv net then the projector (docs/design.md §4)."""

    def __init__(self, latent=128, layer_norm=False):
        super().__init__()
        self.convnet = nn.Sequential(nn.Conv2d(9, 32, 3, stride=2), nn.ReLU(), nn.Conv2d(32, 32, 3), nn.ReLU(),
                                     nn.Conv2d(32, 32, 3), nn.ReLU(), nn.Conv2d(32, 32, 3), nn.ReLU())
        self.projector = nn.Linear(39200, latent)
        # CURL's encoder ends in fc → LayerNorm (output_logits=True: no tanh).
        self.ln = nn.LayerNorm(latent) if layer_norm else None

    def forward(self, obs):
        z = self.projector(self.convnet(obs / 255.0).flatten(1))
        return self.ln(z) if self.ln is not None else z


class AtcContrast(nn.Module):
    """rlpyt's ContrastModel: residual anchor MLP, then W (Linear, no bias)."""

    def __init__(self, latent=128, hidden=512):
        super().__init__()
        self.anchor_mlp = nn.Sequential(nn.Linear(latent, hidden), nn.ReLU(), nn.Linear(hidden, latent))
        self.W = nn.Linear(latent, latent, bias=False)

    def forward(self, anchor, positive):
        anchor = anchor + self.anchor_mlp(anchor)
        logits = self.W(anchor) @ positive.T  # (b, b)
        return logits - logits.max(dim=1, keepdim=True)[0]


class CurlContrast(nn.Module):
    """CURL's W and compute_logits."""

    def __init__(self, latent=128):
        super().__init__()
        self.W = nn.Parameter(torch.empty(latent, latent))
        nn.init.orthogonal_(self.W.data)

    def forward(self, z_a, z_pos):
        logits = z_a @ (self.W @ z_pos.T)  # (b, b)
        return logits - logits.max(dim=1)[0][:, None]


def random_shift(imgs, pad, gen):
    """Replicate-pad `pad` pixels, crop back at an integer offset in 0..=2·pad per image."""
    n, _, h, w = imgs.shape
    padded = F.pad(imgs, (pad, pad, pad, pad), mode="replicate")
    off = torch.randint(0, 2 * pad + 1, (n, 2), generator=gen)
    return torch.stack([padded[i, :, dy:dy + h, dx:dx + w] for i, (dy, dx) in enumerate(off.tolist())])


def spread(t):
    """Mean pairwise cosine (i ≠ j) and mean norm of the rows of t (b, d): lfs's collapse.rs."""
    t = t.double()
    norms = t.norm(dim=1)
    u = t / norms[:, None]
    b = t.shape[0]
    s = u.sum(0)
    return float((s @ s - b) / (b * (b - 1))), float(norms.mean())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--frames", required=True, help="eval/bench/dump_frames.py output")
    ap.add_argument("--method", choices=["atc", "curl"], required=True)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--updates", type=int, default=300)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--lr", type=float, default=1e-4)
    ap.add_argument("--pad", type=int, default=4)
    ap.add_argument("--clip-grad-norm", type=float, default=None)
    ap.add_argument("--curl-layer-norm", action="store_true")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    gen = torch.Generator().manual_seed(args.seed)

    frames = torch.from_numpy(np.load(f"{args.frames}/frames.npy"))  # (N, 3, 84, 84) uint8
    with open(f"{args.frames}/episodes.json") as f:
        episodes = json.load(f)
    # Real pairs: (start, t) for t >= 1 in every episode (mixed batches: one uniform pool).
    pairs = torch.tensor([(ep["start"], t) for ep in episodes for t in range(1, ep["length"])])

    def obs(start, t):  # (9, 84, 84): frames t-2, t-1, t, clamped at the episode start
        return torch.cat([frames[start + max(t - k, 0)] for k in (2, 1, 0)])

    tau = {"atc": 0.01, "curl": 0.05}[args.method]
    enc = Encoder(layer_norm=args.method == "curl" and args.curl_layer_norm)
    enc.apply(weight_init)
    target = copy.deepcopy(enc)
    for p in target.parameters():
        p.requires_grad_(False)
    head = AtcContrast() if args.method == "atc" else CurlContrast()
    if args.method == "atc":
        head.apply(weight_init)
    params = list(enc.parameters()) + list(head.parameters())
    opt = torch.optim.Adam(params, lr=args.lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0)

    log = {"loss": [], "target_cosine": [], "target_norm": [], "grad_norm": [], "accuracy": []}
    start_time = time.time()
    for step in range(args.updates):
        idx = pairs[torch.randint(0, len(pairs), (args.batch,), generator=gen)]
        cur = torch.stack([obs(s, t) for s, t in idx.tolist()]).float()  # (b, 9, 84, 84)
        if args.method == "atc":
            prev = torch.stack([obs(s, t - 1) for s, t in idx.tolist()]).float()
            anchor, positive = random_shift(prev, args.pad, gen), random_shift(cur, args.pad, gen)
        else:
            anchor, positive = random_shift(cur, args.pad, gen), random_shift(cur, args.pad, gen)
        with torch.no_grad():
            k = target(positive)  # (b, 128)
        z = enc(anchor)  # (b, 128)
        logits = head(z, k)  # (b, b)
        labels = torch.arange(args.batch)
        loss = F.cross_entropy(logits, labels)
        opt.zero_grad()
        loss.backward()
        grad_norm = torch.norm(torch.stack([p.grad.norm() for p in params if p.grad is not None]))
        if args.clip_grad_norm is not None:
            torch.nn.utils.clip_grad_norm_(params, args.clip_grad_norm)
        opt.step()
        with torch.no_grad():
            for pt, po in zip(target.parameters(), enc.parameters()):
                pt.mul_(1.0 - tau).add_(po, alpha=tau)
        cos, norm = spread(k)
        log["loss"].append(loss.item())
        log["target_cosine"].append(cos)
        log["target_norm"].append(norm)
        log["grad_norm"].append(float(grad_norm))
        log["accuracy"].append(float((logits.argmax(1) == labels).float().mean()))
        if step % 50 == 0:
            print(f"step {step + 1} loss {loss.item():.4f} cos {cos:.4f} grad {float(grad_norm):.3f}", flush=True)
    out = {
        "method": args.method,
        "seed": args.seed,
        "updates": args.updates,
        "batch": args.batch,
        "lr": args.lr,
        "pad": args.pad,
        "clip_grad_norm": args.clip_grad_norm,
        "curl_layer_norm": args.curl_layer_norm,
        "versions": {"python": platform.python_version(), "torch": torch.__version__, "numpy": np.__version__},
        "seconds": time.time() - start_time,
        **log,
    }
    with open(args.out, "w") as f:
        json.dump(out, f)


if __name__ == "__main__":
    main()
