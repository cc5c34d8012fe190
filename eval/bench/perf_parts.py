"""Shares of `perf record` samples by kind of work, start-up (orthogonal init) left out (BENCHMARKS.md,
issue 30).

    python3 eval/bench/perf_parts.py sac.perf 0.109 [other.perf seconds ...]
"""
import re, subprocess, sys
KINDS = [
    ("start-up (orthogonal init, excluded)", r"init::orthogonal|standard_normal|rand_chacha"),
    ("GEMM kernels and packing", r"gemm"),
    ("elementwise ops, gradient zero-fill and sums, allocation", r"binary_map|unary_map|Map1|Map2|memset|memmove|memcpy|clear_page|mi_|page_fault|folio|copy_strided|affine|cmp|where_cond|reduce"),
    ("Adam and EMA", r"adam|ema"),
    ("threads idle or waiting (spin, yield, park)", r"short_backtrace|Barrier|schedule|finish_task_switch|spin_unlock|sched_yield|syscall|futex|rayon_core::sleep|wake"),
]
def parts(path):
    out = subprocess.run(["perf", "report", "-i", path, "--no-children", "--sort", "symbol", "--stdio", "-g", "none"],
                         capture_output=True, text=True).stdout
    shares = {k: 0.0 for k, _ in KINDS}; shares["other"] = 0.0
    for line in out.splitlines():
        m = re.match(r"\s+([\d.]+)%\s+\[.\]\s+(.*)|\s+([\d.]+)%\s+\[k\]\s+(.*)", line)
        if not m: continue
        pct = float(m.group(1) or m.group(3)); sym = m.group(2) or m.group(4)
        for k, pat in KINDS:
            if re.search(pat, sym): shares[k] += pct; break
        else: shares["other"] += pct
    return shares
for path, seconds in zip(sys.argv[1::2], sys.argv[2::2]):
    s = parts(path); startup = s.pop(KINDS[0][0]); total = sum(s.values())
    print(path, f"update median {float(seconds)*1000:.0f} ms, start-up {startup:.1f}% of samples")
    for k, v in s.items():
        print(f"  {k}: {100*v/total:.1f}% ≈ {float(seconds)*1000*v/total:.0f} ms")
