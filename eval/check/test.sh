#!/usr/bin/env bash
# make test: the whole suite, each test's time reported, and the suite's time budget enforced.
# The doc tests run as cargo runs them; the unit and integration test binaries run under
# libtest's JSON report with each test's time (`-Z unstable-options --format json
# --report-time`, which a stable test binary accepts with RUSTC_BOOTSTRAP=1: set for the test
# binaries alone, through cargo's runner, so that the build is the ordinary one and not
# redone), read by eval/check/test_time.py: a failed test's output, the 20 slowest tests, every
# test's time in runs/test-times.tsv, and a failure when one test binary ran longer than
# TEST_BUDGET_SECONDS (BENCHMARKS.md, "What running things costs").
#   eval/check/test.sh [TEST_NAME_FILTER]
set -euo pipefail
cd "$(dirname "$0")/../.."
CARGO=${CARGO:-cargo}
BUDGET=${TEST_BUDGET_SECONDS:-2400}
mkdir -p runs
"$CARGO" test --release --locked --doc -- "$@"
# The examples, which tests run as programs (tests/device.rs runs examples/device_check): a plain
# `cargo test` builds them, one given --lib --bins --tests does not.
"$CARGO" build --release --locked --examples
"$CARGO" test --release --locked --lib --bins --tests \
    --config "target.'cfg(all())'.runner = ['env', 'RUSTC_BOOTSTRAP=1']" \
    -- -Z unstable-options --format json --report-time "$@" \
    | python3 eval/check/test_time.py --budget "$BUDGET" --slowest 20 --tsv runs/test-times.tsv
