"""Summary of one eval/gpu/gpu-session.sh log (issue 52): lfs against the strong PyTorch twins,
round by round (ABBA), with each side's spread, the targets checked, then the anchors, the old
twins (history), the parts, end-to-end agent steps/s and the DrQ-v2 anchor.

    python3 eval/gpu/session_summary.py gpu-check-out/log.txt [--json summary.json]

Medians: lfs's device_check prints one median per bench (of 10 updates after 3 warm-ups, the
upper median); PyTorch's lines are per update, and the summary lines' `median_s` is the true
median. Across rounds: the median of the rounds' medians, and their range (min-max). A ratio
is lfs / PyTorch (below 1: lfs is faster).

A session has one lfs arm, `lfs` (the one CUDA build, with cuDNN). Logs of older sessions in
results/ may hold more: the cuDNN build beside the plain one (`lfs-cudnn`), switch arms
(`lfs-wxt`, `lfs-graph`, ...) and the parts' A/B runs. Their rounds and parity are read as any
arm's, their parts runs with their markers' keys; the sections of the removed host-vs-device
stages (stats, video, cache, frames, frames-e2e, frames-drqv2) get no table of their own (their
runs' train.jsonl lines are listed under end to end), and the summaries committed beside those
logs keep their same-round ratios.
"""
import argparse
import csv
import io
import json
import re
import statistics
import sys

TARGETS = {  # issue 52: (what, bound, sense)
    "lfs": ("LFS update, lfs/PyTorch", 1.0, "<="),
    "lfs-goal": ("LFS update goal, lfs/PyTorch", 0.5, "<="),
    "sac-features": ("SAC update on cached features, lfs/PyTorch", 0.5, "<="),
    "sac-mini": ("sac/mini agent steps/s", 200.0, ">="),
    "sac-paper": ("sac/paper agent steps/s", 70.0, ">="),
    "drqv2": ("DrQ-v2 e2e, lfs/upstream frames/s", 2.0, ">="),
}


def parse(path):
    """Sections: (kind, {key: value}, [json objects], [other lines]), in order."""
    sections = [("start", {}, [], [])]
    for line in open(path, errors="replace"):
        line = line.rstrip("\n")
        if line.startswith("== "):
            words = line[3:].split()
            kind = words[0] if words else ""
            keys = dict(w.split("=", 1) for w in words[1:] if "=" in w)
            sections.append((kind, keys, [], []))
        elif line.startswith("{"):
            try:
                sections[-1][2].append(json.loads(line))
            except json.JSONDecodeError:
                sections[-1][3].append(line)
        else:
            sections[-1][3].append(line)
    return sections


def med(v):
    return statistics.median(v) if v else None


def fmt(x, unit="s"):
    if x is None:
        return "-"
    if unit == "s":
        return f"{x * 1e3:.2f} ms" if x < 1 else f"{x:.3f} s"
    return f"{x:.2f}{unit}"


def lfs_benches(objs):
    """device_check's bench lines -> {(suite, batch): line} (its median in "seconds"; since
    2026-11-29 also its spread, "q1_s" and "q3_s" as strong_torch.py's)."""
    suites = {"lfs update": "lfs", "sac update, cached features": "sac-features", "drqv2 update": "drqv2"}
    return {(suites[o["bench"]], o["batch"]): o for o in objs if o.get("bench") in suites}


def torch_summaries(objs, impl="torch-strong"):
    """strong_torch.py's summary lines -> {(suite, batch, precision): line}."""
    return {(o["suite"], o["batch"], o["precision"]): o for o in objs if o.get("summary") and o.get("impl") == impl}


def environment(sections):
    """strong_torch.py's environment line, else what the info stage printed."""
    for _, _, objs, _ in sections:
        for o in objs:
            if "environment" in o:
                return o["environment"]
    env = {}
    for _, _, _, other in sections:
        for line in other:
            m = re.match(r"torch (\S+) cuda (\S+) cudnn (\S+)$", line)
            if m:
                env.update(torch=m[1], cuda=m[2], cudnn=m[3])
            elif line.startswith("gpu ") and line[4:] != "none":
                env["gpu"] = line[4:]
    return env


def check(key, value):
    what, bound, sense = TARGETS[key]
    if value is None:
        return f"{what} {sense} {bound:g}: not measured"
    ok = value <= bound if sense == "<=" else value >= bound
    return f"{what} {sense} {bound:g}: {value:.3g} -> {'MET' if ok else 'not met'}"


def rounds_table(sections, lines, result):
    rounds = {}  # precision -> round -> arm -> benches
    for kind, keys, objs, _ in sections:
        if kind == "bench":
            p, r = keys.get("precision", "fp32"), int(keys.get("round", 0))
            if keys.get("arm", "").startswith("lfs"):  # lfs (older logs: lfs-cudnn, switch arms)
                rounds.setdefault(p, {}).setdefault(r, {})[keys["arm"]] = lfs_benches(objs)
            else:
                rounds.setdefault(p, {}).setdefault(r, {})["torch"] = {(s, b): o for (s, b, _), o in
                                                                      torch_summaries(objs).items()}
    checks = []
    for p, by_round in rounds.items():
        arms = sorted({a for r in by_round.values() for a in r if a != "torch"})
        for arm in arms:
            checks += arm_table(p, arm, by_round, lines, result)
    return checks


def arm_table(p, arm, by_round, lines, result):
    """One lfs arm against strong PyTorch over the rounds of precision p."""
    checks = []
    what = "lfs" if arm == "lfs" else f"lfs ({arm})"
    lines.append(f"\n## {what} vs strong PyTorch, {p} on both sides, {len(by_round)} rounds in ABBA order "
                 "(each side: the median of its timed updates [q1-q3]; lfs logs before "
                 "2026-11-29 have no quartiles)")
    keys = sorted({k for r in by_round.values() for k in r.get(arm, {})} |
                  {k for r in by_round.values() for k in r.get("torch", {})})
    for suite, batch in keys:
        lines.append(f"{suite} B={batch}:")
        lv, tv, ratios = [], [], []
        tbatches = set()
        for r in sorted(by_round):
            lo = by_round[r].get(arm, {}).get((suite, batch))
            l = lo["seconds"] if lo else None
            t = by_round[r].get("torch", {}).get((suite, batch))
            if t is None:  # a dry run's torch may run another batch: pair by suite
                cands = [o for (s, b), o in by_round[r].get("torch", {}).items() if s == suite]
                t = cands[0] if len(cands) == 1 and suite == "lfs" else None
            tm = t["median_s"] if t else None
            if t:
                tbatches.add(t["batch"])
            ratio = l / tm if l is not None and tm else None
            lv += [l] if l is not None else []
            tv += [tm] if tm is not None else []
            ratios += [ratio] if ratio is not None else []
            order = "lfs first" if r % 2 == 1 else "PyTorch first"
            spread = f" [{fmt(t['q1_s'])}-{fmt(t['q3_s'])}]" if t else ""
            lspread = f" [{fmt(lo['q1_s'])}-{fmt(lo['q3_s'])}]" if lo and "q1_s" in lo else ""
            lines.append(f"  round {r} ({order}): {arm} {fmt(l)}{lspread}, PyTorch {fmt(tm)}{spread}, "
                         f"ratio {fmt(ratio, '×')}")
        ml, mt = med(lv), med(tv)
        ratio = ml / mt if ml and mt else None
        note = f" (PyTorch's batch {sorted(tbatches)}: not comparable)" if tbatches - {batch} else ""
        lines.append(f"  over rounds: {arm} {fmt(ml)} (range {fmt(min(lv) if lv else None)}-{fmt(max(lv) if lv else None)}), "
                     f"PyTorch {fmt(mt)} (range {fmt(min(tv) if tv else None)}-{fmt(max(tv) if tv else None)}); "
                     f"ratio of medians {fmt(ratio, '×')} (rounds {fmt(min(ratios) if ratios else None, '×')}-"
                     f"{fmt(max(ratios) if ratios else None, '×')}){note}")
        key = f"{suite}/{batch}" if arm == "lfs" else f"{arm}:{suite}/{batch}"
        result.setdefault("rounds", {}).setdefault(p, {})[key] = {
            "lfs_s": lv, "torch_s": tv, "ratios": ratios, "lfs_median_s": ml, "torch_median_s": mt,
            "ratio_of_medians": ratio, "comparable": not note}
        if p == "fp32" and not note:
            label = "" if arm == "lfs" else f" [{arm}]"
            if suite == "lfs":
                checks += [check("lfs", ratio) + label, check("lfs-goal", ratio) + label]
            elif suite == "sac-features":
                checks.append(check("sac-features", ratio) + f" (B={batch})" + label)
    return checks


def parts_table(sections, lines, result):
    """The LFS update's split (mode LFS_SYNC_PARTS) and its unblocked runs (mode unblocked-tf32,
    args). An older log's A/B runs (conv=, step=, long= in their markers) are listed with those
    keys; its SAC and DrQ-v2 A/B benches in parts sections are not."""
    for kind, keys, objs, _ in sections:
        if kind != "parts":
            continue
        for o in objs:
            if o.get("bench") != "lfs update":
                continue
            names = ("data", "forward", "backward", "optimizer")
            total = sum(o.get(n, 0) for n in names)
            other = {k: v for k, v in keys.items() if k not in ("arm", "mode", "args", "t", "at")}
            label = "".join(f" {k}={v}" for k, v in other.items())
            who = "lfs" if keys.get("arm", "lfs") == "lfs" else f"lfs ({keys['arm']})"
            args = f" {keys['args']}" if keys.get("args") else ""
            lines.append(f"\n## {who}'s LFS update, split ({keys.get('mode')}{label}{args}): "
                         f"whole {fmt(o['seconds'])}; " + ", ".join(f"{n} {fmt(o.get(n))}" for n in names)
                         + (f" (sum {fmt(total)}; the trainer waits for the device at each part's end: every "
                            "part's time is its own, the whole slower than unblocked)"
                            if keys.get("mode") == "LFS_SYNC_PARTS" or "BLOCKING" in keys.get("mode", "") else
                            f" (sum {fmt(total)}; unblocked: only the whole is exact)"))
            result.setdefault("parts", []).append({"arm": keys.get("arm", "lfs"), "mode": keys.get("mode"),
                                                   **other, **o})


def anchors_table(sections, lines, result):
    for kind, keys, objs, _ in sections:
        if kind != "anchors":
            continue
        lines.append(f"\n## strong PyTorch anchors ({keys.get('stage')}): median [q1-q3] of the timed updates")
        for impl in ("torch-strong", "torch-strong-graph"):
            for (suite, batch, p), o in sorted(torch_summaries(objs, impl).items()):
                lines.append(f"  {impl} {suite} B={batch} {p}{' compile=' + str(o['compile']) if o.get('compile') else ''}: "
                             f"{fmt(o['median_s'])} [{fmt(o['q1_s'])}-{fmt(o['q3_s'])}]")
                result.setdefault("anchors", []).append(o)
        for o in objs:
            if o.get("error"):
                lines.append(f"  {o.get('impl')} {o.get('suite')} B={o.get('batch')} {o.get('precision')}: {o['error']}")
        parts = {}
        for o in objs:
            if o.get("suite") == "lfs" and "parts" in o:
                for n, s in o["parts"].items():
                    parts.setdefault(o["precision"], {}).setdefault(n, []).append(s)
        for p, by in parts.items():
            lines.append(f"  torch-strong lfs parts ({p}, CUDA events, medians): "
                         + ", ".join(f"{n} {fmt(med(v))}" for n, v in by.items()))


def history_table(sections, lines, result):
    rows = []
    for kind, keys, objs, _ in sections:
        if kind == "history":
            t = [o["update_seconds"] for o in objs if "update_seconds" in o]
            if t:
                rows.append((keys.get("suite"), objs[0].get("batch"), med(t), min(t), max(t)))
    if rows:
        lines.append("\n## the old twins as written (history; PyTorch's default precision: cuDNN TF32 on, matmul FP32)")
        for suite, b, m, lo, hi in rows:
            lines.append(f"  {suite} B={b}: {fmt(m)} (range {fmt(lo)}-{fmt(hi)})")
            result.setdefault("history", []).append({"suite": suite, "batch": b, "median_s": m, "min_s": lo, "max_s": hi})


def lfs_episodes(objs):
    """lfs's train.jsonl episodes: (frame, frames/s, updates, ms per agent step of the parts)."""
    out = []
    for o in objs:
        if "train/fps" not in o:
            continue
        steps = o.get("train/episode_length") or 1
        parts = {k[5:-2]: 1e3 * o[k] / steps for k in ("time/act_s", "time/sample_s", "time/encode_batch_s",
                                                       "time/update_s", "time/aux_s", "time/env_wait_s") if o.get(k)}
        out.append((o["train/frame"], o["train/fps"], o.get("train/num_updates", 0), parts))
    return out


def e2e_tables(sections, lines, result):
    checks = []
    runs = {}
    for kind, keys, objs, other in sections:
        if kind == "train.jsonl":
            runs[keys["name"]] = lfs_episodes(objs)
        elif kind == "train.csv":
            rows = list(csv.DictReader(io.StringIO("\n".join(other)))) if other else []
            runs[keys["name"]] = [(int(float(r["frame"])), float(r["fps"]), None, {}) for r in rows if r.get("fps")]
    if not runs:
        return checks
    lines.append("\n## end to end (frames/s per training episode; agent steps/s = frames/s / 2, action repeat 2)")
    steady = {}
    for name, eps in runs.items():
        train = [e for e in eps if e[2] is None or e[2] > 0]
        lines.append(f"  {name}:")
        for frame, fps, n, parts in eps:
            p = ", ".join(f"{k} {v:.1f}" for k, v in parts.items())
            lines.append(f"    to frame {frame}: {fps:.1f} frames/s = {fps / 2:.1f} agent steps/s"
                         + (f", {n} updates" if n is not None else "") + (f" (ms per agent step: {p})" if p else ""))
        # steady state: the training episodes after the first (cuDNN autotuning, JIT), else the last
        rest = train[1:] if len(train) > 1 else train
        steady[name] = med([e[1] for e in rest]) if rest else None
        lines.append(f"    steady (median of the training episodes after the first, or the only one): "
                     f"{fmt(steady[name], ' frames/s')}")
    result["e2e"] = {"runs": {k: [list(e[:3]) + [e[3]] for e in v] for k, v in runs.items()}, "steady_fps": steady}
    for name in ("sac-mini", "sac-paper"):
        if name in steady:
            checks.append(check(name, steady[name] / 2 if steady[name] else None))
    if "drqv2-lfs" in steady:
        for name in sorted(n for n in steady if n.startswith("drqv2-upstream")):
            r = steady["drqv2-lfs"] / steady[name] if steady[name] and steady["drqv2-lfs"] else None
            checks.append(check("drqv2", r) + f" (against {name})")
    return checks


def seeds_table(sections, lines, result):
    """drqv2-seeds: each run's evaluation returns by frame, lfs against upstream (described, not tested here)."""
    evals = {}
    for kind, keys, _, other in sections:
        if kind == "eval.csv" and keys.get("name", "").startswith("drqv2-seeds-"):
            rows = list(csv.DictReader(io.StringIO("\n".join(other)))) if other else []
            evals[keys["name"]] = {int(float(r["frame"])): float(r["episode_reward"]) for r in rows if r.get("frame")}
    if not evals:
        return
    lines.append("\n## DrQ-v2, lfs and upstream's train.py side by side (evaluation return by frame; the test of "
                 "the difference is in the results README, not here)")
    frames = sorted({f for e in evals.values() for f in e})
    for side, label in (("lfs", "lfs"), ("up", "upstream")):
        for name in sorted(n for n in evals if n.startswith(f"drqv2-seeds-{side}-")):
            lines.append(f"  {label} {name.rsplit('-', 1)[1]}: " + ", ".join(
                f"{f}: {evals[name][f]:.1f}" if f in evals[name] else f"{f}: -" for f in frames))
    result["drqv2_seeds"] = evals


def own_forward_notes(sections, lines, result):
    """The training-batch check's note lines (parity, trainbatch): the gradients against the
    CPU's own forward, whose ReLU masks may differ (results/relu-kink-2026-11-28), beside the
    check itself (the CPU's backward on the GPU's own activations)."""
    rows = []
    for kind, keys, objs, _ in sections:
        if kind not in ("parity", "trainbatch"):
            continue
        note = None
        for o in objs:  # each check's note comes just before it (the small checks' notes too)
            if "note" in o and "batch" in o:
                note = o
            if o.get("check") != "encoder at a training batch" or note is None:
                continue
            check = o
            rows.append({"stage": kind, "arm": keys.get("arm", "lfs"), "batch": note["batch"],
                         "check": check["rel_err"], "check_worst": check["worst"], "ok": check["ok"],
                         "own_forward": note["rel_err"], "own_forward_worst": note["worst"]})
    if not rows:
        return
    lines.append("\n## encoder at a training batch: the check (the CPU's backward on the GPU's activations) "
                 "and the gradients against the CPU's own forward (ReLU masks may differ; not checked)")
    for r in rows:
        lines.append(f"  {r['stage']} {r['arm']} B={r['batch']}: check {r['check']:.2e} ({r['check_worst']}, "
                     f"{'ok' if r['ok'] else 'FAILED'}), own forward {r['own_forward']:.2e} ({r['own_forward_worst']})")
    result["training_batch"] = rows


def long_table(sections, lines, result):
    """device_check --long's loss series (GPU against the CPU kernels) and --memory's growth."""
    for kind, keys, objs, _ in sections:
        if kind not in ("long", "memory"):
            continue
        for o in objs:
            if "long" in o:
                if not any(l.startswith("\n## parity at scale") for l in lines):
                    lines.append("\n## parity at scale (device_check --long: every update's loss, GPU against the CPU kernels)")
                lines.append(f"  {keys.get('arm')} {o['long']} B={o['batch']}: {o['updates']} updates, largest relative gap "
                             f"{o['max_rel_gap']:.2e}, first update past 1e-4: {o.get('first_update_over_1e-4')}, "
                             f"band {o['band']}: {'within' if o['ok'] else 'OUTSIDE'}")
                result.setdefault("long", []).append({"arm": keys.get("arm"), **o})
            elif "memory" in o:
                if "note" in o:
                    lines.append(f"\n## memory: {o['note']}")
                else:
                    used = o["used_mb_every_100"]
                    lines.append(f"\n## GPU memory over {o['updates']} LFS updates at B={o['batch']}: "
                                 f"{used[0] if used else '-'} MB at update 100, {used[-1] if used else '-'} MB at the end, "
                                 f"growth after update 200 {o['growth_mb_after_200']:.1f} MB (limit {o['limit_mb']}): "
                                 f"{'flat' if o['ok'] else 'GROWS'}")
                result["memory"] = o


def pool_table(sections, lines, result):
    """`lfs suite run` on one GPU: the default pool against one cell at a time, same-round ratios."""
    rounds = {}
    for kind, keys, objs, _ in sections:
        if kind == "pool":
            for o in objs:
                if "pool" in o:
                    rounds.setdefault(o["round"], {})[o["pool"]] = o
    pairs = {r: a for r, a in sorted(rounds.items()) if "j1" in a and "default" in a}
    if not pairs:
        return
    lines.append("\n## many cells on one GPU (lfs suite run: default pool / -j 1, same window length, from empty folders)")
    frames, pace = [], []
    for r, a in pairs.items():
        j1, d = a["j1"], a["default"]
        fr = d["frames"] / j1["frames"] if j1["frames"] else None
        pr = d["pace_fps"] / j1["pace_fps"] if j1["pace_fps"] else None
        if fr is not None:
            frames.append(fr)
        if pr is not None:
            pace.append(pr)
        lines.append(f"  round {r}: -j 1 {j1['frames']} frames in {j1['seconds']} s ({j1['cells_started']} cell); "
                     f"default {d['frames']} frames in {d['seconds']} s ({d['cells_started']} cells); "
                     f"ratio {fmt(fr, 'x')}, of the cells' own paces {fmt(pr, 'x')}")
    lines.append(f"  median over {len(pairs)} rounds: frames (= cells/hour) {fmt(med(frames), 'x')} "
                 f"[{fmt(min(frames, default=None), 'x')}, {fmt(max(frames, default=None), 'x')}]; "
                 f"paces {fmt(med(pace), 'x')} [{fmt(min(pace, default=None), 'x')}, {fmt(max(pace, default=None), 'x')}]")
    result["pool"] = {"rounds": pairs, "frames_ratio": frames, "pace_ratio": pace}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("log")
    p.add_argument("--json")
    a = p.parse_args()
    sections = parse(a.log)
    lines, result = [], {}
    env = environment(sections)
    head = next((k for kind, k, _, _ in sections if kind == "session"), {})
    done = next((k for kind, k, _, _ in sections if kind == "done"), {})
    lines.append(f"# GPU session: {env.get('gpu', head.get('device', '?'))}; torch {env.get('torch', '?')} "
                 f"(CUDA {env.get('cuda', '-')}, cuDNN {env.get('cudnn', '-')}); lfs at {head.get('commit', '?')}; "
                 f"{done.get('at', '?')} in all")
    lines.append("precision: lfs FP32, or TF32 in rounds of precision tf32 (run.precision); strong PyTorch as each line says "
                 "(rounds: fp32 = TF32 off for matmuls and cuDNN)")
    skipped = [f"{k.get('stage')} ({k.get('reason') or 'needed ' + k.get('needs', '?') + ', had ' + k.get('left', '?')})"
               for kind, k, _, _ in sections if kind == "skip"]
    if skipped:
        lines.append("skipped: " + "; ".join(skipped))
    failures = [l for _, _, _, other in sections for l in other if l.startswith("!! exit")]
    checks = rounds_table(sections, lines, result)
    parts_table(sections, lines, result)
    anchors_table(sections, lines, result)
    history_table(sections, lines, result)
    checks += e2e_tables(sections, lines, result)
    seeds_table(sections, lines, result)
    long_table(sections, lines, result)
    own_forward_notes(sections, lines, result)
    pool_table(sections, lines, result)
    # lfs; an older log's second build too (lfs-cudnn), each under its own key
    parity_arms = [keys.get("arm", "lfs") for kind, keys, _, _ in sections if kind == "parity"]
    for arm in sorted(set(parity_arms), key=lambda a: (a != "lfs", a)):
        parity = [o for kind, keys, objs, _ in sections if kind == "parity" and keys.get("arm", "lfs") == arm
                  for o in objs if "check" in o]
        if parity:
            worst = max(parity, key=lambda o: o["rel_err"])
            ok = all(o["ok"] for o in parity)
            what = "parity" if arm == "lfs" else f"parity ({arm})"
            lines.append(f"\n{what}: {len(parity)} checks, {'all pass' if ok else 'FAILED'}; worst {worst['rel_err']:.2e} ({worst['check']})")
            result["parity" if arm == "lfs" else f"parity-{arm}"] = {"checks": len(parity), "ok": ok, "worst": worst}
    if failures:
        lines.append("\ncommands that failed:\n  " + "\n  ".join(failures))
    lines.append("\n## issue 52's targets")
    if head.get("device", "cuda") != "cuda":
        lines.append(f"  not evaluated: a dry run on {head.get('device')} at tiny sizes proves the script, not a speed")
        checks = []
    else:
        lines += ["  " + c for c in checks] or ["  nothing measured"]
    result.update(environment=env, session=head, checks=checks, failures=failures, skipped=skipped)
    print("\n".join(lines))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
