#!/usr/bin/env python3
"""The test suite's time budget: reads libtest's JSON events (`cargo test -- -Z unstable-options
--format json --report-time`) from stdin, prints each test's result as libtest's pretty format
would (with its time), a failed test's captured output, the slowest tests and each binary's
wall-clock; exits non-zero when a test failed or when a test binary ran longer than its budget.

    RUSTC_BOOTSTRAP=1 cargo test --release -- -Z unstable-options --format json --report-time \\
        | python3 eval/check/test_time.py --budget 1500 --slowest 20 --tsv runs/test-times.tsv

--budget: seconds of wall-clock any one test binary may take (the integration binary is the
one that matters: make test's budget, BENCHMARKS.md "What running things costs"). The budget is
the loud part: a suite that grows past it fails `make test`, and so CI, with the slowest tests
printed, the day it happens. --tsv keeps every test's time (name, result, seconds).
"""

import argparse
import json
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--budget", type=float, default=None, help="seconds any one test binary may take")
    ap.add_argument("--slowest", type=int, default=20)
    ap.add_argument("--tsv", default=None)
    args = ap.parse_args()

    tests = []  # (name, event, seconds)
    binaries = []  # (passed, failed, ignored, seconds)
    failed_output = []
    for line in sys.stdin:
        line = line.rstrip("\n")
        try:
            event = json.loads(line)
        except json.JSONDecodeError:
            print(line, flush=True)  # a test's own print outside capture, or cargo's
            continue
        kind, what = event.get("type"), event.get("event")
        if kind == "suite" and what == "started":
            print(f"running {event.get('test_count', '?')} tests", flush=True)
        elif kind == "suite" and what in ("ok", "failed"):
            seconds = float(event.get("exec_time", 0.0))
            binaries.append((event.get("passed", 0), event.get("failed", 0), event.get("ignored", 0), seconds))
            print(f"test result: {what}. {event.get('passed', 0)} passed; {event.get('failed', 0)} failed; "
                  f"{event.get('ignored', 0)} ignored; finished in {seconds:.2f}s\n", flush=True)
        elif kind == "test" and what in ("ok", "failed", "ignored"):
            seconds = float(event.get("exec_time", 0.0))
            tests.append((event["name"], what, seconds))
            print(f"test {event['name']} ... {what} <{seconds:.3f}s>", flush=True)
            if what == "failed":
                failed_output.append((event["name"], event.get("stdout", "")))
        elif kind == "test" and what == "timeout":
            print(f"test {event['name']} has been running for over 60 seconds", flush=True)

    if args.tsv:
        with open(args.tsv, "w") as f:
            f.write("test\tresult\tseconds\n")
            for name, what, seconds in tests:
                f.write(f"{name}\t{what}\t{seconds:.3f}\n")
    for name, output in failed_output:
        print(f"\n---- {name} output ----\n{output}")
    slowest = sorted(tests, key=lambda t: -t[2])[: args.slowest]
    print(f"\nThe {len(slowest)} slowest tests (of {len(tests)}; {sum(t[2] for t in tests):.0f} test-seconds in all):")
    for name, what, seconds in slowest:
        print(f"  {seconds:8.1f} s  {name}{'' if what == 'ok' else '  (' + what + ')'}")
    longest = max((b[3] for b in binaries), default=0.0)
    print(f"The longest test binary ran {longest:.0f} s" + (f" (budget {args.budget:.0f} s)" if args.budget else ""))
    status = 0
    if failed_output or any(b[1] for b in binaries):
        print("FAILED: see the failed tests above", file=sys.stderr)
        status = 1
    if args.budget is not None and longest > args.budget:
        print(f"FAILED: a test binary ran {longest:.0f} s, over the test-time budget of {args.budget:.0f} s: "
              "make the slowest tests above cheaper (BENCHMARKS.md, \"What running things costs\")", file=sys.stderr)
        status = 1
    sys.exit(status)


if __name__ == "__main__":
    main()
