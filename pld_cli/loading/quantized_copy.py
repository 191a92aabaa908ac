"""The quantized copy of a checkpoint, kept in the user cache beside the converted default model.

Quantizing reads and rounds every float weight, which takes a while, so the first quantized
load writes the result (runtime/native/quantized/state.py) to one safetensors file named by what
it was made from (the checkpoint's files, the quantization, dtype, format and torch's version:
the int4 packing is torch's own), whole to a temporary name, then renamed; later loads read it.
torch's int8 kernel crashed on weights off a 64-byte boundary, where safetensors may map a tensor,
so the file's data starts on one and a tensor off one is copied onto one: nearly all are read in
place, which costs less memory than copies (docs/design-measurements.md).
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from pld_cli.cache import cache_dir
from pld_cli.loading.checkpoint import Checkpoint
from pld_cli.runtime.native.model import NativeWeights
from pld_cli.runtime.native.quantized.scheme import Scheme
from pld_cli.runtime.native.quantized.state import FORMAT, flatten


def copy_path(checkpoint: Checkpoint, scheme: Scheme, dtype: torch.dtype) -> Path:
    files = sorted(set(checkpoint.files.values()))
    stamps = [(name, (checkpoint.folder / name).stat()) for name in files]
    scheme = Scheme(scheme)
    made_from = [
        str(checkpoint.folder.resolve()),
        str(scheme),
        str(dtype),
        FORMAT,
        torch.__version__,
    ]
    made_from += [f"{name}:{stat.st_size}:{stat.st_mtime_ns}" for name, stat in stamps]
    key = hashlib.sha256("\n".join(made_from).encode()).hexdigest()[:16]
    return cache_dir() / "quantized" / f"{checkpoint.folder.name}-{scheme}-{key}.safetensors"


ALIGNMENT = 64  # bytes: a cache line, and the widest vector load (AVX-512)


def load_copy(path: Path) -> dict[str, torch.Tensor] | None:
    """The stored tensors, each on an ALIGNMENT boundary; None where no copy can be read."""
    try:
        state = load_file(path) if path.is_file() else None
    except (OSError, SafetensorError):  # a damaged copy is made again
        return None
    return None if state is None else {name: aligned(t) for name, t in state.items()}


def aligned(tensor: torch.Tensor) -> torch.Tensor:
    """The tensor itself where it starts on an ALIGNMENT boundary, else a copy that does (torch's
    allocator aligns what it allocates)."""
    return tensor if tensor.data_ptr() % ALIGNMENT == 0 else tensor.clone()


def save_aligned(tensors: dict[str, torch.Tensor], path: str) -> None:
    """A safetensors file whose data starts on an ALIGNMENT boundary: written once to learn its
    header's length, then again with the metadata padded to the boundary (twice the writing, once
    per model and quantization)."""
    save_file(tensors, path, metadata={"pad": ""})
    with open(path, "rb") as file:
        header = file.read(int.from_bytes(file.read(8), "little")).rstrip(b" ")
    padding = (-8 - len(header)) % ALIGNMENT  # 8: the header's length field
    if padding:
        save_file(tensors, path, metadata={"pad": " " * padding})


def save_copy(path: Path, weights: NativeWeights) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, staging = tempfile.mkstemp(dir=path.parent, prefix=".quantized-")
        os.close(handle)
        try:
            save_aligned({k: v.contiguous() for k, v in flatten(weights).items()}, staging)
            os.replace(staging, path)
        finally:
            Path(staging).unlink(missing_ok=True)
    except OSError:
        pass  # no cache this time; the model itself is ready
