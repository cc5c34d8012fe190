#!/usr/bin/env bash
# Puts what eval/study/study_4_gpu.sh brought back (study4-gpu.tar.gz) into results/study-4/:
# every attempt's clock file, each done cell's files with its `lfs suite run` output as
# suite-run.log (as study_4.sh does), and the session's suite file, nvidia-smi readings, pool
# log and last where.txt into results/study-4/gpu-<UTC date of the pool log>/. Commits nothing.
#   eval/study/study_4_gpu_unpack.sh TARBALL
set -euo pipefail
cd "$(dirname "$0")/../.."
TAR=$1
RESULTS=${STUDY4_RESULTS:-results/study-4}
T=$(mktemp -d /tmp/study4-gpu-unpack.XXXXXX)
trap 'rm -rf "$T"' EXIT
tar -C "$T" -xzf "$TAR"
session=$(head -1 "$T/pool.log" | xargs -I{} date -u -d {} +%Y%m%dT%H%M%SZ)
mkdir -p "$RESULTS/clock" "$RESULTS/gpu-$session"
cp "$T"/clock/*.tsv "$RESULTS/clock/"
for f in pool.log smi.csv where.txt study-4-*.toml; do [ -f "$T/$f" ] && cp "$T/$f" "$RESULTS/gpu-$session/"; done
for cell in "$T"/cells/*/; do
    [ -d "$cell" ] || continue
    name=$(basename "$cell")
    i=$((10#${name%%-*}))
    mkdir -p "$RESULTS/cells/$name"
    cp "$cell"/* "$RESULTS/cells/$name/"
    cp "$T/logs/cell-$i.log" "$RESULTS/cells/$name/suite-run.log"
    echo "$name: $(tail -1 "$cell/eval.csv")"
done
echo "gpu-$session: $(wc -l < "$T/where.txt") cells seen; clock files $(ls "$T"/clock | wc -l)"
