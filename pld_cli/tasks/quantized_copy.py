"""The quantized copy of a checkpoint, kept in the user cache beside the converted default model.

Quantizing reads every float weight and rounds it: seconds for the default model, minutes for a
7B one. The first quantized load writes the result (runtime/quantized_state.py) to one
safetensors file, named by what it was made from: the checkpoint's files (path, size, time), the
quantization, the dtype, the format and torch's version (the int4 kernel's packing is torch's own).
A later load of the same reads it back directly. The file is written whole to a temporary name,
then renamed; a cache that cannot be written only costs the next run the quantizing again.

safetensors maps the file, and a tensor read from it sits at its offset in the file, aligned to
its element size only. torch's int8 kernel crashes on such weights (measured: a segmentation fault
from 4 rows on at 8 bytes past a 64-byte boundary, none at 0), so each tensor that is not on a
64-byte boundary is copied onto one. The copy is written with its data starting on such a
boundary (the header padded through its metadata), so the tensors whose sizes are multiples of 64
bytes, nearly all, are read in place: copied, the default model's int8 copy cost 125 MB more RSS
after loading (the mapped pages read, and the copies).
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
from pld_cli.runtime.native_model import NativeWeights
from pld_cli.runtime.quantized import head_matrix, layer_matrix
from pld_cli.runtime.quantized_state import FORMAT, flatten
from pld_cli.tasks.checkpoint import Checkpoint


def copy_path(checkpoint: Checkpoint, kind: str, dtype: torch.dtype) -> Path:
    files = sorted(set(checkpoint.files.values()))
    stamps = [(name, (checkpoint.folder / name).stat()) for name in files]
    # The layers' and head's layouts depend on the kernels built here.
    layout = f"{layer_matrix(kind).__name__}+{head_matrix().__name__}"
    made_from = [
        str(checkpoint.folder.resolve()),
        kind,
        layout,
        str(dtype),
        FORMAT,
        torch.__version__,
    ]
    made_from += [f"{name}:{stat.st_size}:{stat.st_mtime_ns}" for name, stat in stamps]
    key = hashlib.sha256("\n".join(made_from).encode()).hexdigest()[:16]
    return cache_dir() / "quantized" / f"{checkpoint.folder.name}-{kind}-{key}.safetensors"


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
