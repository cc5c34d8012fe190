"""Strong PyTorch anchors for lfs on a GPU (issue 52): the twins as a PyTorch user would write
them for a GPU, in one process, one JSON line per timed update and one summary line per
(suite, precision).

The same algorithms, networks, initialisation and random draws as the old twins
(pretrain_torch.py, sac_torch.py, drqv2_torch.py; strong_check.py checks on the CPU that the
losses match theirs), written for the device:
- Random shift: one gather kernel per batch, `out[i, :, y, x] = in[i, :, clamp(y + dy - 4),
  clamp(x + dx - 4)]` on the uint8 pixels (lfs's semantics, src/data/random_shift.rs, docs/design.md
  §1: replicate pad 4, integer offsets dy, dx uniform in 0..=8, independent per image). The offsets
  are drawn with the same calls as the old twins, so the same seed gives the same shifts. The old
  LFS/SAC twins slice per image in a Python loop whose bounds are 0-d device tensors (about 8,000
  device->host syncs per LFS update at B=512 on a GPU).
- No host sync inside an update: LNC's selection keeps a fixed shape (a mask and index
  arithmetic instead of `nonzero()`/`numel()`), metrics stay on the device until every timed
  update has finished (`.item()` only at the end), `torch.cuda.synchronize()` before and after
  each timed update (the only syncs).
- `torch.backends.cudnn.benchmark = True`; Adam `fused=True`; target EMAs with one
  `torch._foreach_lerp_`.
- Precision stated: `--precision fp32` (TF32 off for matmuls and cuDNN convolutions; note that
  PyTorch's default allows TF32 in cuDNN convolutions) or `tf32` (on for both). Every line says which.
- Optional: `--compile` (torch.compile of the networks' forwards; off unless asked, every line
  says which), `--graph` (the SAC update on cached features captured as one CUDA graph with
  capturable fused Adam: a separate, labelled arm, `impl: torch-strong-graph`).

Suites (`--suite`, comma separated):
- lfs: the LFS pre-training update (pretrain_torch.py's `lfs_update`) at `--batch-lfs` (512).
- sac-features: the full SAC update on cached features (sac_torch.py --features) at each of
  `--batch-sac` (128,512).
- sac-pixels: the frozen-encoder SAC update from pixels (shift, encoder under no_grad, the update;
  sac_torch.py without --features) at `--batch-pixels` (512).
- drqv2: DrQ-v2's update (drqv2_torch.py --bench: shift, encoder with the critic's gradient,
  critic, actor, target) at `--batch-drqv2` (256).

    python3 eval/bench/strong_torch.py --device cuda --suite lfs,sac-features --precision fp32,tf32
    python3 eval/bench/strong_torch.py --device cpu --suite lfs --batch-lfs 16 --updates 2 --warmup 1
"""
import argparse
import json
import math
import statistics
import sys
import time

import torch
import torch.nn.functional as F

import drqv2_torch as D
import pretrain_torch as P
import sac_torch as S

IMPL = "torch-strong"


# ---- setup ------------------------------------------------------------------------------------
def configure(precision, benchmark=True):
    """TF32 on or off for both matmuls and cuDNN convolutions; cuDNN autotuning on."""
    if precision not in ("fp32", "tf32"):
        raise SystemExit(f"--precision: fp32 or tf32, not {precision}")
    tf32 = precision == "tf32"
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    torch.backends.cudnn.benchmark = benchmark


def environment(device):
    """What the lines were measured with (printed once)."""
    env = {"torch": torch.__version__, "device": device, "threads": torch.get_num_threads()}
    if device.startswith("cuda"):
        env.update(gpu=torch.cuda.get_device_name(), cuda=torch.version.cuda,
                   cudnn=torch.backends.cudnn.version())
    return env


def settings(precision, compiled):
    return {"precision": precision, "matmul_tf32": torch.backends.cuda.matmul.allow_tf32,
            "cudnn_tf32": torch.backends.cudnn.allow_tf32, "cudnn_benchmark": torch.backends.cudnn.benchmark,
            "compile": compiled}


def adam(params, fused, capturable=False):
    """The twins' Adam (lr 1e-4, betas 0.9/0.999, eps 1e-8, no weight decay), fused kernels."""
    return torch.optim.Adam(params, lr=1e-4, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0,
                            fused=fused or None, capturable=capturable)


def fused_ok(device):
    # fused Adam: CUDA always; the CPU from torch 2.4 on
    return device.startswith("cuda") or tuple(int(x) for x in torch.__version__.split(".")[:2]) >= (2, 4)


class Marks:
    """Part boundaries inside an update without host syncs: CUDA events on a GPU (read after the
    update's closing sync), host clocks on the CPU (whose ops are synchronous)."""

    def __init__(self, device, names):
        self.cuda, self.names = device.startswith("cuda"), names
        self.points = []

    def mark(self):
        if self.cuda:
            e = torch.cuda.Event(enable_timing=True)
            e.record()
            self.points.append(e)
        else:
            self.points.append(time.perf_counter())

    def parts(self):
        """Seconds between consecutive marks, by name (after the closing sync)."""
        p = self.points
        if self.cuda:
            secs = [p[i].elapsed_time(p[i + 1]) / 1e3 for i in range(len(p) - 1)]
        else:
            secs = [p[i + 1] - p[i] for i in range(len(p) - 1)]
        self.points = []
        return {n: round(s, 6) for n, s in zip(self.names, secs)}


# ---- the shift --------------------------------------------------------------------------------
def draw_offsets(n, gen=None, pad=4):
    """(n, 2) int64 crop offsets (dy, dx) in 0..=2 pad: the old twins' `random_shift` draw."""
    return torch.randint(0, 2 * pad + 1, (n, 2), generator=gen)


def shift_gather(x, off, pad=4):
    """Random shift of a batch x (n, c, h, w), any dtype (uint8 here), by offsets off (n, 2) =
    (dy, dx): replicate pad `pad` + integer crop, as one gather kernel:
    out[i, :, y, x] = x[i, :, clamp(y + dy - pad), clamp(x + dx - pad)]."""
    n, c, h, w = x.shape
    rows = (torch.arange(h, device=x.device)[None] + off[:, :1] - pad).clamp_(0, h - 1)  # (n, h)
    cols = (torch.arange(w, device=x.device)[None] + off[:, 1:] - pad).clamp_(0, w - 1)  # (n, w)
    idx = (rows[:, :, None] * w + cols[:, None, :]).view(n, 1, h * w).expand(n, c, h * w)
    return x.reshape(n, c, h * w).gather(2, idx).view(n, c, h, w)


# ---- LFS --------------------------------------------------------------------------------------
LFS_PARTS = ("shift", "lnc", "select", "forward", "backward", "optimizer")


def lfs_strong_nets(device, compile_mode):
    """pretrain_torch.py's `lfs_nets` (same init from the global seed) with a fused Adam; the
    forwards optionally compiled."""
    nets = P.lfs_nets()
    params = list(nets.enc.parameters()) + list(nets.predictor.parameters()) + list(nets.protos.parameters())
    nets.opt = adam(params, fused_ok(device))
    nets.ema = (list(nets.target.parameters()), list(nets.enc.parameters()))
    nets.f_enc, nets.f_target, nets.f_pred = nets.enc, nets.target, nets.predictor
    if compile_mode:
        nets.f_enc, nets.f_target, nets.f_pred = (torch.compile(m, mode=compile_mode)
                                                  for m in (nets.enc, nets.target, nets.predictor))
    return nets


def lnc_mask(f_enc, prev2, M, k=1, c=0.6, r=0.1):
    """pretrain_torch.py's `lnc` on prev2 = [real (M), synthetic (M)] in one forward, returning
    the (M,) mask of the synthetic candidates kept instead of their indices (no sync)."""
    with torch.no_grad():
        h = f_enc(prev2)
    hr, hs = h[:M], h[M:]
    d = torch.topk(torch.norm(hs[:, None] - hr[None], dim=2), k, dim=1, largest=False)[0][:, -1]
    di = torch.topk(torch.norm(hr[:, None] - hr[None], dim=2), k + 1, dim=1, largest=False)[0][:, -1].mean()
    return (d > di * (c - r / 2)) & (d < di * (c + r / 2))


def select_rows(sel, perm, M):
    """Row j of the old twin's batch `cat([syn[chosen], real[perm[:M - n]]])`, as an index into
    [real, syn] (2M rows), with a fixed shape: j < n -> M + (j-th chosen, ascending), else
    perm[j - n]. Returns (index (M,), n as a 0-d device tensor)."""
    n = sel.sum()
    j = torch.arange(M, device=sel.device)
    order = torch.argsort((~sel).to(torch.int32), stable=True)  # the chosen first, ascending
    return torch.where(j < n, M + order, perm[(j - n).clamp(min=0)]), n


def lfs_update_strong(nets, rp, rc, sp, sc, gen, marks=None):
    """pretrain_torch.py's `lfs_update` (same draws in the same order: four shifts, then the
    permutation), without host syncs. Returns (loss, n) as device tensors."""
    mark = marks.mark if marks else (lambda: None)
    M = rp.shape[0]
    offs = [draw_offsets(M, gen) for _ in range(4)]  # rp, rc, sp, sc, as the old twin draws them
    # one batch [rp, sp, rc, sc], shifted by one gather: uint8 all along (the encoder divides)
    x = shift_gather(torch.cat([rp, sp, rc, sc]), torch.cat([offs[0], offs[2], offs[1], offs[3]]))
    mark()
    sel = lnc_mask(nets.f_enc, x[:2 * M], M)
    mark()
    perm = torch.randperm(M, generator=gen, device=rp.device)
    idx, n = select_rows(sel, perm, M)
    obs, next_obs = x.index_select(0, idx), x.index_select(0, idx + 2 * M)
    mark()
    protos = nets.protos
    with torch.no_grad():
        protos.weight.copy_(F.normalize(protos.weight, dim=1))
    z = F.normalize(nets.f_pred(nets.f_enc(obs)), dim=1)
    log_p = F.log_softmax(protos(z) / 0.1, dim=1)
    with torch.no_grad():
        t = F.normalize(nets.f_target(next_obs), dim=1)
        q = P.sinkhorn(protos(t))
    loss = -(q * log_p).sum(1).mean()
    mark()
    nets.opt.zero_grad(set_to_none=True)
    loss.backward()
    mark()
    nets.opt.step()
    with torch.no_grad():
        torch._foreach_lerp_(nets.ema[0], nets.ema[1], 0.05)
    mark()
    return loss, n


def run_lfs(a, precision, out):
    M = a.batch_lfs
    torch.manual_seed(1)
    gen = torch.Generator(device=a.device).manual_seed(1)
    nets = lfs_strong_nets(a.device, a.compile)
    with torch.device("cpu"):
        frames = P.moving_squares().to(a.device)  # built on the host (a Python loop), kept on the device
    marks = Marks(a.device, ("sample",) + LFS_PARTS) if a.parts else None
    res = []
    for i in range(a.warmup + a.updates):
        sync(a.device)
        start = time.perf_counter()
        if marks:
            marks.mark()
        task = i % frames.shape[0]
        rp, rc = P.sample(frames, task, M, False, gen)
        sp, sc = P.sample(frames, task, M, True, gen)
        if marks:
            marks.mark()
        loss, n = lfs_update_strong(nets, rp, rc, sp, sc, gen, marks)
        sync(a.device)
        secs = time.perf_counter() - start
        parts = marks.parts() if marks else None
        if i >= a.warmup:
            res.append((secs, loss, n, parts))
    rows = [dict(update_seconds=round(s, 6), loss=loss.item(), num_synthetic=int(n.item()),
                 **({"parts": p} if p else {})) for s, loss, n, p in res]
    report(out, "lfs", M, precision, a, rows)


# ---- SAC ---------------------------------------------------------------------------------------
def sac_strong_nets(device, capturable=False):
    """sac_torch.py's `sac_nets` (same init) with fused Adams."""
    agent = S.sac_nets()
    f = fused_ok(device)
    agent.actor_opt = adam(agent.actor.parameters(), f, capturable)
    agent.critic_opt = adam(agent.critic.parameters(), f, capturable)
    agent.alpha_opt = adam([agent.log_alpha], f, capturable)
    agent.ema = (list(agent.critic_target.parameters()), list(agent.critic.parameters()))
    return agent


def sac_update_strong(agent, h, next_h, action, reward):
    """sac_torch.py's `sac_update` (every part, every update), the target's EMA as one foreach
    lerp. Returns the three losses as device tensors."""
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
    new_action, log_prob = actor(h)
    aq1, aq2 = critic(h, new_action)
    actor_loss = (alpha * log_prob - torch.min(aq1, aq2)).mean()
    agent.actor_opt.zero_grad(set_to_none=True)
    actor_loss.backward()
    agent.actor_opt.step()
    alpha_loss = (log_alpha.exp() * (-log_prob - (-S.ACTION_DIM)).detach()).mean()
    agent.alpha_opt.zero_grad(set_to_none=True)
    alpha_loss.backward()
    agent.alpha_opt.step()
    with torch.no_grad():
        torch._foreach_lerp_(agent.ema[0], agent.ema[1], 0.01)
    return critic_loss, actor_loss, alpha_loss


def encode_shifted_strong(convnet, obs, next_obs, gen):
    """sac_torch.py's `encode_shifted` of obs, then of next_obs (same draws), as one shift and
    one forward of both under no_grad."""
    b = obs.shape[0]
    off = torch.cat([draw_offsets(b, gen), draw_offsets(b, gen)])
    with torch.no_grad():
        h = convnet(shift_gather(torch.cat([obs, next_obs]), off) / 255.0).flatten(1)
    return h[:b], h[b:]


def sac_setup(a, b):
    """sac_torch.py main's draws, in its order: seed 0, encoder, agent, obs, next_obs, features."""
    torch.manual_seed(0)
    gen = torch.Generator(device=a.device).manual_seed(0)
    encoder = P.Encoder()
    encoder.apply(P.weight_init)
    agent = sac_strong_nets(a.device, capturable=a.graph_arm)
    obs = torch.randint(0, 256, (b, 9, 84, 84), generator=gen, dtype=torch.uint8)
    next_obs = torch.randint(0, 256, (b, 9, 84, 84), generator=gen, dtype=torch.uint8)
    features = torch.rand(b, S.REPR_DIM, generator=gen) * 0.5
    next_features = torch.rand(b, S.REPR_DIM, generator=gen) * 0.5
    convnet = torch.compile(encoder.convnet, mode=a.compile) if a.compile else encoder.convnet
    return gen, convnet, agent, obs, next_obs, features, next_features


def run_sac(a, precision, out, pixels):
    suite = "sac-pixels" if pixels else "sac-features"
    for b in (a.batch_pixels if pixels else a.batch_sac):
        a.graph_arm = False
        gen, convnet, agent, obs, next_obs, features, next_features = sac_setup(a, b)
        res = []
        for i in range(a.warmup + a.updates):
            sync(a.device)
            start = time.perf_counter()
            action = torch.rand(b, S.ACTION_DIM) * 2 - 1
            reward = torch.rand(b, 1)
            if pixels:
                h, next_h = encode_shifted_strong(convnet, obs, next_obs, gen)
            else:
                h, next_h = features, next_features
            losses = sac_update_strong(agent, h, next_h, action, reward)
            sync(a.device)
            if i >= a.warmup:
                res.append((time.perf_counter() - start, losses))
        rows = [dict(update_seconds=round(s, 6), critic_loss=c.item(), actor_loss=ac.item(), alpha_loss=al.item())
                for s, (c, ac, al) in res]
        report(out, suite, b, precision, a, rows)
        if a.graph and not pixels and a.device.startswith("cuda"):
            run_sac_graph(a, precision, out, b)


def run_sac_graph(a, precision, out, b):
    """The same update on cached features, captured once as a CUDA graph (capturable fused Adams;
    action and reward drawn inside the graph) and replayed: the launch-free floor."""
    try:
        a.graph_arm = True
        _, _, agent, _, _, features, next_features = sac_setup(a, b)

        def step():
            action = torch.rand(b, S.ACTION_DIM) * 2 - 1
            reward = torch.rand(b, 1)
            return sac_update_strong(agent, features, next_features, action, reward)

        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                step()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            losses = step()
        res = []
        for i in range(a.warmup + a.updates):
            sync(a.device)
            start = time.perf_counter()
            graph.replay()
            sync(a.device)
            if i >= a.warmup:
                res.append((time.perf_counter() - start, [x.item() for x in losses]))
        rows = [dict(update_seconds=round(s, 6), critic_loss=c, actor_loss=ac, alpha_loss=al) for s, (c, ac, al) in res]
        report(out, "sac-features", b, precision, a, rows, impl=IMPL + "-graph")
    except Exception as e:  # reported, not fatal: the eager arms are the anchor
        out({"impl": IMPL + "-graph", "suite": "sac-features", "batch": b, "precision": precision,
             "error": f"{type(e).__name__}: {e}"})
    finally:
        a.graph_arm = False


# ---- DrQ-v2 ------------------------------------------------------------------------------------
class StrongDrQV2Agent(D.DrQV2Agent):
    """drqv2_torch.py's DrQV2Agent (same init), fused Adams, the shift as one gather with
    RandomShiftsAug's own draw, metrics left on the device, the target's EMA as one foreach lerp."""

    def __init__(self, action_dim, device, compile_mode=None):
        super().__init__(action_dim)
        f = fused_ok(device)
        self.encoder_opt = adam(self.encoder.parameters(), f)
        self.actor_opt = adam(self.actor.parameters(), f)
        self.critic_opt = adam(self.critic.parameters(), f)
        self.ema = (list(self.critic_target.parameters()), list(self.critic.parameters()))
        self.f_encoder = torch.compile(self.encoder, mode=compile_mode) if compile_mode else self.encoder

    @staticmethod
    def aug_offsets(x, pad=4):
        """RandomShiftsAug's draw, (n, 1, 1, 2) as (x shift, y shift) in x's float dtype, as
        (dy, dx) int64: grid_sample at whole-pixel shifts is an integer crop (docs/design.md §13)."""
        n = x.shape[0]
        shift = torch.randint(0, 2 * pad + 1, size=(n, 1, 1, 2), device=x.device, dtype=torch.float32)
        return shift[:, 0, 0, [1, 0]].long()

    def update(self, obs, action, reward, discount, next_obs, step):
        off = self.aug_offsets(obs)
        next_off = self.aug_offsets(next_obs)
        obs = self.f_encoder(shift_gather(obs, off))
        with torch.no_grad():
            next_obs = self.f_encoder(shift_gather(next_obs, next_off))
        metrics = {"batch_reward": reward.mean()}
        with torch.no_grad():
            dist = self.actor(next_obs, D.schedule(self.stddev_schedule, step))
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
        metrics.update(critic_loss=critic_loss.detach(), critic_q1=q1.mean().detach(), critic_q2=q2.mean().detach(),
                       critic_target_q=target_q.mean())
        obs = obs.detach()
        dist = self.actor(obs, D.schedule(self.stddev_schedule, step))
        action = dist.sample(clip=self.stddev_clip)
        q1, q2 = self.q(self.critic, obs, action)
        actor_loss = -torch.min(q1, q2).mean()
        self.actor_opt.zero_grad(set_to_none=True)
        actor_loss.backward()
        self.actor_opt.step()
        metrics["actor_loss"] = actor_loss.detach()
        with torch.no_grad():
            torch._foreach_lerp_(self.ema[0], self.ema[1], self.tau)
        return metrics


def run_drqv2(a, precision, out):
    """drqv2_torch.py --bench's draws and steps: seed, agent, obs, next_obs; per update action,
    reward, discount, then the update at agent step first_step + 2 i."""
    b = a.batch_drqv2
    torch.manual_seed(1)
    agent = StrongDrQV2Agent(6, a.device, a.compile)
    obs = torch.randint(0, 256, (b, 9, 84, 84), dtype=torch.uint8)
    next_obs = torch.randint(0, 256, (b, 9, 84, 84), dtype=torch.uint8)
    res = []
    for i in range(a.warmup + a.updates):
        action = torch.rand(b, 6) * 2 - 1
        reward, discount = torch.rand(b, 1), torch.full((b, 1), 0.99 ** 3)
        sync(a.device)
        start = time.perf_counter()
        m = agent.update(obs, action, reward, discount, next_obs, 2000 + 2 * i)
        sync(a.device)
        if i >= a.warmup:
            res.append((time.perf_counter() - start, m))
    rows = [dict(update_seconds=round(s, 6), critic_loss=m["critic_loss"].item(), actor_loss=m["actor_loss"].item())
            for s, m in res]
    report(out, "drqv2", b, precision, a, rows)


# ---- output ------------------------------------------------------------------------------------
def sync(device):
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def report(out, suite, batch, precision, a, rows, impl=IMPL):
    """One line per timed update, then the summary: median, min, max, quartiles."""
    head = {"impl": impl, "suite": suite, "batch": batch, **settings(precision, a.compile or False)}
    for r in rows:
        out({**head, **r})
    t = sorted(r["update_seconds"] for r in rows)
    q = statistics.quantiles(t, n=4) if len(t) > 1 else [t[0]] * 3
    out({**head, "summary": True, "updates": len(t), "warmup": a.warmup, "median_s": statistics.median(t),
         "min_s": t[0], "max_s": t[-1], "q1_s": q[0], "q3_s": q[2]})


def main(argv=None, out=None):
    """Runs the suites of argv (sys.argv without it); each JSON line goes to `out` (a dict), or is
    printed."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="cpu")
    p.add_argument("--suite", default="lfs,sac-features", help="lfs, sac-features, sac-pixels, drqv2 (comma separated)")
    p.add_argument("--precision", default="fp32", help="fp32 or tf32, or both: fp32,tf32 (each suite at each)")
    p.add_argument("--batch-lfs", type=int, default=512)
    p.add_argument("--batch-sac", default="128,512")
    p.add_argument("--batch-pixels", default="512")
    p.add_argument("--batch-drqv2", type=int, default=256)
    p.add_argument("--updates", type=int, default=10)
    p.add_argument("--warmup", type=int, default=5, help="untimed updates first (cuDNN autotuning, allocator)")
    p.add_argument("--threads", type=int, default=0, help="torch intra-op threads (0: torch's default)")
    p.add_argument("--compile", nargs="?", const="default", default=None,
                   help="torch.compile the networks' forwards (mode: default, reduce-overhead, max-autotune...)")
    p.add_argument("--graph", action="store_true", help="also the SAC update on cached features as a CUDA graph")
    p.add_argument("--parts", action="store_true", help="LFS: each part's time (CUDA events, no extra sync)")
    a = p.parse_args(argv)
    a.batch_sac = [int(x) for x in str(a.batch_sac).split(",") if x]
    a.batch_pixels = [int(x) for x in str(a.batch_pixels).split(",") if x]
    a.graph_arm = False
    if a.threads:
        torch.set_num_threads(a.threads)
    torch.set_default_device(a.device)  # networks, data and noise all live there, as in the old twins
    out = out or (lambda d: print(json.dumps(d), flush=True))
    out({"impl": IMPL, "environment": environment(a.device), "argv": sys.argv[1:] if argv is None else argv})
    runs = {"lfs": run_lfs, "sac-features": lambda a, pr, o: run_sac(a, pr, o, False),
            "sac-pixels": lambda a, pr, o: run_sac(a, pr, o, True), "drqv2": run_drqv2}
    for precision in a.precision.split(","):
        configure(precision)
        for suite in a.suite.split(","):
            if suite not in runs:
                raise SystemExit(f"unknown suite {suite}")
            start = time.perf_counter()
            runs[suite](a, precision, out)
            print(f"# {suite} {precision}: {time.perf_counter() - start:.1f} s", file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
