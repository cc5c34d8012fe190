"""Reproduce an `lfs export` encoder's features with a plain numpy forward pass (float64).

    .venv/bin/python python/load_encoder_numpy.py runs/tiny/encoder.safetensors
    # -> checks runs/tiny/encoder.example.safetensors, exit 1 on mismatch

An independent check of the exported weights and names that needs only numpy (CI has no
torch): the forward pass is written from the PyTorch module of docs/pytorch.md, not from the
Rust code. Conv2d(kernel 3, no padding; stride 2 for the first layer, 1 after) + ReLU per layer,
input / 255, flatten in (channel, row, column) order; projector = Linear (x @ W.T + b).
"""
import json
import struct
import sys

import numpy as np

DTYPES = {"F32": np.float32, "U8": np.uint8, "F64": np.float64, "I64": np.int64}


def read_safetensors(path, export=False):
    """Returns ({name: array}, metadata) from the format's 8-byte header length + JSON header. With
    `export`, a file whose `lfs.kind` is not "export" raises ValueError naming it."""
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
        tensors[name] = np.frombuffer(data[start:end], dtype=DTYPES[info["dtype"]]).reshape(info["shape"])
    return tensors, meta


def conv2d(x, weight, bias, stride):
    """PyTorch's Conv2d without padding. x (B, C, H, W), weight (O, C, k, k) -> (B, O, H', W')."""
    k = weight.shape[-1]
    windows = np.lib.stride_tricks.sliding_window_view(x, (k, k), axis=(2, 3))  # (B, C, H-k+1, W-k+1, k, k)
    windows = windows[:, :, ::stride, ::stride]  # (B, C, H', W', k, k)
    out = np.einsum("bchwij,ocij->bohw", windows, weight, optimize=True)
    return out + bias[None, :, None, None]


def features(tensors, arch, obs):
    """The 39200-d conv features of docs/pytorch.md's `Encoder.forward`. obs (B, 9, 84, 84) 0..255."""
    h = obs.astype(np.float64) / 255.0
    for layer in range(arch["num_layers"]):
        name = f"encoder.convnet.{2 * layer}"
        w = tensors[f"{name}.weight"].astype(np.float64)
        b = tensors[f"{name}.bias"].astype(np.float64)
        h = np.maximum(conv2d(h, w, b, 2 if layer == 0 else 1), 0.0)
    return h.reshape(h.shape[0], -1)  # (B, C·H'·W'), channel-major like torch's flatten(1)


def main(path):
    try:
        tensors, meta = read_safetensors(path, export=True)
    except ValueError as e:
        print(e)
        return 1
    arch = json.loads(meta["lfs.architecture"])
    expected = {f"encoder.convnet.{2 * i}.{p}" for i in range(arch["num_layers"]) for p in ("weight", "bias")}
    projector = arch.get("projector") is not None  # `lfs export --encoder-only` leaves it out
    if projector:
        expected |= {"projector.weight", "projector.bias"}
    if set(tensors) != expected:
        print(f"MISMATCH: tensor names {sorted(tensors)} != {sorted(expected)}")
        return 1
    example, _ = read_safetensors(path[: -len(".safetensors")] + ".example.safetensors")
    h = features(tensors, arch, example["obs"])
    if h.shape[1] != arch["repr_dim"]:
        print(f"MISMATCH: features {h.shape} vs architecture {arch}")
        return 1
    dh = np.abs(h - example["features"]).max()
    scale = np.abs(example["features"]).max()
    dz = 0.0
    if projector:
        z = h @ tensors["projector.weight"].astype(np.float64).T + tensors["projector.bias"]
        if z.shape[1] != arch["latent_dim"]:
            print(f"MISMATCH: projection {z.shape} vs architecture {arch}")
            return 1
        dz = np.abs(z - example["projection"]).max()
        said = f"max |projection - rust| = {dz:.3e}"
    else:
        said = "no projector in this export"
    print(f"max |features - rust| = {dh:.3e} (max |features| {scale:.3e}); {said}")
    # Rust computes in float32 (summation order differs): close, not bitwise.
    ok = dh <= 1e-4 * max(1.0, scale) and dz <= 1e-3
    print("OK" if ok else "MISMATCH")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
