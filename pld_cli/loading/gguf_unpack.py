"""GGUF tensors written by pld's C library straight from the file's blocks into a grouped
matrix's final arrays (runtime/clib/csrc/gguf_unpack.c), in the kernel's blocked, nibble-packed
order: the arrays are allocated once and each tensor's rows are decoded into their place, fused
q/k/v and gate/up parts at their own rows and in the layout that holds them all, q/k rows put
back in transformers' order as they are written. So a load makes no copy but the final one, and
no pass over the weights in numpy or torch.

The C decoders cover every type with an exact layout (gguf_blocks.LAYOUTS: Q8_0, Q4_0, Q4_1,
Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K) and give the numpy decoders' bits. gguf_blocks.py's
numpy path stays the reference the tests hold these to, and builds what the C library does not:
a fused matrix with a float part, or any matrix where the library lacks the function.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import torch
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType

from pld_cli.loading.gguf_blocks import LAYOUTS
from pld_cli.loading.gguf_file import Tensor
from pld_cli.runtime.clib import library
from pld_cli.runtime.native.quantized.grouped import GroupedMatrix

KERNEL = "gguf_unpack"
UNPACKED = frozenset(LAYOUTS)  # the types csrc/gguf_unpack.c decodes


def unpacks(types: Iterable[GGMLQuantizationType]) -> bool:
    """Whether the C library is here and decodes every one of these types."""
    return library.kernel(KERNEL) is not None and all(kind in UNPACKED for kind in types)


def unpacked(tensors: list[Tensor], orders: list[torch.Tensor | None]) -> GroupedMatrix:
    """Tensors over the same inputs as one matrix, one under the other, in the layout that holds
    them all (the smallest group, the most bits: as gguf_blocks.stacked), each tensor's rows in
    the order its entry of `orders` gives (row i: the tensor's row order[i]; None: as stored)."""
    group = min(LAYOUTS[tensor.type][0] for tensor in tensors)
    bits = max(LAYOUTS[tensor.type][1] for tensor in tensors)
    inputs = int(tensors[0].shape[0])
    if any(int(tensor.shape[0]) != inputs for tensor in tensors):
        raise ValueError(f"fused tensors of different inputs: {[t.name for t in tensors]}")
    out = sum(rows(tensor) for tensor in tensors)
    values = torch.empty(out, inputs * bits // 8, dtype=torch.uint8)
    scales, offsets = torch.empty(out, inputs // group), torch.empty(out, inputs // group)
    first = 0
    for tensor, order in zip(tensors, orders, strict=True):
        write(tensor, order, (values, scales, offsets), first, (group, bits))
        first += rows(tensor)
    return GroupedMatrix.from_blocked(values, scales, offsets, bits)


def rows(tensor: Tensor) -> int:
    return int(tensor.shape[1])


def write(
    tensor: Tensor, order: torch.Tensor | None, arrays: tuple, first: int, layout: tuple[int, int]
) -> None:
    """The tensor's blocks into `arrays` (values, scales, offsets of the whole matrix, in
    `layout`: group, bits) as its rows first.. (in `order` where given). The C function trusts
    its sizes, so they are checked here: the bytes are the shape's, the order is a permutation."""
    values, scales, offsets = arrays
    group, bits = layout
    data = np.ascontiguousarray(tensor.data)
    block, size = GGML_QUANT_SIZES[tensor.type]
    if data.nbytes != rows(tensor) * int(tensor.shape[0]) // block * size:
        raise ValueError(f"{tensor.name}: {data.nbytes} bytes for its shape {tensor.shape}")
    if order is not None:
        order = order.to(torch.int64).contiguous()
        if not torch.equal(order.sort().values, torch.arange(rows(tensor))):
            raise ValueError(f"{tensor.name}: the row order is not a permutation of its rows")
    code = library.kernel(KERNEL)(
        data.ctypes.data,
        tensor.type.value,
        rows(tensor),
        int(tensor.shape[0]),
        None if order is None else order.data_ptr(),
        values.data_ptr(),
        scales.data_ptr(),
        offsets.data_ptr(),
        values.shape[0],
        first,
        group,
        bits,
    )
    if code != 0:
        what = f"{bits} bits in groups of {group}"
        raise ValueError(f"{tensor.name} ({tensor.type.name}) cannot be written as {what}")
