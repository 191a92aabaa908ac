"""int8 weights in groups of 32 inputs, each group with a float32 scale and offset, multiplied by
pld's VNNI kernel (csrc/grouped_int8.c) where it is built on this machine.

torch's int8 kernel takes one scale per output row and bfloat16 inputs. Most checkpoints people
run on a CPU are already quantized in groups of 32, and a grid per row cannot hold their levels:
on the default model (Q4_1 layers: a scale and a minimum per 32) int8 per row agreed with
float32 on 98.0% of next tokens. Here each group takes whichever of two grids is closer to it:
symmetric (scale = largest |w| / 127, offset 0: Q8_0's own layout, held exactly), or from its
minimum to its maximum in 255 steps (a Q4_1 group's 16 levels fall on every 17th step, so it is
held to float32 rounding). The kernel's inputs keep 16 bits per group.

The kernel computes each row apart in a fixed order, so its rows stand alone by construction (and
`check_rows` still tests that at load). Values are kept as unsigned bytes u, the form the
instruction takes: a weight is scale * u + offset.
"""

from __future__ import annotations

from collections.abc import Iterator

import torch
import torch.nn.functional as F

from pld_cli.errors import Unsupported
from pld_cli.runtime import clib
from pld_cli.runtime.quantized_matrices import CHECKED_ROWS, RowKernel, slabs

GROUP = 32
BLOCK = 16  # outputs the kernel computes at once: its layout (csrc/grouped_int8.c)
KERNEL, DEQUANTIZE = "grouped_int8_mm", "grouped_int8_dequantize"


def available() -> bool:
    """Whether the kernel is built on this machine (x86-64 with AVX-512 VNNI, a C compiler)."""
    return clib.kernel(KERNEL) is not None


class GroupedInt8Matrix(RowKernel):
    """An [out, in] matrix as bytes u with a float32 scale and offset per GROUP inputs: a weight
    is scale * u + offset. Kept as the kernel reads it: outputs in blocks of BLOCK (the last
    padded), each block's bytes [in / 4, BLOCK, 4] (four inputs of every output in one 64-byte
    load), scales and offsets [blocks, in / GROUP, BLOCK]."""

    def __init__(self, weight: torch.Tensor) -> None:
        outputs, inputs = weight.shape
        values = torch.empty(weight.shape, dtype=torch.uint8, device=weight.device)
        scales = torch.empty(outputs, inputs // GROUP, device=weight.device)
        offsets = torch.empty_like(scales)
        for rows, groups in grouped_slabs(weight, "int8 groups"):
            q, scales[rows], offset = closer(symmetric(groups), spanning(groups), groups)
            values[rows] = (q + 128).flatten(1).to(torch.uint8)
            offsets[rows] = offset - 128 * scales[rows]  # of u = q + 128, not of q
        blocks = -(-outputs // BLOCK)
        self.size = torch.tensor([outputs, inputs])
        self.values = blocked(values, blocks).unflatten(2, (-1, 4)).transpose(1, 2).contiguous()
        self.group_scales = blocked(scales, blocks).transpose(1, 2).contiguous()
        self.group_offsets = blocked(offsets, blocks).transpose(1, 2).contiguous()
        self.device, self.dtype = weight.device, weight.dtype  # what embedding rows come back as

    def __call__(self, x: torch.Tensor, alone: bool = False) -> torch.Tensor:
        """x [m, in] @ W.T -> [m, out]. Decode and verify passes (`alone`) and passes of a few
        rows run the kernel; a prefill of more rows runs float32's matmul over the matrix
        dequantized (by the C library, then freed): the kernel's work grows with the rows, the
        matmul's is blocked. Taking the prefill's input at 8 bits per group instead (as llama.cpp
        does) matched float32's cost but left greedy outputs equal to float32's on 11 of the 20
        samples instead of 20. Prefills are the same for pld and --no-pld, so only decode and
        verify passes need the rows of a pass to stand alone."""
        if alone or x.shape[0] <= CHECKED_ROWS:
            return super().__call__(x, alone)
        weight = torch.empty(self.shape, dtype=torch.float32)
        clib.kernel(DEQUANTIZE)(
            self.values.data_ptr(), self.group_scales.data_ptr(), self.group_offsets.data_ptr(),
            *self.shape, weight.data_ptr(),
        )  # fmt: skip
        return F.linear(x, weight.to(x.dtype))

    def product(self, x: torch.Tensor) -> torch.Tensor:
        kernel = clib.kernel(KERNEL)
        if kernel is None:
            raise Unsupported(f"int8 groups need pld's C kernel: {clib.unavailable()}")
        rows = x.to(torch.float32).contiguous()
        out = torch.empty(rows.shape[0], self.shape[0], dtype=torch.float32)
        code = kernel(
            rows.data_ptr(), rows.shape[0], self.values.data_ptr(), self.group_scales.data_ptr(),
            self.group_offsets.data_ptr(), *self.shape, out.data_ptr(),
        )  # fmt: skip
        if code != 0:
            raise MemoryError("int8 kernel: no memory for its input")
        return out.to(x.dtype)

    @property
    def shape(self) -> tuple[int, int]:
        return tuple(self.size.tolist())

    @property
    def nbytes(self) -> int:
        return self.values.nbytes + self.group_scales.nbytes + self.group_offsets.nbytes

    def __getitem__(self, rows: torch.Tensor) -> torch.Tensor:
        """Rows of the matrix in its source's dtype [n, in]: the embedding lookup of a tied head."""
        return self.dequantized(rows).to(self.dtype)

    def dequantized(self, rows: slice | torch.Tensor = slice(None)) -> torch.Tensor:
        """Rows of the matrix in float32 [*rows' shape, in]."""
        rows = torch.arange(self.shape[0])[rows]
        block, lane = rows.flatten() // BLOCK, rows.flatten() % BLOCK
        values = self.values[block, :, lane].flatten(1).float()  # [n, in]
        scales, offsets = self.group_scales[block, :, lane], self.group_offsets[block, :, lane]
        groups = values.unflatten(1, (-1, GROUP)) * scales[..., None] + offsets[..., None]
        return groups.reshape(*rows.shape, -1)


def blocked(rows: torch.Tensor, blocks: int) -> torch.Tensor:
    """[out, n] as [blocks, BLOCK, n], the last block padded with zeros."""
    padded = rows.new_zeros(blocks * BLOCK, rows.shape[1])
    padded[: rows.shape[0]] = rows
    return padded.unflatten(0, (blocks, BLOCK))


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
