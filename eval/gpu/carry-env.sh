# Sourced by gpu-e2e.sh and paper-pretrain.sh on a lent GPU machine: unpacks the carried build
# (.gpu-carry/e2e.tar.xz, eval/gpu/pack-e2e.sh: bin/lfs, the one CUDA build (with cuDNN), and
# MuJoCo and dm-control for the machine's Python, the EGL vendor file) into the folder $WORK
# names, and sets the environment lfs runs in there: CUDA 13's and cuDNN 9's libraries from the
# image's Python packages (eval/gpu/cuda-libs.sh), the carried Python packages, EGL rendering.
# Sets LFS to the carried binary. Returns 1 when there is no carried build.
carry_env() {
    echo "== unpack .gpu-carry/e2e.tar.xz into $WORK"
    mkdir -p "$WORK"
    xz -dc .gpu-carry/e2e.tar.xz | tar -C "$WORK" -x || {
        echo "no carried e2e build: eval/gpu/pack-e2e.sh, then carry .gpu-carry" >&2
        return 1
    }
    . eval/gpu/cuda-libs.sh
    local cuda_dirs
    cuda_dirs=$(cuda_lib_dirs)
    export LD_LIBRARY_PATH="$WORK/lib${cuda_dirs:+:$cuda_dirs}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    export PYTHONPATH="$WORK/python${PYTHONPATH:+:$PYTHONPATH}"
    export LFS_PYTHON=${LFS_PYTHON:-$(command -v python3)}
    export MUJOCO_GL=egl
    # glvnd finds NVIDIA's EGL through a vendor file; the image may have none.
    if ! ls /usr/share/glvnd/egl_vendor.d/*nvidia* /etc/glvnd/egl_vendor.d/*nvidia* >/dev/null 2>&1; then
        export __EGL_VENDOR_LIBRARY_FILENAMES=${__EGL_VENDOR_LIBRARY_FILENAMES:-$WORK/egl/10_nvidia.json}
    fi
    LFS="$WORK/bin/lfs"
}
