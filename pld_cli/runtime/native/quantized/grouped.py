"""int8 weights in groups of 32 inputs, each group with a float32 scale and offset, multiplied by
pld's C kernel (runtime/clib/csrc/grouped_int8.c), in whichever variant this CPU runs.

Most checkpoints run on a CPU are already quantized in groups of 32, which torch's int8 kernel (one
scale per output row) holds poorly; here each group takes the closer of two grids: symmetric
(Q8_0's own layout, held exactly) or minimum to maximum in 255 steps (Q4_1's 16 levels held to
float32 rounding). The kernel computes each row apart in a fixed order, so rows stand alone by
construction; its float work is per group of 32 inputs and 16 outputs, so prefills run it too
(on AVX-512 VNNI faster than float32's matmul: docs/design-measurements.md). A weight is
scale * u + offset for its unsigned byte u; the inputs keep 16 bits per group.
"""

from __future__ import annotations

from collections.abc import Iterator

import torch

from pld_cli.errors import Unsupported
from pld_cli.runtime.clib import library
from pld_cli.runtime.native.quantized.matrices import RowKernel, slabs

GROUP = 32
BLOCK = 16  # outputs the kernel computes at once: its layout (grouped_int8.c)
KERNEL = "grouped_int8_mm"


def available() -> bool:
    """Whether the kernel is here: some variant of pld's C library built at install and run by
    this CPU."""
    return library.kernel(KERNEL) is not None


class GroupedInt8Matrix(RowKernel):
    """An [out, in] matrix as bytes u with a float32 scale and offset per GROUP inputs: a weight
    is scale * u + offset. Kept as the kernel reads it: outputs in blocks of BLOCK (the last one
    narrower where out is not a multiple), each block's bytes [in / 4, width, 4] (four inputs of
    every output in one 64-byte load), its scales and offsets [in / GROUP, width]; so the values
    are [out, in] and the scales [out, in / GROUP] in size, in that order."""

    def __init__(self, weight: torch.Tensor) -> None:
        values = torch.empty(weight.shape, dtype=torch.uint8, device=weight.device)
        scales = torch.empty(weight.shape[0], weight.shape[1] // GROUP, device=weight.device)
        offsets = torch.empty_like(scales)
        for rows, groups in grouped_slabs(weight, "int8 groups"):
            q, scales[rows], offset = closer(symmetric(groups), spanning(groups), groups)
            values[rows] = (q + 128).flatten(1).to(torch.uint8)
            offsets[rows] = offset - 128 * scales[rows]  # of u = q + 128, not of q
        self.values = blocked(values.unflatten(1, (-1, 4)))  # [out, in] in the kernel's order
        self.group_scales = blocked(scales[..., None])
        self.group_offsets = blocked(offsets[..., None])
        self.device, self.dtype = weight.device, weight.dtype  # what embedding rows come back as

    def product(self, x: torch.Tensor) -> torch.Tensor:
        kernel = library.kernel(KERNEL)
        if kernel is None:
            raise Unsupported(f"int8 groups need pld's C kernel: {library.unavailable()}")
        rows = x.to(torch.float32).contiguous()
        out = torch.empty(rows.shape[0], self.shape[0], dtype=torch.float32)
        code = kernel(
            rows.data_ptr(),
            rows.shape[0],
            self.values.data_ptr(),
            self.group_scales.data_ptr(),
            self.group_offsets.data_ptr(),
            *self.shape,
            out.data_ptr(),
        )
        if code != 0:
            raise MemoryError("int8 kernel: no memory for its input")
        return out.to(x.dtype)

    @property
    def shape(self) -> tuple[int, int]:
        return tuple(self.values.shape)

    @property
    def nbytes(self) -> int:
        return self.values.nbytes + self.group_scales.nbytes + self.group_offsets.nbytes

    def __getitem__(self, rows: torch.Tensor) -> torch.Tensor:
        """Rows of the matrix in its source's dtype [n, in]: the embedding lookup of a tied head."""
        return self.dequantized(rows).to(self.dtype)

    def dequantized(self, rows: slice | torch.Tensor = slice(None)) -> torch.Tensor:
        """Rows of the matrix in float32 [*rows' shape, in]."""
        if isinstance(rows, slice):  # an embedding lookup's ids are already a tensor
            rows = torch.arange(self.shape[0])[rows]
        values = self.values.flatten()[kernel_order(rows, self.values.shape, 4)].float()
        scales = self.group_scales.flatten()[kernel_order(rows, self.group_scales.shape, 1)]
        offsets = self.group_offsets.flatten()[kernel_order(rows, self.group_offsets.shape, 1)]
        groups = values.unflatten(-1, (-1, GROUP)) * scales[..., None] + offsets[..., None]
        return groups.flatten(-2)


def blocked(matrix: torch.Tensor) -> torch.Tensor:
    """[out, n, k] in the kernel's order: per block of BLOCK outputs (the last narrower), [n,
    width, k]; returned as [out, n * k]."""
    blocks = [part.transpose(0, 1).flatten() for part in matrix.split(BLOCK)]
    return torch.cat(blocks).view(matrix.shape[0], -1)


def kernel_order(rows: torch.Tensor, shape: torch.Size, k: int) -> torch.Tensor:
    """Where each element of `rows` (as [*rows, n * k]) sits in a matrix `blocked` gave."""
    outputs, columns = shape
    block, lane = rows // BLOCK, rows % BLOCK
    width = (outputs - block * BLOCK).clamp(max=BLOCK)[..., None]
    column = torch.arange(columns)
    start = (block * BLOCK * columns)[..., None]
    return start + (column // k) * width * k + lane[..., None] * k + column % k


def grouped_slabs(weight: torch.Tensor, what: str) -> Iterator[tuple[slice, torch.Tensor]]:
    """A matrix [out, in] a slab of rows at a time, each as float32 groups [n, in / GROUP, GROUP];
    Unsupported (naming `what`) where the inputs do not come in whole groups."""
    inputs = weight.shape[1]
    if inputs % GROUP:
        raise Unsupported(f"{what} need input sizes divisible by {GROUP}, not {inputs}")
    for rows in slabs(weight):
        yield rows, weight[rows].float().reshape(-1, inputs // GROUP, GROUP)


# Of groups [n, g, GROUP]: values q in [-128, 127] (float), scales and offsets [n, g]; a weight is
# scale * q + offset.
Grid = tuple[torch.Tensor, torch.Tensor, torch.Tensor]


def symmetric(groups: torch.Tensor) -> Grid:
    """Q8_0's grid: steps of the largest |w| / 127 around zero."""
    scales = groups.abs().amax(-1).clamp(min=1e-30) / 127
    values = torch.round(groups / scales[..., None]).clamp_(-127, 127)
    return values, scales, torch.zeros_like(scales)


def spanning(groups: torch.Tensor) -> Grid:
    """255 steps from the group's minimum to its maximum."""
    low, high = groups.amin(-1), groups.amax(-1)
    scales = ((high - low) / 255).clamp(min=1e-30)
    values = torch.round((groups - low[..., None]) / scales[..., None]).clamp_(0, 255) - 128
    return values, scales, low + 128 * scales


def closer(first: Grid, second: Grid, groups: torch.Tensor) -> Grid:
    """Per group, the grid whose values are nearer the weights (the first on a tie)."""

    def error(grid: Grid) -> torch.Tensor:
        values, scales, offsets = grid
        weight = values * scales[..., None] + offsets[..., None]
        return (weight - groups).pow(2).sum(-1)

    second_wins = error(second) < error(first)  # [n, g]
    values = torch.where(second_wins[..., None], second[0], first[0])
    scales = torch.where(second_wins, second[1], first[1])
    return values, scales, torch.where(second_wins, second[2], first[2])
