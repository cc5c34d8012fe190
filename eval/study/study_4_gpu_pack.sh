#!/usr/bin/env bash
# The carry of eval/study/study_4_gpu.sh: .gpu-carry-study4/ with e2e.tar.xz (eval/gpu/pack-e2e.sh's,
# from make build-cuda's binary), COMMIT, results/study-4/encoders.tsv and every encoder it names.
#   eval/study/study_4_gpu_pack.sh [GPU_CARRY]   (GPU_CARRY: the .gpu-carry holding e2e.tar.xz and COMMIT)
set -euo pipefail
cd "$(dirname "$0")/../.."
FROM=${1:-.gpu-carry}
TO=.gpu-carry-study4
[ -f "$FROM/e2e.tar.xz" ] && [ -f "$FROM/COMMIT" ] || { echo "no $FROM/e2e.tar.xz or $FROM/COMMIT: make build-cuda && make gpu-pack first" >&2; exit 1; }
rm -rf "$TO" && mkdir -p "$TO/encoders"
cp "$FROM/e2e.tar.xz" "$FROM/COMMIT" "$TO/"
cp results/study-4/encoders.tsv "$TO/"
tail -n +2 results/study-4/encoders.tsv | while IFS=$'\t' read -r name _ file; do
    cp "$file" "$TO/encoders/$name.safetensors"
done
du -sh "$TO"
