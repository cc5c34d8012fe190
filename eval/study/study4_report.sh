#!/usr/bin/env bash
# Study 4's report again, from the committed cells alone (results/study-4/cells/), on any
# machine and with any binary: the suite folder is rebuilt from the study's suite file and
# those cells, then `lfs report` runs on it. CELLs named after OUT are left out (a reading of
# the plan that drops a seed, docs/study-4.md "A seed that misses a cell").
#   eval/study/study4_report.sh LFS_BINARY OUT [CELL ...]
#   eval/study/study4_report.sh target/release/lfs results/study-4/report-lfs-seeds-1-5 005-lfs-cartpole_swingup-s6
# OUT/made-by.tsv names the binary (sha256), the commit checked out and the cells left out.
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: $0 LFS_BINARY OUT [CELL_TO_LEAVE_OUT ...]" >&2; exit 2; }
LFS=$1
OUT=$2
shift 2
CELLS=results/study-4/cells
[ -d "$CELLS" ] || { echo "study4_report: $CELLS is missing: run from the repository root" >&2; exit 2; }
# OUT is replaced: refuse a folder that is not an earlier report (results/study-4 itself, say).
if [ -e "$OUT" ] && [ ! -f "$OUT/report.md" ]; then
    echo "study4_report: $OUT exists and holds no report.md: not replaced; name a new folder" >&2
    exit 2
fi
for drop in "$@"; do
    [ -d "$CELLS/$drop" ] || { echo "study4_report: $CELLS/$drop is no committed cell" >&2; exit 2; }
done

# The suite folder lives under runs/ (ignored) with a name of its own: report.md prints its path.
DIR=runs/study-4-report/$(basename "$OUT")/suite
rm -rf "$DIR"
mkdir -p "$DIR/cells"
cp eval/suites/study-4.toml "$DIR/suite.toml"
for cell in "$CELLS"/*/; do
    name=$(basename "$cell")
    case " $* " in *" $name "*) continue ;; esac
    mkdir -p "$DIR/cells/$name"
    cp "$cell"/* "$DIR/cells/$name/"
done

rm -rf "$OUT"
"$LFS" report "$DIR" --out "$OUT"
{
    printf 'binary\tsha256\tcheckout_commit\tcells_left_out\n'
    printf '%s\t%s\t%s\t%s\n' "$LFS" "$(sha256sum "$LFS" | cut -d' ' -f1)" \
        "$(git rev-parse --short HEAD)" "${*:-none}"
} > "$OUT/made-by.tsv"
