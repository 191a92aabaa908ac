"""The quantized head and embedding where pld's C kernel is not built (`quantize.head_matrix`):
exact rows in groups of 32, and an exact argmax over torch's int8 kernel.

torch's int8 kernel gives bfloat16 logits, and rounding a logit to 8 significant bits flips the top
token wherever two logits are that close: often enough to cost agreement with float32, where a head
in groups of 32 (Q8_0's layout) cost none. So the matrix is kept twice, per output row for the
kernel (`Int8Matrix`) and in groups (`GroupedRows`, also the embedding's rows). Each row recomputes
in float32 every logit whose error bound (Cauchy-Schwarz) reaches the top one's, a few per row
(docs/design-measurements.md), so its argmax is the grouped matrix's, computed from that row alone.
"""

from __future__ import annotations

import torch

from pld_cli.runtime.native.quantized.grouped import GROUP, grouped_slabs, symmetric
from pld_cli.runtime.native.quantized.matrices import ACTIVATIONS, Int8Matrix, slabs

# The bounds' rounding terms, each above what it bounds: a bfloat16 output is within 2^-8 of its
# value, a float32 sum of k products within k * 2^-24 of the sum of their sizes (at most the
# product of the two vectors' norms), and the bounds' own float32 arithmetic within a part in 2^8.
OUTPUT_ROUNDING = 2.0**-7
SUM_ROUNDING = 2.0**-23
SLACK = 1 + 2.0**-8


class GroupedRows:
    """An [out, in] matrix as int8 values with a float32 scale per GROUP inputs (symmetric)."""

    def __init__(self, weight: torch.Tensor) -> None:
        self.group_values = torch.empty(weight.shape, dtype=torch.int8, device=weight.device)
        self.group_scales = torch.empty(
            weight.shape[0], weight.shape[1] // GROUP, device=weight.device
        )
        for rows, groups in grouped_slabs(weight, "quantized embeddings"):
            values, self.group_scales[rows], _ = symmetric(groups)
            self.group_values[rows] = values.flatten(1).to(torch.int8)
        self.device, self.dtype = weight.device, weight.dtype

    def __getitem__(self, rows: torch.Tensor) -> torch.Tensor:
        """Rows of the matrix in float [n, in] (the embedding lookup, the head's exact logits)."""
        values = self.group_values[rows].float().unflatten(-1, (-1, GROUP))
        return (values * self.group_scales[rows][..., None]).flatten(-2).to(self.dtype)


class QuantizedHead(GroupedRows, Int8Matrix):
    """The head: the int8 kernel's logits, those that may be the top one recomputed from the
    grouped rows. Per output row, as Euclidean norms: `error`, of the kernel's matrix's row minus
    the grouped one; `reach`, the larger of the two rows."""

    def __init__(self, weight: torch.Tensor) -> None:
        GroupedRows.__init__(self, weight)
        Int8Matrix.__init__(self, weight)
        self.error = torch.empty(weight.shape[0], device=weight.device)
        self.reach = torch.empty_like(self.error)
        for rows in slabs(weight):
            grouped = self[rows].double()
            kernel = self.values[rows].double() * self.scales[rows].double()[:, None]
            self.error[rows] = (grouped - kernel).norm(dim=1) * SLACK
            self.reach[rows] = torch.maximum(grouped.norm(dim=1), kernel.norm(dim=1)) * SLACK

    def __call__(self, x: torch.Tensor, rowwise: bool = False) -> torch.Tensor:
        """Logits [m, out] for x [m, in]; each row's argmax is the grouped matrix's."""
        logits = Int8Matrix.__call__(self, x, rowwise)
        near = self.near_top(x, logits)  # [m, out]
        for i, row in enumerate(x.float()):
            candidates = near[i].nonzero()[:, 0]
            logits[i, candidates] = (self[candidates].float() @ row).to(logits.dtype)
        return logits

    def near_top(self, x: torch.Tensor, logits: torch.Tensor) -> torch.Tensor:
        """Which logits [m, out] may, within their bounds, be the largest of their row. Each
        bound is Cauchy-Schwarz's: |x . d| <= |x| |d| for the weights' difference d, for the
        input's bfloat16 rounding, and for the float32 sums' error."""
        sizes, roundings = [], []
        for row in x.float().split(1):  # each row's norms as a pass over it alone takes them
            sizes.append(row.norm())
            roundings.append((row - row.to(ACTIVATIONS).float()).norm())
        size, rounding = torch.stack(sizes)[:, None], torch.stack(roundings)[:, None]  # [m, 1]
        spread = rounding + SUM_ROUNDING * x.shape[1] * 2 * (size + rounding)
        bound = logits.abs() * OUTPUT_ROUNDING + self.error * size + self.reach * spread
        floor = (logits - bound).amax(-1, keepdim=True)  # below the top logit of each row
        return logits + bound >= floor
