"""Study 2's pre-trained encoders, committed: `lfs export --encoder-only` of each run's
checkpoint (the conv encoder f, 124 KB; the runs' own `encoder.safetensors` also hold the
projector, 20 MB, and stay in runs/). Checks that each committed file holds exactly the
`encoder.*` tensors of the run's export, bit for bit, where the run folder still exists, and
prints the sha256 of both files (the full export's is the one the SAC cells record, as in
../encoders.tsv).

    .venv/bin/python results/study-2/encoders/check.py [runs/study-2]    # needs numpy
"""
import hashlib
import pathlib
import sys

here = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(here.parents[2] / "eval"))
from load_encoder_numpy import read_safetensors  # noqa: E402

runs = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "runs/study-2")
recorded = dict(line.split("\t") for line in (here.parent / "encoders.tsv").read_text().split("\n") if line)
failed = 0
for small in sorted(here.glob("*.safetensors")):
    run = small.stem
    sha_small = hashlib.sha256(small.read_bytes()).hexdigest()
    full = runs / run / "encoder.safetensors"
    if not full.exists():
        print(f"{run}: {sha_small} (committed); no {full} to compare with; encoders.tsv: {recorded.get(run, '?')}")
        continue
    sha_full = hashlib.sha256(full.read_bytes()).hexdigest()
    a, _ = read_safetensors(full)
    b, meta = read_safetensors(small)
    conv = sorted(n for n in a if n.startswith("encoder."))
    same = sorted(b) == conv and all((a[n] == b[n]).all() and a[n].shape == b[n].shape for n in conv)
    matches_tsv = recorded.get(run) == sha_full
    print(f"{run}: {sha_small} (committed) {'=' if same else '!='} conv tensors of {sha_full} (full export; "
          f"{'as' if matches_tsv else 'NOT as'} in encoders.tsv)")
    failed += not (same and matches_tsv)
sys.exit(1 if failed else 0)
