"""GGUF tensors written by pld's C library straight from the file's blocks into a grouped
matrix's final arrays (runtime/clib/csrc/gguf_unpack.c), in the kernel's blocked, nibble-packed
order: the arrays are allocated once and each tensor's rows are decoded into their place, fused
q/k/v and gate/up parts at their own rows (in parts where their layouts differ), q/k rows put
back in transformers' order as they are written. So a load makes no copy but the final one, and
no pass over the weights in numpy or torch.

The C decoders cover every type with an exact layout (gguf_blocks.LAYOUTS: Q8_0, Q4_0, Q4_1,
Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K) and give the numpy decoders' bits. gguf_blocks.py's
numpy path stays the reference the tests hold these to, and builds what the C library does not:
a fused matrix with a float part.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from itertools import groupby

import numpy as np
import torch
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType

from pld_cli.loading.gguf_blocks import K_BLOCK, LAYOUTS
from pld_cli.loading.gguf_file import Tensor
from pld_cli.runtime.clib import library
from pld_cli.runtime.native.quantized.grouped import GroupedMatrix
from pld_cli.runtime.native.quantized.parts import GroupedParts

KERNEL = "gguf_unpack"
UNPACKED = frozenset(LAYOUTS)  # the types csrc/gguf_unpack.c decodes
Part = tuple[Tensor, torch.Tensor | None]  # a tensor and its row order (None: as stored)


def unpacks(types: Iterable[GGMLQuantizationType]) -> bool:
    """Whether the C library is here and decodes every one of these types."""
    return library.kernel(KERNEL) is not None and all(kind in UNPACKED for kind in types)


def unpacked(matrices: list[list[Part]]) -> list[GroupedMatrix | GroupedParts]:
    """Matrices, each of tensors over the same inputs one under the other, each tensor's rows in
    its order (row i: the tensor's row order[i]; None: as stored): consecutive tensors of one
    layout in one grouped matrix, a matrix of several layouts in parts (a Q4_K_M q/k/v: Q4_K q
    and k as nibbles, a Q6_K v as bytes; not all in the one layout that holds them all, which
    doubled q's and k's bytes). Written in one call of the C library, one parallel region (a
    layer's matrices at once: a region ends waiting for every thread, which a busy machine's
    shared cores make slow)."""
    built, jobs = [], []
    for parts in matrices:
        runs = [list(run) for _, run in groupby(parts, key=lambda part: LAYOUTS[part[0].type])]
        matrix_parts = []
        for run in runs:
            matrix = allocated([tensor for tensor, _ in run])
            matrix_parts.append(matrix)
            first = 0
            for tensor, order in run:
                jobs.append(Job(tensor, order, matrix, first))
                first += rows(tensor)
        built.append(matrix_parts[0] if len(matrix_parts) == 1 else GroupedParts(matrix_parts))
    write(jobs)
    return built


@dataclass
class Job:
    """A tensor to write into `matrix`, as its rows first.. (in `order` where given)."""

    tensor: Tensor
    order: torch.Tensor | None
    matrix: GroupedMatrix
    first: int


def allocated(tensors: list[Tensor]) -> GroupedMatrix:
    """The (unwritten) matrix that holds these tensors one under the other; where all are
    K-quants, with their scales in the file's form (a factor per super-block, a byte per group)."""
    group = min(LAYOUTS[tensor.type][0] for tensor in tensors)
    bits = max(LAYOUTS[tensor.type][1] for tensor in tensors)
    inputs = int(tensors[0].shape[0])
    if any(int(tensor.shape[0]) != inputs for tensor in tensors):
        raise ValueError(f"fused tensors of different inputs: {[t.name for t in tensors]}")
    out, groups = sum(rows(tensor) for tensor in tensors), inputs // group
    values = torch.empty(out, inputs * bits // 8, dtype=torch.uint8)
    if not all(GGML_QUANT_SIZES[tensor.type][0] == K_BLOCK for tensor in tensors):
        scales, offsets = torch.empty(out, groups), torch.empty(out, groups)
        return GroupedMatrix.from_blocked(values, scales, offsets, bits)
    factors = out, inputs // K_BLOCK
    subs = torch.empty(out, groups, dtype=torch.int8), torch.empty(out, groups, dtype=torch.int8)
    return GroupedMatrix.from_blocked(
        values, torch.empty(factors), torch.empty(factors), bits, subs=subs
    )


def rows(tensor: Tensor) -> int:
    return int(tensor.shape[1])


def write(jobs: list[Job]) -> None:
    """The jobs' tensors into their matrices, in one call of the C function, which takes each as
    a row of int64 fields (csrc/gguf_unpack.c's JOB_ order) and trusts their sizes: so they are
    checked here (the bytes are the shape's, the order is a permutation)."""
    kept = [(checked_data(job.tensor), checked_order(job.tensor, job.order)) for job in jobs]
    table = torch.tensor(
        [fields(job, data, order) for job, (data, order) in zip(jobs, kept, strict=True)],
        dtype=torch.int64,
    )
    if library.kernel(KERNEL)(table.data_ptr(), len(jobs)) != 0:
        refused = ", ".join(
            f"{j.tensor.name} ({j.tensor.type.name}) as {j.matrix.bits} bits in groups of "
            f"{j.matrix.group}"
            for j in jobs
        )
        raise ValueError(f"pld's C library cannot write {refused}")


def fields(job: Job, data: np.ndarray, order: torch.Tensor | None) -> list[int]:
    """A job as the C function's row: the tensor (its bytes, type, rows, inputs, row order or
    0), then the matrix (values, scales, offsets, sub-scales and sub-offsets or 0, rows), the
    first row, group, bits and groups per factor."""
    matrix = job.matrix
    subs = (matrix.sub_scales, matrix.sub_offsets)
    return [
        data.ctypes.data,
        job.tensor.type.value,
        rows(job.tensor),
        int(job.tensor.shape[0]),
        0 if order is None else order.data_ptr(),
        matrix.values.data_ptr(),
        matrix.group_scales.data_ptr(),
        matrix.group_offsets.data_ptr(),
        *(0 if sub is None else sub.data_ptr() for sub in subs),
        matrix.shape[0],
        job.first,
        matrix.group,
        matrix.bits,
        matrix.super,
    ]


def checked_data(tensor: Tensor) -> np.ndarray:
    data = np.ascontiguousarray(tensor.data)
    block, size = GGML_QUANT_SIZES[tensor.type]
    if data.nbytes != rows(tensor) * int(tensor.shape[0]) // block * size:
        raise ValueError(f"{tensor.name}: {data.nbytes} bytes for its shape {tensor.shape}")
    return data


def checked_order(tensor: Tensor, order: torch.Tensor | None) -> torch.Tensor | None:
    if order is None:
        return None
    order = order.to(torch.int64).contiguous()
    if not torch.equal(order.sort().values, torch.arange(rows(tensor))):
        raise ValueError(f"{tensor.name}: the row order is not a permutation of its rows")
    return order
