#!/usr/bin/env bash
# Study 4's cells on a lent GPU machine (docs/study-4.md, "Rules while it runs": the cells may
# move to a GPU machine with the same suite file, each cell's device stated). Runs from the
# repository root on that machine, in device-tool commands that follow one another:
#   eval/study/study_4_gpu.sh start SECONDS CELL...   stage and check the encoders, start the
#       cells at once in a process session of their own (they outlive the command while the
#       machine stays warm), then collect for SECONDS
#   eval/study/study_4_gpu.sh collect SECONDS         collect for SECONDS more (the next command)
# Collecting writes $OUT/study4-gpu.tar.gz every 15 s, so the newest comes back however the
# command ends: each done cell's small files (those eval/study/copy_results.sh copies), each
# attempt's clock file (study_4.sh's columns and a device column), each cell's `lfs suite run`
# output, the suite file the cells ran, nvidia-smi's readings, and a line per cell of where it
# is. Here, eval/study/study_4_gpu_unpack.sh puts them into results/study-4/.
#
# The suite file is eval/suites/study-4.toml with one more `set` entry, "run.device=cuda", and
# nothing else changed; the cells run FP32 (run.precision's default, and NVIDIA_TF32_OVERRIDE=0
# for cuDNN and cuBLAS). What the command needs that the tree does not hold comes in the carry
# folder (STUDY4_CARRY, .gpu-carry-study4; eval/study/study_4_gpu_pack.sh): e2e.tar.xz (the
# CUDA lfs, the worker's Python packages, EGL: eval/gpu/pack-e2e.sh), COMMIT (the commit the
# binary was built at), encoders.tsv and the encoders the cells name.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
CARRY=${STUDY4_CARRY:-.gpu-carry-study4}
W=${STUDY4_GPU_WORK:-/tmp/study4-gpu}
OUT=${OUT:-$W/out}
SUITE=eval/suites/study-4.toml
mkdir -p "$OUT" "$W/clock" "$W/logs"

environment() {  # the CUDA lfs, its libraries, the worker's Python and EGL, as gpu-session.sh sets them
    if [ ! -x "$W/e2e/bin/lfs" ]; then
        mkdir -p "$W/e2e" && xz -dc "$CARRY/e2e.tar.xz" | tar -C "$W/e2e" -x
    fi
    LFS=${STUDY4_GPU_LFS:-$W/e2e/bin/lfs}
    . eval/gpu/cuda-libs.sh
    local dirs; dirs=$(cuda_lib_dirs)
    export LD_LIBRARY_PATH="$W/e2e/lib${dirs:+:$dirs}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    # (STUDY4_GPU_PYTHONPATH= for a dry run on a machine whose Python is not the lent one's)
    local py=${STUDY4_GPU_PYTHONPATH-$W/e2e/python}
    export PYTHONPATH="$py${PYTHONPATH:+:$PYTHONPATH}"
    export LFS_PYTHON=${LFS_PYTHON:-$(command -v python3)}
    export MUJOCO_GL=${MUJOCO_GL:-egl}
    export NVIDIA_TF32_OVERRIDE=0 PYTHONUNBUFFERED=1
    DEVICE=${STUDY4_GPU_DEVICE:-cuda}
    if [ "$DEVICE" = cuda ] && [ -f "$W/e2e/egl/10_nvidia.json" ] && ! ls /usr/share/glvnd/egl_vendor.d/*nvidia* /etc/glvnd/egl_vendor.d/*nvidia* >/dev/null 2>&1; then
        export __EGL_VENDOR_LIBRARY_FILENAMES=${__EGL_VENDOR_LIBRARY_FILENAMES:-$W/e2e/egl/10_nvidia.json}
    fi
    LFS_COMMIT=$(cat "$CARRY/COMMIT")
    GPU_NAME=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 || true)
}

stage() {  # the plan's encoders into runs/study-4/encoders/ (the suite's relative paths), checked by sha256
    mkdir -p runs/study-4/encoders
    local name want got
    while IFS=$'\t' read -r name want _; do
        [ "$name" = name ] && continue
        [ -f "$CARRY/encoders/$name.safetensors" ] || continue
        got=$(sha256sum "$CARRY/encoders/$name.safetensors" | cut -d' ' -f1)
        [ "$got" = "$want" ] || { echo "study-4-gpu: $name has sha256 $got, not the plan's $want" >&2; exit 2; }
        cp "$CARRY/encoders/$name.safetensors" runs/study-4/encoders/
    done < "$CARRY/encoders.tsv"
    # the suite file: study-4.toml with the device added to its `set`, nothing else
    python3 - "$SUITE" "$W/study-4-$DEVICE.toml" "$DEVICE" <<'PY'
import sys, tomllib
text = open(sys.argv[1]).read()
assert text.count("set = [\n") == 1, "study-4.toml's set list moved"
text = text.replace("set = [\n", f'set = [\n    "run.device={sys.argv[3]}",\n', 1)
assert tomllib.loads(text)["set"][0] == f"run.device={sys.argv[3]}"
open(sys.argv[2], "w").write(text)
PY
}

run_cell() {  # run_cell INDEX: one attempt, clocked as study_4.sh clocks them
    local i=$1 start; start=$(date +%s)
    local clock; clock="$W/clock/cell-$(printf %03d "$i")-$(date -u -d "@$start" +%Y%m%dT%H%M%SZ).tsv"
    beat() {
        printf 'cell\tstarted_utc\tlast_seen_utc\tseconds\tfinished\tcommit\thost\tdevice\n%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' \
            "$i" "$(date -u -d "@$start" +%FT%TZ)" "$(date -u +%FT%TZ)" "$(( $(date +%s) - start ))" \
            "$1" "$LFS_COMMIT" "$(hostname)" "$DEVICE ($GPU_NAME)" > "$clock.tmp" && mv "$clock.tmp" "$clock"
    }
    beat 0
    ( while sleep 15; do beat 0; done ) & local heart=$!
    local rc=0
    "$LFS" suite run "$W/study-4-$DEVICE.toml" --out "$W/suite" --job-index "$i" > "$W/logs/cell-$i.log" 2>&1 || rc=$?
    kill "$heart" 2>/dev/null || true
    wait "$heart" 2>/dev/null || true
    if [ "$rc" = 0 ]; then beat 1; else beat "failed-$rc"; fi
}

pool() {  # pool CELL...: every cell at once, two seconds apart
    command -v nvidia-smi >/dev/null &&
        nvidia-smi --query-gpu=timestamp,utilization.gpu,memory.used,power.draw --format=csv -lms 2000 > "$W/smi.csv" 2>&1 &
    for i in "$@"; do run_cell "$i" & sleep 2; done
    wait
}

pack() {  # the newest of everything into $OUT/study4-gpu.tar.gz, and where each cell is
    local p=$W/pack
    rm -rf "$p" && mkdir -p "$p/cells" "$p/clock" "$p/logs"
    cp "$W"/clock/*.tsv "$p/clock/" 2>/dev/null || true
    cp "$W"/logs/*.log "$p/logs/" 2>/dev/null || true
    cp "$W/study-4-$DEVICE.toml" "$W/smi.csv" "$W/pool.log" "$p/" 2>/dev/null || true
    local cell name frames state
    for cell in "$W"/suite/cells/*/; do
        [ -d "$cell" ] || continue
        name=$(basename "$cell")
        state=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["state"])' "$cell/cell.json" 2>/dev/null || echo starting)
        frames=$(tail -1 "$cell/train.jsonl" 2>/dev/null | python3 -c 'import json,sys; print(json.loads(sys.stdin.read()).get("train/frame", "?"))' 2>/dev/null || echo 0)
        echo "$name: $state, frame $frames, eval.csv rows $(($(wc -l 2>/dev/null < "$cell/eval.csv" || echo 1) - 1))"
        [ "$state" = done ] || continue
        mkdir -p "$p/cells/$name"
        for f in cell.json run.json config.resolved.toml eval.csv train.jsonl; do
            if [ -f "$cell/$f" ]; then cp "$cell/$f" "$p/cells/$name/"; fi
        done
    done > "$p/where.txt"
    tar -C "$p" -czf "$OUT/study4-gpu.tar.gz.tmp" . && mv "$OUT/study4-gpu.tar.gz.tmp" "$OUT/study4-gpu.tar.gz"
}

collect() {  # collect SECONDS
    local until=$((SECONDS + $1))
    while [ "$SECONDS" -lt "$until" ]; do
        sleep 15
        pack
        echo "== $(date -u +%T) $(grep -c ': done' "$W/pack/where.txt" || true) done; $(tr '\n' ';' < "$W/pack/where.txt")"
    done
}

case "${1:-}" in
    start)
        secs=$2; shift 2
        environment
        {
            date -u; nproc; free -g | head -2; nvidia-smi 2>&1 | head -15
            echo "lfs: $LFS ($(sha256sum "$LFS" | cut -d' ' -f1)), built at $LFS_COMMIT"; "$LFS" --version
            "$LFS_PYTHON" -c 'import mujoco, dm_control; print("mujoco", mujoco.__version__)'
        } > "$W/pool.log" 2>&1 || true
        cat "$W/pool.log"
        stage
        setsid nohup "$ROOT/eval/study/study_4_gpu.sh" _pool "$@" >> "$W/pool.log" 2>&1 < /dev/null &
        collect "$secs"
        ;;
    _pool)
        shift
        environment
        pool "$@"
        ;;
    collect)
        environment
        collect "$2"
        ;;
    *)
        echo "usage: $0 start SECONDS CELL... | collect SECONDS" >&2
        exit 2
        ;;
esac
