"""A fused matrix whose parts keep layouts of their own: q/k/v of a Q4_K_M file, whose v alone
is Q6_K. Held in one layout (the one that holds every part), its Q4_K q and k would run as bytes
in groups of 16, twice their nibbles' bytes and twice their scales; here each part keeps its own
layout, the C decoder runs them one after another into their columns of the one product
(csrc/decoder.h: a Matrix's `rest`), and each row is still computed from that row alone.
"""

from __future__ import annotations

import ctypes

import torch

from pld_cli.runtime.clib.tables import Matrix
from pld_cli.runtime.native.quantized.grouped import GroupedMatrix
from pld_cli.runtime.native.quantized.matrices import RowKernel


class GroupedParts(RowKernel):
    """Grouped matrices over the same inputs, one under the other: [sum of their rows, in]."""

    def __init__(self, parts: list[GroupedMatrix]) -> None:
        if len({part.shape[1] for part in parts}) != 1:
            raise ValueError("the parts of a fused matrix take the same inputs")
        self.parts = parts

    @property
    def rows_checked(self) -> int:
        return min(part.rows_checked for part in self.parts)

    @rows_checked.setter
    def rows_checked(self, rows: int) -> None:
        for part in self.parts:
            part.rows_checked = rows

    @property
    def shape(self) -> tuple[int, int]:
        return sum(part.shape[0] for part in self.parts), self.parts[0].shape[1]

    @property
    def nbytes(self) -> int:
        return sum(part.nbytes for part in self.parts)

    def arrays(self) -> list[torch.Tensor]:
        return [array for part in self.parts for array in part.arrays()]

    def product(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([part.product(x) for part in self.parts], -1)

    def batches(self, rows: int) -> bool:
        return all(part.batches(rows) for part in self.parts)

    def computes_rowwise(self) -> bool:
        return all(part.computes_rowwise() for part in self.parts)

    def dequantized(self) -> torch.Tensor:
        return torch.cat([part.dequantized() for part in self.parts])

    def table(self, bias: int | None = None) -> Matrix:
        """The first part's table, its `rest` pointing to the next part's and so on (ctypes'
        pointers keep the tables they point to alive while the first is)."""
        tables = [part.table() for part in self.parts]
        tables[0].bias = bias
        for table, after in zip(tables, tables[1:], strict=False):
            table.rest = ctypes.pointer(after)
        return tables[0]
