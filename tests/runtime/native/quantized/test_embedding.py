"""Grouped rows hold a Q8_0 matrix exactly, by rows."""

import torch

from pld_cli.runtime.native.quantized.embedding import GroupedRows


def test_grouped_rows_hold_a_q8_0_matrix_exactly():
    generator = torch.Generator().manual_seed(6)
    values = torch.randint(-127, 128, (40, 64), generator=generator).float()
    scales = torch.rand(40, 2, generator=generator).half().float()  # Q8_0: a float16 per group
    values[:, 0], values[:, 32] = 127, -127  # each group reaches its scale's full range
    weight = (values.view(40, 2, 32) * scales[..., None]).view(40, 64)
    ids = torch.tensor([3, 3, 39])
    assert torch.equal(GroupedRows(weight)[ids], weight[ids])
