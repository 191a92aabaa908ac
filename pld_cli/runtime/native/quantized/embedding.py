"""A matrix read by rows, not multiplied: the untied embedding of a quantized model, int8 in
groups of 32 with a float32 scale each (symmetric, Q8_0's layout), each looked-up row exact to
that grid."""

from __future__ import annotations

import torch

from pld_cli.runtime.native.quantized.grouped import GROUP, grouped_slabs, symmetric


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
