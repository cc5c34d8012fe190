#!/usr/bin/env bash
# Packs what end-to-end runs (`lfs eval` / `lfs train` on DMControl) need on a lent GPU machine
# into .gpu-carry/e2e.tar.xz, under the device tool's 64 MiB carry beside device_check.xz
# (eval/gpu/pack.sh). The lent machine (Ubuntu 24.04, Python 3.12 with torch, numpy, scipy,
# lxml, absl) lacks four things the CPU machine has; each is packed here:
#   bin/lfs      the CUDA build's lfs (make build-cuda: the one CUDA build, with cuDNN),
#                stripped; its CUDA 13 and cuDNN 9 libraries come from the GPU image's Python
#                packages (eval/gpu/cuda-libs.sh), not from the carry.
#   lib/         (a) stand-ins for the four FFmpeg libraries lfs links (libavcodec.so.59, ...):
#                every FFmpeg function lfs imports, under its symbol version, each printing
#                that FFmpeg is missing and aborting. Decoding and encoding videos (ingest,
#                collect, eval videos) need the real FFmpeg (160 MB with its dependencies,
#                more than the carry holds); eval and train without videos never call it.
#                (b) libglvnd's libEGL.so.1, libGLdispatch.so.0 and libOpenGL.so.0 from this
#                machine: the lent machine has NVIDIA's EGL driver but not the dispatcher.
#   egl/         the glvnd vendor file naming NVIDIA's libEGL_nvidia.so.0.
#   python/      the worker's packages (python/requirements.txt's pins) built for the lent
#                machine's Python: mujoco, dm-control (without its locomotion assets and
#                Blender add-on, which the suite does not load), dm-env, dm-tree, PyOpenGL.
#                numpy, scipy, lxml and absl-py come from the machine (their versions are
#                recorded by gpu-e2e.sh).
#
#   eval/gpu/pack-e2e.sh [TARGET_DIR]   (TARGET_DIR: target-cuda, the default)
#   GPU_PYTHON=3.12                     the lent machine's Python (make gpu-e2e prints it)
set -euo pipefail
cd "$(dirname "$0")/../.."
TARGET=${1:-target-cuda}
PYVER=${GPU_PYTHON:-3.12}
OUT=.gpu-carry
WHEELS=$TARGET/gpu-wheels
BIN="$TARGET/release/lfs"
[ -x "$BIN" ] || { echo "no $BIN: run make build-cuda first" >&2; exit 1; }
STAGE=$(mktemp -d /tmp/lfs-e2e-pack.XXXXXX)
trap 'rm -rf "$STAGE"' EXIT
mkdir -p "$OUT" "$WHEELS" "$STAGE"/{bin,lib,egl,python}

# ---- bin/lfs ------------------------------------------------------------------------------
strip -o "$STAGE/bin/lfs" "$BIN"

# ---- lib/: FFmpeg stand-ins ---------------------------------------------------------------
# The binary's imports from FFmpeg, e.g. `av_frame_alloc@LIBAVUTIL_57`; the version node names
# the library (LIBAVUTIL_57 -> libavutil.so.57).
nm -D --undefined-only "$BIN" | awk '{print $2}' | grep -E '@LIB(AV|SW)[A-Z]+_[0-9]+$' > "$STAGE/ffmpeg-imports"
[ -s "$STAGE/ffmpeg-imports" ] || { echo "$BIN imports nothing from FFmpeg: nothing to stand in for" >&2; exit 1; }
for node in $(sed 's/.*@//' "$STAGE/ffmpeg-imports" | sort -u); do
    base=$(echo "${node%_*}" | tr 'A-Z' 'a-z')
    soname="$base.so.${node##*_}"
    src="$STAGE/$soname.c"
    map="$STAGE/$soname.map"
    {
        echo "/* Stand-in for FFmpeg's $soname (eval/gpu/pack-e2e.sh): every function lfs imports. */"
        echo "#include <stdio.h>"
        echo "#include <stdlib.h>"
        echo "static void missing(const char *name) {"
        echo "    fprintf(stderr, \"lfs: FFmpeg's %s was called, but this machine has no FFmpeg: \""
        echo "            \"$soname is a stand-in carried by eval/gpu/pack-e2e.sh (runs without videos only)\\n\", name);"
        echo "    abort();"
        echo "}"
        grep "@$node\$" "$STAGE/ffmpeg-imports" | sed 's/@.*//' | while read -r sym; do
            echo "void $sym(void) { missing(\"$sym\"); }"
        done
    } > "$src"
    {
        echo "$node {"
        echo "  global:"
        grep "@$node\$" "$STAGE/ffmpeg-imports" | sed 's/@.*//; s/.*/    &;/'
        echo "  local: *;"
        echo "};"
    } > "$map"
    cc -shared -fPIC -O1 -o "$STAGE/lib/$soname" -Wl,-soname,"$soname" -Wl,--version-script="$map" "$src"
done

# ---- lib/: libglvnd's EGL dispatcher, egl/: NVIDIA's vendor file ----------------------------
for lib in libEGL.so.1 libGLdispatch.so.0 libOpenGL.so.0; do
    path=$(/sbin/ldconfig -p | awk -v l="$lib" '$1 == l && /x86-64/ {print $NF; exit}')
    [ -n "$path" ] || { echo "no $lib on this machine (apt install libegl1 libopengl0)" >&2; exit 1; }
    cp -L "$path" "$STAGE/lib/$lib"
done
cat > "$STAGE/egl/10_nvidia.json" <<'JSON'
{"file_format_version": "1.0.0", "ICD": {"library_path": "libEGL_nvidia.so.0"}}
JSON

# ---- python/: the worker's packages for the lent machine's Python ---------------------------
pins() { grep -iE "^($1)==" python/requirements.txt; }
PIP=${PIP:-.venv/bin/pip}
"$PIP" download --disable-pip-version-check -q --no-deps --only-binary=:all: -d "$WHEELS" \
    --python-version "$PYVER" --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
    $(pins 'mujoco|dm-control|dm-env|dm-tree|PyOpenGL')
pytag="cp${PYVER/./}"
for pkg in mujoco dm_control dm_env dm_tree pyopengl; do
    wheel=$(ls "$WHEELS"/${pkg}-*.whl | grep -iE "(py3-none|$pytag-$pytag)" | head -1)
    [ -n "$wheel" ] || { echo "no $pkg wheel for Python $PYVER in $WHEELS" >&2; exit 1; }
    python3 -m zipfile -e "$wheel" "$STAGE/python"
done
# Not loaded by the worker: MuJoCo's viewers and Filament renderer, dm_control's locomotion
# assets (83 MB) and Blender add-on.
rm -rf "$STAGE/python/mujoco/experimental" "$STAGE/python/mujoco"/_render_filament* \
    "$STAGE/python/mujoco/include" "$STAGE/python/dm_control/locomotion" "$STAGE/python/dm_control/blender"
find "$STAGE/python" -name '*.so*' -exec strip --strip-unneeded {} + 2>/dev/null || true

tar -C "$STAGE" -c bin lib egl python | xz -9 -T2 > "$OUT/e2e.tar.xz"
total=$(du -cb "$OUT"/*.xz | tail -1 | cut -f1)
echo "packed $OUT/e2e.tar.xz: $(($(stat -c %s "$OUT/e2e.tar.xz") / 1024 / 1024)) MiB; .gpu-carry in all: $((total / 1024 / 1024)) MiB (the carry's limit: 64 MiB)"
[ "$total" -lt $((62 * 1024 * 1024)) ] || { echo "too large to carry" >&2; exit 1; }
