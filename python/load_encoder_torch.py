"""Load an `lfs export` encoder in PyTorch and check it against its example file.

    python python/load_encoder_torch.py runs/tiny/encoder.safetensors
    # -> checks runs/tiny/encoder.example.safetensors, exit 1 on mismatch

Needs torch and safetensors (or only torch >= 2.x plus the tiny reader below). The module is
the ~20 lines documented in docs/pytorch.md.
"""
import json
import struct
import sys

import torch
import torch.nn as nn


class Encoder(nn.Module):
    """LFS conv encoder f + projector g (none for `lfs export --encoder-only`: latent_dim=None);
    state_dict names match the export."""

    def __init__(self, in_channels=9, num_filters=32, num_layers=4, repr_dim=39200, latent_dim=128):
        super().__init__()
        layers = [nn.Conv2d(in_channels, num_filters, 3, stride=2), nn.ReLU()]
        for _ in range(num_layers - 1):
            layers += [nn.Conv2d(num_filters, num_filters, 3, stride=1), nn.ReLU()]
        self.encoder = nn.Module()
        self.encoder.convnet = nn.Sequential(*layers)
        self.projector = nn.Linear(repr_dim, latent_dim) if latent_dim else None

    def forward(self, obs):  # obs: (B, 9, 84, 84), oldest frame first, values 0..255
        h = self.encoder.convnet(obs.float() / 255.0)
        return h.flatten(1)  # (B, 39200) conv features, what the frozen SAC consumes

    def project(self, obs):
        return self.projector(self.forward(obs))  # (B, 128)


def read_safetensors(path, export=False):
    """Minimal reader (no `safetensors` package needed): returns (tensors, metadata). With `export`,
    a file whose `lfs.kind` is not "export" raises ValueError naming it."""
    dtypes = {"F32": torch.float32, "U8": torch.uint8, "F64": torch.float64, "I64": torch.int64}
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        meta = header.pop("__metadata__", {})
        if export and meta.get("lfs.kind") != "export":  # a training checkpoint, say: refused before its data is read
            raise ValueError(f"{path}: not an encoder written by `lfs export` (its lfs.kind is {meta.get('lfs.kind')!r}); load the file `lfs export` wrote")
        data = f.read()
    tensors = {}
    for name, info in header.items():
        start, end = info["data_offsets"]
        buf = bytearray(data[start:end])
        tensors[name] = torch.frombuffer(buf, dtype=dtypes[info["dtype"]]).reshape(info["shape"]).clone()
    return tensors, meta


def load_encoder(path):
    tensors, meta = read_safetensors(path, export=True)
    arch = json.loads(meta["lfs.architecture"])
    latent_dim = arch["latent_dim"] if arch.get("projector") is not None else None
    model = Encoder(arch["in_channels"], arch["num_filters"], arch["num_layers"], arch["repr_dim"], latent_dim)
    model.load_state_dict(tensors, strict=True)
    return model.eval(), meta


def main(path):
    try:
        model, _ = load_encoder(path)
    except ValueError as e:
        print(e)
        return 1
    example = path[: -len(".safetensors")] + ".example.safetensors"
    ex, _ = read_safetensors(example)
    with torch.no_grad():
        h = model(ex["obs"])
        dh = (h - ex["features"]).abs().max().item()
        dz = 0.0
        if model.projector is not None:
            dz = (model.project(ex["obs"]) - ex["projection"]).abs().max().item()
            said = f"max |projection - rust| = {dz:.3e}"
        else:
            said = "no projector in this export"
    scale = ex["features"].abs().max().item()
    print(f"max |features - rust| = {dh:.3e} (max |features| {scale:.3e}); {said}")
    ok = dh <= 1e-4 * max(1.0, scale) and dz <= 1e-3
    print("OK" if ok else "MISMATCH")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
