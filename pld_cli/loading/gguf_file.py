"""A GGUF file's header, read in one pass: its scalar metadata and where each tensor's bytes lie
in the memory-mapped file.

gguf-py's `GGUFReader` builds a numpy view of every metadata value, the tokenizer's vocabulary
of tens of thousands of strings included, which took about 9 s per open for the default model;
pld needs three scalars and the tensor table, so this reader steps over the arrays and keeps only
those (the layout: ggml's docs/gguf.md).
"""

from __future__ import annotations

import mmap
import struct
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType

# Fixed-size value types by their GGUF number: struct format
SCALARS = {
    0: "B",
    1: "b",
    2: "H",
    3: "h",
    4: "I",
    5: "i",
    6: "f",
    7: "?",
    10: "Q",
    11: "q",
    12: "d",
}
STRING, ARRAY = 8, 9
ALIGNMENT = 32  # where general.alignment does not say


@dataclass
class Tensor:
    name: str
    shape: tuple[int, ...]  # ggml's order: the row length first
    type: GGMLQuantizationType
    data: np.ndarray  # [rows, bytes per row] of the mapped file (floats: [rows, row length])
    start: int  # where its bytes lie in the file


class GGUFFile:
    """The header of the GGUF at `path`: `metadata` (scalars and strings by key) and `tensors`
    (by name), each tensor's data a view of the mapped file."""

    def __init__(self, path: Path) -> None:
        with open(path, "rb") as file:
            self.map = mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ)
        self.mapped = np.frombuffer(self.map, dtype=np.uint8)
        self.view, self.at = memoryview(self.map), 0
        if bytes(self.view[:4]) != b"GGUF":
            raise ValueError("not a GGUF file")
        self.at = 8  # the magic and the version
        tensor_count, kv_count = self.read("QQ")
        self.metadata = {}
        for _ in range(kv_count):
            key = self.string()
            value = self.value(self.read("I")[0])
            if value is not None:
                self.metadata[key] = value
        infos = [self.tensor_info() for _ in range(tensor_count)]
        alignment = int(self.metadata.get("general.alignment", ALIGNMENT))
        start = -(-self.at // alignment) * alignment
        self.tensors = {name: self.tensor(name, *info, start) for name, *info in infos}

    @staticmethod
    def opened(path: Path) -> GGUFFile:
        """The file's header, read once per version of the file (a load asks for it 3 times)."""
        stat = Path(path).stat()
        return _opened(Path(path).resolve(), stat.st_size, stat.st_mtime_ns)

    def read(self, fmt: str) -> tuple:
        values = struct.unpack_from("<" + fmt, self.view, self.at)
        self.at += struct.calcsize("<" + fmt)
        return values

    def string(self) -> str:
        (length,) = self.read("Q")
        self.at += length
        return bytes(self.view[self.at - length : self.at]).decode("utf-8", "replace")

    def value(self, kind: int):
        """A scalar or string value; an array is stepped over (None)."""
        if kind in SCALARS:
            return self.read(SCALARS[kind])[0]
        if kind == STRING:
            return self.string()
        if kind != ARRAY:
            raise ValueError(f"unknown GGUF value type {kind}")
        element, count = self.read("IQ")
        if element in SCALARS:
            self.at += count * struct.calcsize(SCALARS[element])
        else:
            for _ in range(count):
                self.value(element)
        return None

    def tensor_info(self) -> tuple:
        name = self.string()
        (dims,) = self.read("I")
        shape = self.read("Q" * dims)
        kind, offset = self.read("IQ")
        return name, shape, GGMLQuantizationType(kind), offset

    def tensor(self, name: str, shape: tuple, kind, offset: int, start: int) -> Tensor:
        block, size = GGML_QUANT_SIZES[kind]
        rows = int(np.prod(shape[1:]))
        row_bytes = shape[0] // block * size
        data = self.mapped[start + offset : start + offset + rows * row_bytes]
        data = data.reshape(rows, row_bytes)
        if kind is GGMLQuantizationType.F32:
            data = data.view(np.float32)
        elif kind is GGMLQuantizationType.F16:
            data = data.view(np.float16)
        return Tensor(name, tuple(shape), kind, data, start + offset)

    def release(self, tensor: Tensor) -> None:
        """Drops the tensor's pages from this process's memory once its bytes have been copied
        (a later read maps them again), so a load's peak holds pld's layout, not the file too."""
        page = mmap.PAGESIZE
        first = tensor.start // page * page
        end = tensor.start + tensor.data.nbytes
        if hasattr(mmap, "MADV_DONTNEED"):  # Linux, macOS
            self.map.madvise(mmap.MADV_DONTNEED, first, end - first)


@lru_cache(maxsize=2)
def _opened(path: Path, size: int, mtime_ns: int) -> GGUFFile:
    return GGUFFile(path)
