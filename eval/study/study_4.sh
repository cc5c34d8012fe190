#!/usr/bin/env bash
# Study 4 (docs/study-4.md): frozen-encoder SAC at 100K frames on cartpole_swingup, lfs vs
# random vs atc, on committed mini encoders. Every stage resumes where it stopped: run it again
# after an interruption or on the next session's machine. Each finished cell's small files are
# copied into results/study-4/ and committed (that folder only) at once: run folders do not
# survive a change of machine.
#   eval/study/study_4.sh [LFS_BINARY]      (make study-4; nice it: it fills both cores)
# The study keeps one binary: the first call records its sha256 and commit
# (results/study-4/binary.tsv; LFS_COMMIT, default the checkout's HEAD, is the commit it was
# built at), and later calls refuse another unless it was built at the recorded commit and
# STUDY4_REBUILT=1 says so (a fresh machine rebuilds it; the new sha256 is added as a row).
# The budget clock (results/study-4/clock/): every attempt at a cell writes one file with its
# start and, every minute, the time it was last seen alive; a killed attempt keeps its last
# heartbeat. The budget gate sums every attempt, finished or not.
# STUDY4_COMMIT=0 copies without committing. STUDY4_JOBS (default 2): cells at a time.
set -euo pipefail
LFS=${1:-target/release/lfs}
DIR=runs/study-4
RESULTS=results/study-4
SUITE=eval/suites/study-4.toml
JOBS=${STUDY4_JOBS:-2}
BUDGET_HOURS=60   # the plan's budget gate, in cell-hours (docs/study-4.md)
export MUJOCO_GL=${MUJOCO_GL:-egl}
mkdir -p "$DIR/encoders" "$RESULTS/clock" "$RESULTS/cells"

# ---- the one binary
sha=$(sha256sum "$LFS" | cut -d' ' -f1)
if [ -f "$RESULTS/binary.tsv" ]; then
    LFS_COMMIT=$(awk -F'\t' 'NR == 2 { print $2 }' "$RESULTS/binary.tsv")
    if ! awk -F'\t' -v s="$sha" 'NR > 1 && $1 == s { found = 1 } END { exit !found }' "$RESULTS/binary.tsv"; then
        if [ "${STUDY4_REBUILT:-0}" = 1 ]; then
            printf '%s\t%s\t%s\t%s\n' "$sha" "$LFS_COMMIT" "$LFS" "$(date -u +%FT%TZ)" >> "$RESULTS/binary.tsv"
            echo "study-4: $LFS recorded as a rebuild at $LFS_COMMIT (sha256 $sha)"
        else
            echo "study-4: $LFS has sha256 $sha, not the study's binary (built at $LFS_COMMIT; results/study-4/binary.tsv). Build that commit and rerun with STUDY4_REBUILT=1" >&2
            exit 2
        fi
    fi
else
    LFS_COMMIT=${LFS_COMMIT:-$(git rev-parse --short HEAD)}
    printf 'sha256\tcommit\tpath\trecorded_utc\n%s\t%s\t%s\t%s\n' "$sha" "$LFS_COMMIT" "$LFS" "$(date -u +%FT%TZ)" > "$RESULTS/binary.tsv"
fi

commit() {  # commit MESSAGE: copy the done cells' small files and commit results/study-4
    # alone; one copier and committer at a time
    (
        flock 9
        eval/study/copy_results.sh "$DIR" "$RESULTS" > /dev/null
        [ "${STUDY4_COMMIT:-1}" = 1 ] || exit 0
        for _ in 1 2 3 4 5; do git add "$RESULTS" 2>/dev/null && break; sleep 3; done
        for _ in 1 2 3 4 5; do
            git diff --cached --quiet -- "$RESULTS" && break
            git commit -q -m "study-4: $1" -- "$RESULTS" 2>/dev/null && break
            sleep 3
        done
    ) 9> "$DIR/.commit.lock"
    return 0
}

# ---- stage 0: the committed encoders, checked against the plan's sha256 (encoders.tsv)
seeds=$(python3 -c 'import sys, tomllib; print(" ".join(map(str, tomllib.load(open(sys.argv[1], "rb"))["seeds"])))' "$SUITE")
stage_encoder() {  # stage_encoder NAME SOURCE_FILE: copy it into runs/study-4/encoders/, checked
    local name=$1 src=$2
    local want; want=$(awk -F'\t' -v n="$name" '$1 == n { print $2 }' "$RESULTS/encoders.tsv")
    [ -n "$want" ] || { echo "study-4: $name is not in $RESULTS/encoders.tsv" >&2; exit 2; }
    local got; got=$(sha256sum "$src" | cut -d' ' -f1)
    [ "$got" = "$want" ] || { echo "study-4: $src has sha256 $got, not the plan's $want for $name" >&2; exit 2; }
    cp "$src" "$DIR/encoders/$name.safetensors"
}
for s in $seeds; do
    if [ "$s" -le 6 ]; then src=results/study-2/encoders/lfs-s$s.safetensors
    else src=results/study-3/encoders/lfs-s$s.safetensors; fi
    stage_encoder "lfs-s$s" "$src"
    a=$(( (s - 1) % 3 + 1 ))
    stage_encoder "atc-s$s" "results/study-2/encoders/atc-s$a.safetensors"
done

# ---- the budget clock
clock_hours() {  # every attempt's seconds, finished or killed, in hours
    awk -F'\t' 'FNR > 1 { s += $4 } END { printf "%.2f", s / 3600 }' "$RESULTS"/clock/*.tsv 2>/dev/null || echo 0
}
run_cell() {  # run_cell INDEX: one attempt at one cell, clocked, then its files committed
    local i=$1
    local start; start=$(date +%s)
    local clock; clock="$RESULTS/clock/cell-$(printf %03d "$i")-$(date -u -d "@$start" +%Y%m%dT%H%M%SZ).tsv"
    beat() {  # beat FINISHED
        printf 'cell\tstarted_utc\tlast_seen_utc\tseconds\tfinished\tcommit\thost\n%s\t%s\t%s\t%s\t%s\t%s\t%s\n' \
            "$i" "$(date -u -d "@$start" +%FT%TZ)" "$(date -u +%FT%TZ)" "$(( $(date +%s) - start ))" \
            "$1" "$LFS_COMMIT" "$(hostname)" > "$clock.tmp" && mv "$clock.tmp" "$clock"
    }
    beat 0
    ( while sleep 60; do beat 0; done ) & local heart=$!
    local rc=0
    "$LFS" suite run "$SUITE" --out "$DIR/suite" --job-index "$i" > "$DIR/cell-$i.log" 2>&1 || rc=$?
    kill "$heart" 2>/dev/null || true
    wait "$heart" 2>/dev/null || true
    if [ "$rc" = 0 ]; then beat 1; else beat "failed-$rc"; fi
    local name; name=$(basename "$(ls -d "$DIR"/suite/cells/"$(printf %03d "$i")"-* 2>/dev/null | head -1)")
    # The cell's files are copied by commit (eval/study/copy_results.sh, done cells only); the
    # suite's output of this attempt goes beside them.
    if [ -n "$name" ] && grep -q '"state": "done"' "$DIR/suite/cells/$name/cell.json" 2>/dev/null; then
        mkdir -p "$RESULTS/cells/$name"
        cp "$DIR/cell-$i.log" "$RESULTS/cells/$name/suite-run.log"
    fi
    commit "cell $i ($name): exit $rc, clock $(clock_hours) h"
    return "$rc"
}

# ---- the cells, seed by seed (lfs, random, atc of seed 1, then seed 2, ...), JOBS at a time:
# whatever is committed when a session ends is mostly whole seeds. Cell index = encoder * n +
# seed index (lfs 0..n-1, random n..2n-1, atc 2n..3n-1).
n=$(echo "$seeds" | wc -w)
order=()
for k in $(seq 0 $((n - 1))); do order+=("$k" "$((n + k))" "$((2 * n + k))"); done
running=0
gated=0
for i in "${order[@]}"; do
    name=$(ls -d "$RESULTS"/cells/"$(printf %03d "$i")"-* 2>/dev/null | head -1 || true)
    [ -n "$name" ] && continue   # committed: done, here or on another machine
    hours=$(clock_hours)
    # The gate holds back new cells; a cell with an attempt on the clock resumes past it.
    started=$(ls "$RESULTS"/clock/cell-"$(printf %03d "$i")"-*.tsv 2>/dev/null | head -1 || true)
    if [ -z "$started" ] && awk -v h="$hours" -v l="$BUDGET_HOURS" 'BEGIN { exit !(h > l) }'; then
        [ "$gated" = 1 ] || echo "study-4: the budget clock reads $hours h, over the plan's $BUDGET_HOURS h: no new cell starts (docs/study-4.md)"
        gated=1
        continue
    fi
    echo "== study-4: cell $i ($(date -u +%FT%TZ); clock $hours h)"
    run_cell "$i" &
    # The first cell writes the suite folder's suite.toml: binaries before the fix of 2026-11-28
    # lose a cell that writes it at the same moment (one temporary name for both processes).
    for _ in $(seq 60); do [ -f "$DIR/suite/suite.toml" ] && break; sleep 1; done
    running=$((running + 1))
    if [ "$running" -ge "$JOBS" ]; then wait -n || true; running=$((running - 1)); fi
done
wait || true

# ---- the report, once every cell is committed, or once the budget gate has stopped the study
# and its last cells have ended: on the cells done (the plan: a seed that misses a cell is left
# out of that method's scores, and the report names the seeds each comparison used). Cells
# done on other machines come back from results/study-4/cells/ into the suite folder first.
done_cells=$(ls -d "$RESULTS"/cells/*/ 2>/dev/null | wc -l)
if [ "$done_cells" -eq $((3 * n)) ] || [ "$gated" = 1 ]; then
    for cell in "$RESULTS"/cells/*/; do
        name=$(basename "$cell")
        [ -f "$DIR/suite/cells/$name/cell.json" ] || { mkdir -p "$DIR/suite/cells/$name"; cp "$cell"/* "$DIR/suite/cells/$name/"; }
    done
    "$LFS" report "$DIR/suite" --out "$DIR/report"
    rm -rf "$RESULTS/report" && cp -r "$DIR/report" "$RESULTS/report"
    if [ "$gated" = 1 ]; then
        commit "the budget gate stopped the study at $(clock_hours) h: lfs report on the $done_cells cells done"
    else
        commit "all $((3 * n)) cells and lfs report with the pre-registered verdicts"
    fi
fi
