#!/usr/bin/env bash
# Upstream DrQ-v2 for a lent GPU machine (issue 52): facebookresearch/drqv2 @c0c650b's own
# train.py, to time against `lfs train --config pipelines/drqv2/easy.toml` on the same GPU
# (eval/gpu/gpu-session.sh, stage drqv2). Nothing of upstream is committed here: its code is
# fetched at pack time into .gpu-carry/drqv2/ (git-ignored, carried with .gpu-carry), with the
# Python packages the GPU image lacks as wheels in .gpu-carry/drqv2-whl/. mujoco 3.17.0 and
# dm-control 1.0.50 come from .gpu-carry/e2e.tar.xz (eval/gpu/pack-e2e.sh), torch, numpy,
# torchvision, tensorboard, opencv, imageio and PyYAML from the GPU image.
#
# Harness patches, none of which changes the algorithm (each is checked to apply exactly once;
# the diff is written to .gpu-carry/drqv2/harness.patch):
#   1. dmc.py: dm_control 1.0.50's action_scale.Wrapper returns a float64 action spec (the
#      dm_control upstream used, 2021, kept float32), and the replay storage then refuses the
#      agent's float32 actions (replay_buffer.py asserts spec.dtype == value.dtype): upstream's
#      own ActionDTypeWrapper(env, np.float32) is applied once more after the scaling.
#   2. replay_buffer.py: Python >= 3.11's random.seed refuses numpy integers: int(seed).
#   3. cfgs/config.yaml: the SLURM launcher (hydra-submitit-launcher) override and its settings
#      dropped; runs are local.
#   4. train.py: the precision stated and settable. DRQV2_PRECISION=fp32 turns TF32 off for
#      matmuls and cuDNN convolutions, tf32 on for both; unset keeps PyTorch's defaults, as
#      upstream ran (cuDNN TF32 on, matmul TF32 off). The flags are printed at start.
#   5. train.py: load_snapshot's torch.load(f, weights_only=False). PyTorch >= 2.6 loads
#      weights only by default and refuses upstream's snapshot (the pickled agent), so a run
#      could not resume (eval/study/upstream_drqv2.sh resumes at episode ends).
# hydra-core 1.3.2 / omegaconf 2.3.0 replace upstream's hydra-core 1.1.0 (which does not import
# on Python >= 3.11); without a version_base its @hydra.main keeps 1.1's behaviour.
#
#   eval/gpu/pack-drqv2.sh
#   DRQV2_GIT   where to get upstream: a local clone or bare mirror, or a git URL (default
#               https://github.com/facebookresearch/drqv2); codeload's tarball if that fails
#   PIP         the pip that downloads the wheels (default: python3 -m pip)
set -euo pipefail
cd "$(dirname "$0")/../.."
COMMIT=c0c650b76c6e5d22a7eb5f2edffd1440fe94f8ef
SRC=${DRQV2_GIT:-https://github.com/facebookresearch/drqv2}
DEST=.gpu-carry/drqv2
WHEELS=.gpu-carry/drqv2-whl
FILES="dmc.py drqv2.py logger.py replay_buffer.py train.py utils.py video.py cfgs LICENSE"
PIP=${PIP:-python3 -m pip}
STAGE=$(mktemp -d /tmp/drqv2-pack.XXXXXX)
trap 'rm -rf "$STAGE"' EXIT
mkdir -p "$STAGE/up"

# ---- upstream's code at $COMMIT -----------------------------------------------------------
archive() {  # git archive of $FILES at $COMMIT from git dir $1
    git --git-dir="$1" cat-file -e "$COMMIT^{commit}" 2>/dev/null &&
        git --git-dir="$1" archive --format=tar "$COMMIT" $FILES | tar -C "$STAGE/up" -x
}
got=
if [ -d "$SRC" ]; then
    gitdir=$SRC; [ -d "$SRC/.git" ] && gitdir=$SRC/.git
    archive "$gitdir" && got="$SRC"
else
    git clone -q --bare --filter=blob:none "$SRC" "$STAGE/clone.git" 2>/dev/null &&
        archive "$STAGE/clone.git" && got="$SRC"
fi
if [ -z "$got" ]; then
    curl -fsSL "https://codeload.github.com/facebookresearch/drqv2/tar.gz/$COMMIT" |
        tar -C "$STAGE/up" -xz --strip-components=1 && got=codeload
fi
[ -n "$got" ] && [ -f "$STAGE/up/train.py" ] || { echo "could not get drqv2 @$COMMIT (DRQV2_GIT=$SRC)" >&2; exit 1; }
rm -rf "$DEST"
mkdir -p "$DEST"
for f in $FILES; do cp -r "$STAGE/up/$f" "$DEST/"; done
cp -r "$DEST" "$STAGE/pristine"

# ---- the harness patches ------------------------------------------------------------------
python3 - "$DEST" <<'PY'
import pathlib, sys
root = pathlib.Path(sys.argv[1])

def patch(name, old, new):
    p = root / name
    s = p.read_text()
    if s.count(old) != 1:
        sys.exit(f"{name}: the text to patch is found {s.count(old)} times, not once")
    p.write_text(s.replace(old, new))

patch("dmc.py",
      "    env = action_scale.Wrapper(env, minimum=-1.0, maximum=+1.0)\n",
      "    env = action_scale.Wrapper(env, minimum=-1.0, maximum=+1.0)\n"
      "    # harness patch: dm_control 1.0.50's action_scale widens the spec to float64; keep float32\n"
      "    env = ActionDTypeWrapper(env, np.float32)\n")
patch("replay_buffer.py",
      "    random.seed(seed)\n",
      "    random.seed(int(seed))  # harness patch: Python >= 3.11 refuses numpy integers\n")
patch("cfgs/config.yaml", "  - override hydra/launcher: submitit_local\n", "")
cfg = (root / "cfgs/config.yaml").read_text()
start = cfg.index("  launcher:\n")
end = cfg.index("submitit_folder:", start)
end = cfg.index("\n", end) + 1
(root / "cfgs/config.yaml").write_text(cfg[:start] + cfg[end:])
patch("train.py",
      "torch.backends.cudnn.benchmark = True\n",
      "torch.backends.cudnn.benchmark = True\n"
      "# harness patch: the precision stated, and set by DRQV2_PRECISION (fp32 | tf32; unset: PyTorch's defaults)\n"
      "if os.environ.get('DRQV2_PRECISION'):\n"
      "    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = os.environ['DRQV2_PRECISION'] == 'tf32'\n"
      "print(f'precision: DRQV2_PRECISION={os.environ.get(\"DRQV2_PRECISION\", \"unset\")} '\n"
      "      f'matmul_tf32={torch.backends.cuda.matmul.allow_tf32} cudnn_tf32={torch.backends.cudnn.allow_tf32} '\n"
      "      f'cudnn_benchmark={torch.backends.cudnn.benchmark} torch={torch.__version__}', flush=True)\n")
patch("train.py",
      "            payload = torch.load(f)\n",
      "            payload = torch.load(f, weights_only=False)  # harness patch: torch >= 2.6 loads weights only by default\n")
PY
(cd "$STAGE" && diff -ru pristine "$OLDPWD/$DEST" | sed "s#$OLDPWD/##" > "$OLDPWD/$DEST/harness.patch") || true
echo "drqv2 @$COMMIT from $got; harness patch: $(grep -c '^+[^+]' "$DEST/harness.patch") lines added, $(grep -c '^-[^-]' "$DEST/harness.patch") removed" |
    tee "$DEST/SOURCE"

# ---- the Python packages the GPU image lacks ------------------------------------------------
rm -rf "$WHEELS"
mkdir -p "$WHEELS"
$PIP download --disable-pip-version-check -q --no-deps --only-binary=:all: -d "$WHEELS" \
    hydra-core==1.3.2 omegaconf==2.3.0 termcolor==2.4.0
# antlr4-python3-runtime 4.9.3 (omegaconf's parser runtime) is a source distribution only.
$PIP wheel --disable-pip-version-check -q --no-deps -w "$WHEELS" antlr4-python3-runtime==4.9.3
ls "$WHEELS"
du -sh .gpu-carry/drqv2 "$WHEELS"
