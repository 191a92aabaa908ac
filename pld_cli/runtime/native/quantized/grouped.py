"""Weights in groups of 32 or 16 inputs, as bytes or nibbles u with a float32 scale and offset
per group, multiplied by pld's C kernel (runtime/clib/csrc/grouped.c), in whichever variant this
CPU runs.

A float checkpoint is quantized to bytes in groups of 32 (`GroupedMatrix.quantized`): most
checkpoints run on a CPU are already quantized in groups of 32, which torch's int8 kernel (one
scale per output row) holds poorly; here each group takes the closer of two grids: symmetric
(Q8_0's own layout, held exactly) or minimum to maximum in 255 steps (Q4_1's 16 levels held to
float32 rounding). A GGUF's own blocks map onto the layouts exactly (loading/gguf_blocks.py):
4-bit types stay nibbles, the K-quants' sub-blocks of 16 keep their own scales, held as the file
holds them (a factor per super-block, a byte per group: `sub_scales`), not as a float32 pair per
group, which cost a Q4_K weight 2 bits beside its 4. The kernel
computes each row apart in a fixed order, so rows stand alone by construction; its float work is
per group and 16 outputs, so prefills run it too (docs/design-measurements.md). A weight is
scale * u + offset for its unsigned u; the inputs are rounded to a signed byte per input and
group (docs/quantized.md, "Inputs as bytes").
"""

from __future__ import annotations

import ctypes
from collections.abc import Iterator

import torch

from pld_cli.errors import Unsupported
from pld_cli.runtime.clib import library
from pld_cli.runtime.clib.tables import Matrix, Scales
from pld_cli.runtime.native.quantized.matrices import RowKernel, slabs

GROUP = 32  # inputs per scale where pld quantizes a float matrix itself
GROUPS = (32, 16)  # the group sizes the kernel takes
BITS = (8, 4)  # bits per weight the kernel takes: bytes, or nibbles two to a byte
BLOCK = 16  # outputs the kernel computes at once: its layout (grouped.c)
KERNEL = "grouped_mm"


def available() -> bool:
    """Whether the kernel is here: some variant of pld's C library built at install and run by
    this CPU."""
    return library.kernel(KERNEL) is not None


class GroupedMatrix(RowKernel):
    """An [out, in] matrix as unsigned u of `bits` (8 or 4) with a float32 scale and offset per
    `group` (32 or 16) inputs: a weight is scale * u + offset. Kept as the kernel reads it:
    outputs in blocks of BLOCK (the last one narrower where out is not a multiple), each block's
    u [in / 4, width, 4] as bytes (four inputs of every output in one 64-byte load) or [in / 8,
    width, 4] as bytes of two nibbles (inputs 0..3 low, 4..7 high), its scales and offsets [in /
    group, width]; so the values are [out, in * bits / 8] and the scales [out, in / group] in
    size, in that order. `layout` holds (group, bits) as a tensor, so a stored copy keeps it.

    A GGUF's K-quants keep their scales in the file's form: `sub_scales` and `sub_offsets` int8
    [out, in / group], and `group_scales` and `group_offsets` one float32 factor per super-block
    of `super` groups [out, in / group / super], a group's scale being factor * sub_scale (the
    same float32 product as the file's decoders form). Both None: the scales are per group."""

    sub_scales: torch.Tensor | None = None  # a class default: a stored copy has neither
    sub_offsets: torch.Tensor | None = None

    def __init__(
        self,
        values: torch.Tensor,
        scales: torch.Tensor,
        offsets: torch.Tensor,
        bits: int = 8,
        dtype: torch.dtype = torch.float32,
    ) -> None:
        """From u [out, in] (uint8, below 2 ** bits) and float32 scales and offsets [out, in /
        group], in row order; `dtype`: what embedding rows come back as."""
        group = values.shape[1] // scales.shape[1]
        if group not in GROUPS or bits not in BITS or values.shape[1] % group:
            raise Unsupported(f"no grouped layout of {bits} bits in groups of {group}")
        packed = values.unflatten(1, (-1, 4))
        if bits == 4:
            pairs = values.unflatten(1, (-1, 2, 4))
            packed = pairs[:, :, 0] | (pairs[:, :, 1] << 4)
        self.values = blocked(packed)
        self.group_scales = blocked(scales.float()[..., None])
        self.group_offsets = blocked(offsets.float()[..., None])
        self.layout = torch.tensor([group, bits])
        self.device, self.dtype = values.device, dtype

    @classmethod
    def from_blocked(
        cls,
        values: torch.Tensor,
        scales: torch.Tensor,
        offsets: torch.Tensor,
        bits: int,
        dtype: torch.dtype = torch.float32,
        subs: tuple[torch.Tensor, torch.Tensor] | None = None,
    ) -> GroupedMatrix:
        """From arrays already in the kernel's order (`blocked`'s: values [out, in * bits / 8],
        scales and offsets [out, in / group], or factors [out, in / group / super] and `subs`, the
        int8 sub_scales and sub_offsets [out, in / group]), taken as they are: a GGUF's blocks
        are written straight into them at load (loading/gguf_unpack.py), so nothing is copied a
        second time."""
        groups = scales.shape[1] if subs is None else subs[0].shape[1]
        group = values.shape[1] * 8 // bits // groups
        whole = subs is None or (subs[0].shape == subs[1].shape and groups % scales.shape[1] == 0)
        if group not in GROUPS or bits not in BITS or scales.shape != offsets.shape or not whole:
            raise Unsupported(f"no grouped layout of {bits} bits in groups of {group}")
        matrix = cls.__new__(cls)
        matrix.values, matrix.group_scales, matrix.group_offsets = values, scales, offsets
        if subs is not None:
            matrix.sub_scales, matrix.sub_offsets = subs
        matrix.layout = torch.tensor([group, bits])
        matrix.device, matrix.dtype = values.device, dtype
        return matrix

    @classmethod
    def quantized(cls, weight: torch.Tensor) -> GroupedMatrix:
        """A float matrix [out, in] as bytes in groups of GROUP, each on the closer grid."""
        values = torch.empty(weight.shape, dtype=torch.uint8, device=weight.device)
        scales = torch.empty(weight.shape[0], weight.shape[1] // GROUP, device=weight.device)
        offsets = torch.empty_like(scales)
        for rows, groups in grouped_slabs(weight, "int8 groups"):
            q, scales[rows], offset = closer(symmetric(groups), spanning(groups), groups)
            values[rows] = (q + 128).flatten(1).to(torch.uint8)
            offsets[rows] = offset - 128 * scales[rows]  # of u = q + 128, not of q
        return cls(values, scales, offsets, 8, weight.dtype)

    @property
    def group(self) -> int:
        return int(self.layout[0])

    @property
    def bits(self) -> int:
        return int(self.layout[1])

    @property
    def super(self) -> int:
        """Groups per scale factor: 1 where the scales are per group."""
        if self.sub_scales is None:
            return 1
        return self.sub_scales.shape[1] // self.group_scales.shape[1]

    def table(self, bias: int | None = None) -> Matrix:
        """The matrix as the C library reads it (csrc/decoder.h), pointing into this matrix's
        arrays (kept alive by whoever holds the matrix); `bias`: its address, or None."""
        subs = (None, None) if self.sub_scales is None else (self.sub_scales, self.sub_offsets)
        scales = Scales(
            self.group_scales.data_ptr(),
            self.group_offsets.data_ptr(),
            *(None if sub is None else sub.data_ptr() for sub in subs),
            self.super,
        )
        return Matrix(
            self.values.data_ptr(), scales, bias, None, *self.shape, self.group, self.bits
        )

    def product(self, x: torch.Tensor) -> torch.Tensor:
        kernel = library.kernel(KERNEL)
        if kernel is None:
            raise Unsupported(f"int8 groups need pld's C kernel: {library.unavailable()}")
        rows = x.to(torch.float32).contiguous()
        out = torch.empty(rows.shape[0], self.shape[0], dtype=torch.float32)
        table = self.table()
        code = kernel(rows.data_ptr(), rows.shape[0], ctypes.byref(table), out.data_ptr())
        if code == library.WRONG_SIZES:
            raise ValueError(f"grouped kernel: no layout of {self.bits} bits in {self.group}s")
        if code != 0:
            raise MemoryError("grouped kernel: no memory for its input")
        return out.to(x.dtype)

    @property
    def shape(self) -> tuple[int, int]:
        return self.values.shape[0], self.values.shape[1] * 8 // self.bits

    @property
    def nbytes(self) -> int:
        return sum(t.nbytes for t in self.arrays())

    def arrays(self) -> list[torch.Tensor]:
        """Every array the matrix is held in, values first."""
        subs = [] if self.sub_scales is None else [self.sub_scales, self.sub_offsets]
        return [self.values, self.group_scales, self.group_offsets, *subs]

    def batches(self, rows: int) -> bool:
        """Any number of rows once checked: the kernel runs rows in tiles of a few, each row's
        steps its own whichever thread takes it, so a product over more rows than were checked
        only repeats the tiles `computes_rowwise` tried (the head over a -j pass's drafts of
        every document runs as one product)."""
        return self.rows_checked > 0

    def computes_rowwise(self) -> bool:
        """RowKernel's check, on the first block of outputs and the narrower last one: the kernel
        runs each block alone in the same code whatever the matrix's size, so these are all the
        paths a row can take (checking a 49152-row head whole took seconds per load)."""
        whole = (self.shape[0] // BLOCK) * BLOCK
        tail = [(whole, self.shape[0])] if 0 < whole < self.shape[0] else []
        parts = [(0, min(BLOCK, self.shape[0])), *tail]
        return all(RowKernel.computes_rowwise(self.outputs(*part)) for part in parts)

    def outputs(self, start: int, stop: int) -> GroupedMatrix:
        """Outputs start..stop-1 (start a multiple of BLOCK; stop too, or the last output) as a
        matrix sharing this one's memory: the blocks are stored one after another."""
        values, scales, offsets, *subs = (t[start:stop] for t in self.arrays())
        return GroupedMatrix.from_blocked(
            values, scales, offsets, self.bits, self.dtype, tuple(subs) or None
        )

    def __getitem__(self, rows: torch.Tensor) -> torch.Tensor:
        """Rows of the matrix in its source's dtype [n, in]: the embedding lookup of a tied head."""
        return self.dequantized(rows).to(self.dtype)

    def dequantized(self, rows: slice | torch.Tensor = slice(None)) -> torch.Tensor:
        """Rows of the matrix in float32 [*rows' shape, in]."""
        if isinstance(rows, slice):  # an embedding lookup's ids are already a tensor
            rows = torch.arange(self.shape[0])[rows]
        values = self.values.flatten()[kernel_order(rows, self.values.shape, 4)]
        if self.bits == 4:  # [..., in / 8, 4] bytes: inputs 0..3 low nibbles, 4..7 high
            quads = values.unflatten(-1, (-1, 4))
            values = torch.cat([quads & 0x0F, quads >> 4], -1).flatten(-2)
        scales, offsets = self.scales_of(rows)
        groups = values.float().unflatten(-1, (-1, self.group)) * scales[..., None]
        return (groups + offsets[..., None]).flatten(-2)

    def scales_of(self, rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Each group's scale and offset for `rows` [*rows' shape, in / group], float32, as the
        kernel forms them (a factor times the group's byte, where the matrix keeps those)."""

        def picked(array: torch.Tensor) -> torch.Tensor:
            return array.flatten()[kernel_order(rows, array.shape, 1)]

        scales, offsets = picked(self.group_scales), picked(self.group_offsets)
        if self.sub_scales is None:
            return scales, offsets
        factors = (t.repeat_interleave(self.super, -1) for t in (scales, offsets))
        subs = (picked(t).float() for t in (self.sub_scales, self.sub_offsets))
        scales, offsets = (factor * sub for factor, sub in zip(factors, subs, strict=True))
        return scales, offsets


def blocked(matrix: torch.Tensor) -> torch.Tensor:
    """[out, n, k] in the kernel's order: per block of BLOCK outputs (the last narrower), [n,
    width, k]; returned as [out, n * k]."""
    out, n, k = matrix.shape
    whole = out // BLOCK * BLOCK
    blocks = matrix[:whole].reshape(-1, BLOCK, n, k).transpose(1, 2)
    if whole == out:  # one copy, the transpose made contiguous (one block of 16 x 16 would
        return blocks.reshape(out, -1).contiguous()  # be a view, read by the kernel untransposed)
    tail = matrix[whole:].transpose(0, 1).flatten()
    return torch.cat([blocks.flatten(), tail]).view(out, -1)


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
        """The squared errors summed in input order: torch's sum takes the order its kernels
        choose, and a near tie could then go to the other grid on another CPU."""
        values, scales, offsets = grid
        squares = (values * scales[..., None] + offsets[..., None] - groups).pow(2).unbind(-1)
        total = squares[0]
        for square in squares[1:]:
            total = total + square
        return total

    second_wins = error(second) < error(first)  # [n, g]
    values = torch.where(second_wins[..., None], second[0], first[0])
    scales = torch.where(second_wins, second[1], first[1])
    return values, scales, torch.where(second_wins, second[2], first[2])
