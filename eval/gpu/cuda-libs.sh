# Sourced by gpu-check.sh and carry-env.sh: `cuda_lib_dirs` prints, colon-separated, the folders
# of CUDA 13's libraries that the GPU image's Python packages hold (nvidia-cublas, nvidia-curand,
# ...: /opt/torch/.venv/lib/python3.12/site-packages/nvidia/cu13/lib on the lent H100s; cuDNN 9,
# which the CUDA build links: nvidia-cudnn-cu13's nvidia/cudnn/lib), found from python3's own
# search path; nothing when python3 has none. LD_LIBRARY_PATH is searched before the binaries'
# RUNPATH ($ORIGIN/cuda-libs, for a workstation's make build-cuda), so on a lent machine these
# are the libraries the carried binaries load.
cuda_lib_dirs() {
    python3 - <<'PY' 2>/dev/null
import glob, os, site, sys
roots = site.getsitepackages() + [site.getusersitepackages()] + sys.path
dirs = set()
for root in roots:
    for lib in ("libcublas.so.13", "libcublasLt.so.13", "libcurand.so.10", "libnvrtc.so.13", "libcudart.so.13",
                "libcudnn.so.9"):
        for path in glob.glob(os.path.join(root, "nvidia", "**", lib), recursive=True):
            dirs.add(os.path.dirname(path))
print(":".join(sorted(dirs)))
PY
}
