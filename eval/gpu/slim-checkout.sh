#!/usr/bin/env bash
# The device tool sends the checkout's tracked files with `.gpu-carry` (64 MiB in all). Tracked
# files reached 85 MB (results/ mostly) and the carry 48 MiB (2026-11-27), so before a GPU
# command leave results/ out of the working tree (git sparse-checkout: the files stay tracked and
# committed, only absent on disk; no GPU stage reads them), and bring them back after.
#
#   eval/gpu/slim-checkout.sh            results/ out (commits meanwhile are safe: they keep it)
#   eval/gpu/slim-checkout.sh --restore  results/ back
set -euo pipefail
cd "$(dirname "$0")/../.."
if [ "${1:-}" = --restore ]; then
    git sparse-checkout disable
    echo "results/ restored"
else
    git sparse-checkout set --no-cone '/*' '!/results/'
    # (files left out are absent: du names them on stderr and fails, which is expected here)
    bytes=$(set +o pipefail; git ls-files -z | xargs -0 du -cb 2>/dev/null | tail -1 | cut -f1)
    carry=$(du -sb .gpu-carry 2>/dev/null | cut -f1 || echo 0)
    echo "results/ left out: $((bytes / 1048576)) MiB of tracked files + $((carry / 1048576)) MiB of .gpu-carry (the device tool's limit: 64 MiB)"
fi
