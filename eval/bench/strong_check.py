"""Checks on the CPU that the strong PyTorch twins (strong_torch.py) compute what the old twins
compute (pretrain_torch.py, sac_torch.py, drqv2_torch.py): same seeds, same shifts, the same
losses update after update, each within a relative error of `--tol` (1e-5).

- shift: strong_torch.shift_gather against (a) lfs's rule written out element by element
  (src/data/random_shift.rs: out[y][x] = in[clamp(y + dy - 4)][clamp(x + dx - 4)]), (b) the old
  LFS/SAC twins' per-image slicing of a replicate-padded batch, with the same draws (exact), (c)
  drqv2_torch.RandomShiftsAug (upstream DrQ-v2's grid_sample) with the same draws (bilinear
  weights at whole pixels, computed in float32: within 1e-2 of a pixel value of 0..255);
- lfs: the LFS update at a small batch, old `lfs_update` against `lfs_update_strong`: loss and
  the number of synthetic pairs LNC kept, every update;
- sac-features, sac-pixels: critic, actor and alpha losses of every update;
- drqv2: critic and actor losses of every update, against the old twin with its shift applied
  as the exact crop of its own draws (within tol), and against the old twin as written, whose
  float32 grid_sample moves pixels by up to ~4e-3 (within 1e-3, for the record).
One JSON line per comparison, then `strong_check: ok` or a failure (exit 1).

    python3 eval/bench/strong_check.py --batch 32 --updates 4
"""
import argparse
import contextlib
import io
import json
import sys

import torch
import torch.nn.functional as F

import drqv2_torch as D
import pretrain_torch as P
import sac_torch as S
import strong_torch as T


def rel(a, b):
    a, b = float(a), float(b)
    return abs(a - b) / max(abs(b), 1e-12)


def check_shift(out):
    torch.manual_seed(3)
    x = torch.randint(0, 256, (64, 9, 84, 84), dtype=torch.uint8)
    # (a) lfs's rule, element by element, on a few images
    off = T.draw_offsets(64)
    got = T.shift_gather(x, off)
    worst = 0
    for i in range(0, 64, 9):
        dy, dx = int(off[i, 0]), int(off[i, 1])
        ys = [min(max(y + dy - 4, 0), 83) for y in range(84)]
        xs = [min(max(v + dx - 4, 0), 83) for v in range(84)]
        ref = x[i][:, ys][:, :, xs]
        worst = max(worst, int((got[i].int() - ref.int()).abs().max()))
    out({"check": "shift = lfs's rule", "max_abs": worst, "ok": worst == 0})
    # (b) the old twins' loop: same generator, same draw
    g1, g2 = torch.Generator().manual_seed(5), torch.Generator().manual_seed(5)
    old = P.random_shift(x, g1)
    new = T.shift_gather(x, T.draw_offsets(64, g2)).float()
    d = float((old - new).abs().max())
    out({"check": "shift = old twin's loop (same draws)", "max_abs": d, "ok": d == 0.0})
    # (c) upstream DrQ-v2's grid_sample, same global draws
    torch.manual_seed(7)
    old = D.RandomShiftsAug(4)(x.float())
    torch.manual_seed(7)
    new = T.shift_gather(x, T.StrongDrQV2Agent.aug_offsets(x.float())).float()
    d = float((old - new).abs().max())
    out({"check": "shift = DrQ-v2's grid_sample (same draws)", "max_abs": d, "ok": d < 1e-2})
    # the offsets cover 0..=8 on both axes, uniformly
    o = T.draw_offsets(90000, torch.Generator().manual_seed(9))
    counts = [torch.bincount(o[:, k], minlength=9).tolist() for k in (0, 1)]
    ok = all(len(c) == 9 and min(c) > 9000 and max(c) < 11000 for c in counts)
    out({"check": "offsets uniform on 0..=8", "counts_dy": counts[0], "counts_dx": counts[1], "ok": ok})


def check_select(out):
    """The fixed-shape selection against the old twin's cat([syn[chosen], real[perm[:M - n]]]),
    for random masks of every density."""
    g = torch.Generator().manual_seed(11)
    worst = 0
    for trial in range(200):
        M = int(torch.randint(1, 40, (1,), generator=g))
        sel = torch.rand(M, generator=g) < trial / 200
        perm = torch.randperm(M, generator=g)
        real, syn = torch.randn(M, 3, generator=g), torch.randn(M, 3, generator=g)
        chosen = sel.nonzero().flatten()
        ref = torch.cat([syn[chosen], real[perm[: M - chosen.numel()]]])
        idx, n = T.select_rows(sel, perm, M)
        got = torch.cat([real, syn])[idx]
        worst = max(worst, float((got - ref).abs().max()) + abs(int(n) - chosen.numel()))
    out({"check": "LNC selection = old twin's (200 random masks)", "max_abs": worst, "ok": worst == 0})


def old_lfs(batch, updates):
    argv = sys.argv
    sys.argv = ["pretrain_torch.py", "--batch", str(batch), "--updates", str(updates), "--warmup", "0"]
    buf = io.StringIO()
    try:
        with contextlib.redirect_stdout(buf):
            P.main()
    finally:
        sys.argv = argv
    return [json.loads(l) for l in buf.getvalue().splitlines()]


def strong(argv):
    rows = []
    T.main(argv + ["--device", "cpu", "--warmup", "0", "--precision", "fp32"], rows.append)
    return [r for r in rows if "update_seconds" in r and not r.get("summary")]


def check_lfs(out, batch, updates, tol):
    old = old_lfs(batch, updates)
    new = strong(["--suite", "lfs", "--batch-lfs", str(batch), "--updates", str(updates)])
    for i, (o, n) in enumerate(zip(old, new)):
        e = rel(n["loss"], o["loss"])
        out({"check": "lfs loss", "batch": batch, "update": i, "old": o["loss"], "strong": n["loss"], "rel_err": e,
             "num_synthetic": [o["num_synthetic"], n["num_synthetic"]],
             "ok": e <= tol and o["num_synthetic"] == n["num_synthetic"]})
    return len(old) == len(new) == updates


def old_sac(batch, updates, pixels):
    """sac_torch.py main's loop (its draws in its order), the losses of each update."""
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(0)
    encoder = P.Encoder()
    encoder.apply(P.weight_init)
    agent = S.sac_nets()
    obs = torch.randint(0, 256, (batch, 9, 84, 84), generator=gen, dtype=torch.uint8)
    next_obs = torch.randint(0, 256, (batch, 9, 84, 84), generator=gen, dtype=torch.uint8)
    features = torch.rand(batch, S.REPR_DIM, generator=gen) * 0.5
    next_features = torch.rand(batch, S.REPR_DIM, generator=gen) * 0.5
    rows = []
    for _ in range(updates):
        action = torch.rand(batch, S.ACTION_DIM) * 2 - 1
        reward = torch.rand(batch, 1)
        if pixels:
            h = S.encode_shifted(encoder.convnet, obs, gen)
            next_h = S.encode_shifted(encoder.convnet, next_obs, gen)
        else:
            h, next_h = features, next_features
        c, a, al = S.sac_update(agent, h, next_h, action, reward)
        rows.append({"critic_loss": c.item(), "actor_loss": a.item(), "alpha_loss": al.item()})
    return rows


def check_sac(out, batch, updates, tol, pixels):
    suite = "sac-pixels" if pixels else "sac-features"
    old = old_sac(batch, updates, pixels)
    flag = "--batch-pixels" if pixels else "--batch-sac"
    new = strong(["--suite", suite, flag, str(batch), "--updates", str(updates)])
    for i, (o, n) in enumerate(zip(old, new)):
        errs = {k: rel(n[k], o[k]) for k in ("critic_loss", "actor_loss", "alpha_loss")}
        out({"check": f"{suite} losses", "batch": batch, "update": i, "old": o,
             "strong": {k: n[k] for k in o}, "rel_err": errs, "ok": max(errs.values()) <= tol})
    return len(old) == len(new) == updates


class ExactShift(torch.nn.Module):
    """RandomShiftsAug's draw, applied as the exact integer crop it stands for (grid_sample in
    float32 lands within ~4e-3 of the crop's pixel values, not on them)."""

    def forward(self, x):
        return T.shift_gather(x, T.StrongDrQV2Agent.aug_offsets(x))


def old_drqv2(batch, updates, exact_shift):
    """drqv2_torch.py --bench's loop, the metrics of each update; with `exact_shift`, the old
    agent's augmentation draws as RandomShiftsAug does and crops exactly."""
    torch.manual_seed(1)
    agent = D.DrQV2Agent(6)
    if exact_shift:
        agent.aug = ExactShift()
    obs = torch.randint(0, 256, (batch, 9, 84, 84), dtype=torch.uint8)
    next_obs = torch.randint(0, 256, (batch, 9, 84, 84), dtype=torch.uint8)
    rows = []
    for i in range(updates):
        action = torch.rand(batch, 6) * 2 - 1
        reward, discount = torch.rand(batch, 1), torch.full((batch, 1), 0.99 ** 3)
        rows.append(agent.update(obs, action, reward, discount, next_obs, 2000 + 2 * i))
    return rows


def check_drqv2(out, batch, updates, tol):
    """Against the old twin with its shift as the exact crop of the same draws (the limit: tol),
    and, for the record, against the old twin as written, whose grid_sample is off the crop by
    float32 rounding (limit 1e-3)."""
    new = strong(["--suite", "drqv2", "--batch-drqv2", str(batch), "--updates", str(updates)])
    complete = True
    for exact, name, limit in ((True, "drqv2 losses (old twin's shift as the exact crop, same draws)", tol),
                               (False, "drqv2 losses (old twin as written: grid_sample in float32)", 1e-3)):
        old = old_drqv2(batch, updates, exact)
        for i, (o, n) in enumerate(zip(old, new)):
            errs = {k: rel(n[k], o[k]) for k in ("critic_loss", "actor_loss")}
            out({"check": name, "batch": batch, "update": i, "old": {k: o[k] for k in errs},
                 "strong": {k: n[k] for k in errs}, "rel_err": errs, "limit": limit,
                 "ok": max(errs.values()) <= limit})
        complete &= len(old) == len(new) == updates
    return complete


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--batch", type=int, default=32, help="LFS's and SAC's batch")
    p.add_argument("--batch-drqv2", type=int, default=16)
    p.add_argument("--updates", type=int, default=4)
    p.add_argument("--tol", type=float, default=1e-5)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--suite", default="shift,lfs,sac-features,sac-pixels,drqv2")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    results = []

    def out(d):
        results.append(d)
        print(json.dumps(d), flush=True)

    complete = True
    suites = a.suite.split(",")
    if "shift" in suites:
        check_shift(out)
    if "lfs" in suites:
        check_select(out)
        complete &= check_lfs(out, a.batch, a.updates, a.tol)
    if "sac-features" in suites:
        complete &= check_sac(out, a.batch, a.updates, a.tol, False)
    if "sac-pixels" in suites:
        complete &= check_sac(out, a.batch, a.updates, a.tol, True)
    if "drqv2" in suites:
        complete &= check_drqv2(out, a.batch_drqv2, a.updates, a.tol)
    bad = [r["check"] for r in results if not r["ok"]]
    worst = max((max(r["rel_err"].values()) if isinstance(r.get("rel_err"), dict) else r.get("rel_err", 0))
                for r in results if r.get("limit", a.tol) == a.tol)
    print(f"strong_check: {'ok' if not bad and complete else 'FAILED'}: {len(results)} comparisons, "
          f"worst relative loss error {worst:.2e} (limit {a.tol:.0e}); torch {torch.__version__}"
          + (f"; failed: {sorted(set(bad))}" if bad else "") + ("" if complete else "; missing updates"))
    sys.exit(0 if not bad and complete else 1)


if __name__ == "__main__":
    main()
