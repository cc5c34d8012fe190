#!/usr/bin/env bash
# Issue 55's replay ablation (eval/suites/replay_ablation.toml; plan: results/replay-ablation/
# README.md): six DrQ-v2 cells on cartpole_swingup, one at a time, the two arms alternating
# (drqv2 s1, uniform s1, drqv2 s2, ...). After each cell: `lfs report` on the suite, the small
# files copied to results/replay-ablation/ and committed (that folder only; ABLATION_COMMIT=0
# copies without committing). Resumable: done cells are skipped, an interrupted one resumes
# from its checkpoint. One binary for the whole ablation: the first call records its sha256 and
# commit (LFS_COMMIT, default the checkout's HEAD) in binary.tsv, later calls refuse another.
#   nice -n 19 eval/study/replay_ablation.sh LFS     (make replay-ablation ABLATION_LFS=...)
set -euo pipefail
LFS=${1:?usage: replay_ablation.sh LFS_BINARY}
SUITE=eval/suites/replay_ablation.toml
DIR=runs/replay-ablation
RESULTS=results/replay-ablation
mkdir -p "$DIR" "$RESULTS"

sha=$(sha256sum "$LFS" | cut -d' ' -f1)
if [ -f "$RESULTS/binary.tsv" ]; then
    known=$(awk -F'\t' 'NR == 2 { print $1 }' "$RESULTS/binary.tsv")
    [ "$known" = "$sha" ] || { echo "replay_ablation: $LFS has sha256 $sha; the ablation's binary is $known ($RESULTS/binary.tsv)" >&2; exit 2; }
else
    printf 'sha256\tcommit\tpath\trecorded_utc\n%s\t%s\t%s\t%s\n' "$sha" "${LFS_COMMIT:-$(git rev-parse --short HEAD)}" "$LFS" "$(date -u +%FT%TZ)" > "$RESULTS/binary.tsv"
fi
# A new machine starts from the committed stage times.
[ -f "$DIR/stages.tsv" ] || cp "$RESULTS/stages.tsv" "$DIR/stages.tsv" 2>/dev/null \
    || printf 'stage\tstarted_utc\tseconds\thost\n' > "$DIR/stages.tsv"

commit() {  # commit MESSAGE: results/replay-ablation alone, retried while another commit holds the index
    [ "${ABLATION_COMMIT:-1}" = 1 ] || return 0
    for _ in 1 2 3 4 5; do
        git add -A -- "$RESULTS"
        git diff --cached --quiet -- "$RESULTS" && break
        git commit -q -m "replay ablation: $1" -- "$RESULTS" 2>/dev/null && break
        sleep 5
    done
}

# Cells are numbered row by row: drqv2 seeds 1-3 are 0-2, drqv2-uniform seeds 1-3 are 3-5.
for i in 0 3 1 4 2 5; do
    cell=$(ls -d "$DIR"/suite/cells/"$(printf %03d "$i")"-* 2>/dev/null || true)
    if [ -n "$cell" ] && grep -q '"state": "done"' "$cell/cell.json" 2>/dev/null; then
        continue
    fi
    start=$(date +%s)
    stamp=$(date -u +%FT%TZ)
    echo "== replay ablation: cell $i ($stamp)"
    "$LFS" suite run "$SUITE" --out "$DIR/suite" --job-index "$i"
    printf 'cell-%s\t%s\t%s\t%s\n' "$i" "$stamp" "$(( $(date +%s) - start ))" "$(hostname)" >> "$DIR/stages.tsv"
    "$LFS" report "$DIR/suite" --out "$DIR/report" > /dev/null
    eval/study/copy_results.sh "$DIR" "$RESULTS" > /dev/null
    commit "cell $i done"
done
echo "replay ablation: every cell done; results in $RESULTS"
