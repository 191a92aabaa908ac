"""int8 in groups of 32 with a scale and offset each: the VNNI kernel's product is the matrix's,
each row's bits do not depend on the batch, and a group takes the grid that holds its source."""

import pytest
import torch

from pld_cli.errors import Unsupported
from pld_cli.runtime.clib import library
from pld_cli.runtime.native.quantized.grouped import GroupedInt8Matrix, available

needs_kernel = pytest.mark.skipif(not available(), reason=f"no C kernel: {library.unavailable()}")


def weights(out: int, inputs: int, seed: int = 0) -> torch.Tensor:
    return 0.05 * torch.randn(out, inputs, generator=torch.Generator().manual_seed(seed))


@needs_kernel
@pytest.mark.parametrize("inputs", [576, 1536, 544, 96, 32])  # 544 and 96: a half block at the end
def test_the_product_is_the_matrixs(inputs):
    matrix = GroupedInt8Matrix(weights(37, inputs))
    x = 3 * torch.randn(9, inputs, generator=torch.Generator().manual_seed(1))
    want = x.double() @ matrix.dequantized().double().T
    got = matrix.product(x).double()
    assert (got - want).abs().max() <= 1e-4 * want.abs().max()


@needs_kernel
@pytest.mark.parametrize("inputs", [576, 544])
def test_a_row_gets_the_same_bits_alone_or_in_a_batch(inputs):
    matrix = GroupedInt8Matrix(weights(70, inputs, seed=2))
    x = torch.randn(25, inputs, generator=torch.Generator().manual_seed(3))
    alone = torch.cat([matrix.product(row) for row in x.split(1)])
    for rows in (2, 3, 4, 5, 8, 25):
        assert torch.equal(matrix.product(x[:rows]), alone[:rows])
    assert matrix.computes_rowwise()


def test_a_q8_0_group_is_held_exactly():
    steps = torch.arange(-127, 128, dtype=torch.float32)[torch.randperm(255)[:64]]
    steps[:2] = torch.tensor([127.0, -5.0])  # the group's largest |w| is 127 steps
    weight = (steps * 2.0**-7).reshape(2, 32)
    weight[1, 0] = -127 * 2.0**-7
    matrix = GroupedInt8Matrix(weight)
    assert torch.equal(matrix.dequantized(), weight)
    scales, offsets = matrix.group_scales, matrix.group_offsets
    assert torch.equal(offsets, -128 * scales)  # the symmetric grid: q = u - 128, no offset


def test_rows_come_back_by_index_as_the_embedding_takes_them():
    weight = weights(37, 64, seed=6)  # 37 outputs: the last block 5 wide
    matrix, ids = GroupedInt8Matrix(weight), torch.tensor([[36, 0], [17, 17]])
    assert matrix.shape == (37, 64)
    assert torch.equal(matrix[ids], matrix.dequantized()[ids])
    assert (matrix[ids] - weight[ids]).abs().max() < 0.01 * weight.abs().max()


def test_a_q4_1_group_is_held_to_float_rounding():
    levels = torch.arange(16, dtype=torch.float32).repeat(2)[torch.randperm(32)]
    weight = (0.0123 * levels + -0.071).reshape(1, 32)  # Q4_1: a scale and a minimum
    matrix = GroupedInt8Matrix(weight)
    assert (matrix.dequantized() - weight).abs().max() < 1e-6 * 0.0123 * 15
    symmetric_error = (
        (torch.round(weight / (weight.abs().max() / 127)) * weight.abs().max() / 127 - weight)
        .abs()
        .max()
    )
    assert symmetric_error > 1e-3 * 0.0123  # the grid around zero could not have held it


def test_inputs_must_come_in_groups():
    with pytest.raises(Unsupported, match="divisible by 32"):
        GroupedInt8Matrix(weights(4, 40))
