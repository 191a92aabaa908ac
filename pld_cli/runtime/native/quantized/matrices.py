"""torch's weight-only int4 kernel as a matrix whose rows stand alone.

A CPU pass is bound by reading the weights, so int4 weights make it cheaper. torch's weight-only
kernel (`_weight_int4pack_mm_for_cpu`) takes bfloat16 activations and computes each output row
from its own input row, so a verify pass's logits are those of one-position passes and pld's
output equals `--no-pld`'s. That is checked at load on the machine itself
(`RowKernel.computes_rowwise`); where it fails, verify passes run their rows one at a time. Its
float32-activation variant is a reference loop, many times slower (docs/design-measurements.md).
"""

from __future__ import annotations

import torch

from pld_cli.errors import Unsupported

INT4_GROUP = 32  # inputs per int4 scale and zero point
ACTIVATIONS = torch.bfloat16  # what the kernels take (and give) on their fast path
SLAB = 2**20  # values per slab of a matrix's float temporaries at load
CHECKED_ROWS = 32  # verify passes of up to this many rows are checked (default drafts: 25)


class RowKernel:
    """A quantized matrix's product, with the guarantee exact verification needs: each row of a
    verify pass gets what a pass over that row alone gives it. The kernels compute rows apart on
    the CPUs measured, but a kernel may switch paths with the number of rows (tiles for larger
    batches on other CPUs), so `check_rows` tests it at load on this machine; where a row's
    result moves, or past the rows checked, a verify pass runs its rows one at a time. (pld's
    grouped kernel computes each row apart by construction: once checked it runs any number of
    rows in one product, `GroupedMatrix.batches`.)"""

    rows_checked = 0  # verify passes up to this many rows may run batched (set by check_rows)

    def __call__(self, x: torch.Tensor, rowwise: bool = False) -> torch.Tensor:
        """x [m, in] @ W.T -> [m, out], in x's dtype; `rowwise`: each row as if by itself."""
        if rowwise and not self.batches(x.shape[0]):
            return torch.cat([self.product(row) for row in x.split(1)])
        return self.product(x)

    def batches(self, rows: int) -> bool:
        """Whether `rows` rows, each to be computed as if alone, may run in one product: up to
        the rows checked on this machine, since past them the kernel may take a path unchecked."""
        return rows <= self.rows_checked

    def product(self, x: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    @property
    def shape(self) -> tuple[int, int]:
        raise NotImplementedError

    def computes_rowwise(self) -> bool:
        """Whether every row of a batch of 2..CHECKED_ROWS rows gets what it gets alone."""
        generator = torch.Generator().manual_seed(0)
        x = torch.randn(CHECKED_ROWS, self.shape[1], generator=generator)
        alone = torch.cat([self.product(row) for row in x.split(1)])
        return all(torch.equal(self.product(x[:m]), alone[:m]) for m in range(2, len(x) + 1))


def slabs(weight: torch.Tensor) -> list[slice]:
    """Row ranges of about SLAB values each, so a large matrix's float temporaries at load stay
    a few MB and not a copy of it each."""
    step = max(1, SLAB // max(1, weight.shape[1]))
    return [slice(start, start + step) for start in range(0, weight.shape[0], step)]


class Int4Matrix(RowKernel):
    """An [out, in] matrix as 4-bit values with a bfloat16 scale and zero point per group of
    INT4_GROUP inputs (asymmetric), packed as the CPU kernel wants them."""

    def __init__(self, weight: torch.Tensor) -> None:
        out, inputs = weight.shape
        if inputs % INT4_GROUP:
            raise Unsupported(f"int4 needs input sizes divisible by {INT4_GROUP}, not {inputs}")
        groups = weight.reshape(out, inputs // INT4_GROUP, INT4_GROUP)
        low, high = groups.amin(-1), groups.amax(-1)
        scales = ((high - low).clamp(min=1e-12) / 15).to(torch.bfloat16).float()
        # The kernel computes (q - 8) * scale + zero: zero is the value of q = 8.
        zeros = (low + 8 * scales).to(torch.bfloat16).float()
        values = torch.round((groups - zeros[..., None]) / scales[..., None] + 8).clamp(0, 15)
        values = values.to(torch.int32).reshape(out, inputs)
        self.packed = torch.ops.aten._convert_weight_to_int4pack_for_cpu(values, 1)
        self.scales_zeros = torch.stack([scales, zeros], -1).transpose(0, 1).to(ACTIVATIONS)
        self.scales_zeros = self.scales_zeros.contiguous()  # [in / group, out, 2]
        self.dtype = weight.dtype

    @classmethod
    def quantized(cls, weight: torch.Tensor) -> Int4Matrix:
        """The float matrix [out, in] quantized (as GroupedMatrix.quantized, for either scheme)."""
        return cls(weight)

    def product(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.ops.aten._weight_int4pack_mm_for_cpu(
            x.to(ACTIVATIONS), self.packed, INT4_GROUP, self.scales_zeros
        )
        return out.to(self.dtype)

    @property
    def shape(self) -> tuple[int, int]:
        return self.packed.shape[0], self.scales_zeros.shape[0] * INT4_GROUP

    @property
    def nbytes(self) -> int:
        return self.packed.nbytes + self.scales_zeros.nbytes
