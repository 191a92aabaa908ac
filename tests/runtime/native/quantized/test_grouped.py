"""Weights in groups with a scale and offset each: the kernel's product is the matrix's in every
layout (bytes or nibbles, groups of 32 or 16), each row's bits do not depend on the batch, and a
float matrix's group takes the grid that holds its source."""

import pytest
import torch
from random_blocks import factored_matrix

from pld_cli.errors import Unsupported
from pld_cli.runtime.clib import library
from pld_cli.runtime.native.quantized.grouped import GroupedMatrix, available
from pld_cli.runtime.native.quantized.matrices import CHECKED_ROWS, Int4Matrix

needs_kernel = pytest.mark.skipif(not available(), reason=f"no C kernel: {library.unavailable()}")


def weights(out: int, inputs: int, seed: int = 0) -> torch.Tensor:
    return 0.05 * torch.randn(out, inputs, generator=torch.Generator().manual_seed(seed))


def stepped(x: torch.Tensor, group: int) -> torch.Tensor:
    """x [rows, in] as the kernel takes it, in double: per group, whole steps of its largest |x|
    / 127 (a signed byte), to nearest, ties to even."""
    groups = x.unflatten(1, (-1, group))
    step = groups.abs().amax(-1, keepdim=True) / 127
    return (torch.round(groups / step).double() * step.double()).flatten(1)


def product_error(matrix: GroupedMatrix, x: torch.Tensor) -> float:
    """The kernel's largest error against the exact product of its stepped input and the
    matrix, relative to the product's largest value: float32 rounding alone."""
    want = stepped(x, matrix.group) @ matrix.dequantized().double().T
    return float((matrix.product(x).double() - want).abs().max() / want.abs().max())


@needs_kernel
@pytest.mark.parametrize("inputs", [576, 1536, 544, 96, 32])  # 544 and 96: a half block at the end
def test_the_product_is_the_matrixs(inputs):
    matrix = GroupedMatrix.quantized(weights(37, inputs))
    x = 3 * torch.randn(9, inputs, generator=torch.Generator().manual_seed(1))
    assert product_error(matrix, x) <= 1e-6


def random_layout(out: int, inputs: int, group: int, bits: int, seed: int = 0) -> tuple:
    """u [out, in] below 2 ** bits, scales and offsets [out, in / group], as a GGUF's blocks give
    them."""
    generator = torch.Generator().manual_seed(seed)
    values = torch.randint(0, 2**bits, (out, inputs), generator=generator, dtype=torch.uint8)
    scales = 0.01 * torch.rand(out, inputs // group, generator=generator)
    offsets = -0.05 * torch.rand(out, inputs // group, generator=generator)
    return values, scales, offsets


LAYOUTS = [(32, 8), (32, 4), (16, 8), (16, 4)]


@pytest.mark.parametrize("group,bits", LAYOUTS)
@pytest.mark.parametrize("out,inputs", [(37, 576), (16, 64), (5, 96)])
def test_every_layout_holds_its_weights_in_row_order(group, bits, out, inputs):
    values, scales, offsets = random_layout(out, inputs, group, bits)
    matrix = GroupedMatrix(values, scales, offsets, bits)
    assert (matrix.group, matrix.bits, matrix.shape) == (group, bits, (out, inputs))
    want = values.float().unflatten(1, (-1, group)) * scales[..., None] + offsets[..., None]
    assert torch.equal(matrix.dequantized(), want.flatten(1))
    ids = torch.tensor([[4, 0]])
    assert torch.equal(matrix.dequantized(ids), want.flatten(1)[ids])
    assert matrix.nbytes == out * inputs * bits // 8 + 8 * out * inputs // group


@needs_kernel
@pytest.mark.parametrize("group,bits", LAYOUTS)
@pytest.mark.parametrize("out,inputs", [(37, 576), (16, 64), (5, 96), (16, 512), (16, 256)])
def test_every_layouts_product_is_the_matrixs_and_its_rows_stand_alone(group, bits, out, inputs):
    matrix = GroupedMatrix(*random_layout(out, inputs, group, bits, seed=4), bits)
    x = 3 * torch.randn(9, inputs, generator=torch.Generator().manual_seed(5))
    assert product_error(matrix, x) <= 1e-6
    alone = torch.cat([matrix.product(row) for row in x.split(1)])
    for rows in (2, 3, 4, 5, 9):
        assert torch.equal(matrix.product(x[:rows]), alone[:rows])


def test_a_layout_the_kernel_has_none_of_is_refused():
    values, scales, offsets = random_layout(4, 64, 32, 8)
    with pytest.raises(Unsupported, match="no grouped layout of 2 bits"):
        GroupedMatrix(values, scales, offsets, bits=2)
    with pytest.raises(Unsupported, match="in groups of 8"):
        GroupedMatrix(values, scales.repeat(1, 4), offsets.repeat(1, 4), bits=8)


@needs_kernel
@pytest.mark.parametrize("inputs", [576, 544])
def test_a_row_gets_the_same_bits_alone_or_in_a_batch(inputs):
    matrix = GroupedMatrix.quantized(weights(70, inputs, seed=2))
    x = torch.randn(25, inputs, generator=torch.Generator().manual_seed(3))
    alone = torch.cat([matrix.product(row) for row in x.split(1)])
    for rows in (2, 3, 4, 5, 8, 25):
        assert torch.equal(matrix.product(x[:rows]), alone[:rows])
    assert matrix.computes_rowwise()


@needs_kernel
@pytest.mark.parametrize("group,bits", LAYOUTS)
@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_the_largest_weights_by_the_largest_steps_sum_exactly(group, bits, sign):
    """Every u at its top (15 or 255) by every step at +-127: the integer sums' worst case (a
    nibble group's 16-bit pair sums reach 30480 on AVX2), in float32 exactly."""
    out, inputs = 20, 4 * group
    values = torch.full((out, inputs), 2**bits - 1, dtype=torch.uint8)
    ones = torch.ones(out, inputs // group)
    matrix = GroupedMatrix(values, ones, 0 * ones, bits)
    x = torch.full((5, inputs), sign)
    want = torch.full((5, out), sign * (2**bits - 1) * inputs)
    assert torch.equal(matrix.product(x), want)


def counting_products(monkeypatch, matrix) -> list[int]:
    """The rows of each product the matrix runs from now on, in order."""
    calls, product = [], matrix.product

    def counted(x):
        calls.append(x.shape[0])
        return product(x)

    monkeypatch.setattr(matrix, "product", counted)
    return calls


@needs_kernel
def test_a_checked_matrix_runs_rows_past_the_checked_ones_as_one_product(monkeypatch):
    """A -j pass's head over more rows than were checked: one product, each row's bits its
    own; torch's int4 kernel, whose paths may change with the rows, runs them one by one."""
    head = GroupedMatrix(*random_layout(100, 576, 32, 4, seed=10), 4)
    head.rows_checked = CHECKED_ROWS if head.computes_rowwise() else 0
    assert head.rows_checked > 0
    x = torch.randn(CHECKED_ROWS + 8, 576, generator=torch.Generator().manual_seed(11))
    alone = torch.cat([head.product(row) for row in x.split(1)])
    calls = counting_products(monkeypatch, head)
    assert torch.equal(head(x, rowwise=True), alone) and calls == [len(x)]
    int4 = Int4Matrix(weights(64, 576, seed=12))
    int4.rows_checked = CHECKED_ROWS
    calls = counting_products(monkeypatch, int4)
    int4(x, rowwise=True)
    assert calls == [1] * len(x)


def test_a_q8_0_group_is_held_exactly():
    steps = torch.arange(-127, 128, dtype=torch.float32)[torch.randperm(255)[:64]]
    steps[:2] = torch.tensor([127.0, -5.0])  # the group's largest |w| is 127 steps
    weight = (steps * 2.0**-7).reshape(2, 32)
    weight[1, 0] = -127 * 2.0**-7
    matrix = GroupedMatrix.quantized(weight)
    assert torch.equal(matrix.dequantized(), weight)
    scales, offsets = matrix.group_scales, matrix.group_offsets
    assert torch.equal(offsets, -128 * scales)  # the symmetric grid: q = u - 128, no offset


def test_rows_come_back_by_index_as_the_embedding_takes_them():
    weight = weights(37, 64, seed=6)  # 37 outputs: the last block 5 wide
    matrix, ids = GroupedMatrix.quantized(weight), torch.tensor([[36, 0], [17, 17]])
    assert matrix.shape == (37, 64)
    assert torch.equal(matrix[ids], matrix.dequantized()[ids])
    assert (matrix[ids] - weight[ids]).abs().max() < 0.01 * weight.abs().max()


def test_a_q4_1_group_is_held_to_float_rounding():
    levels = torch.arange(16, dtype=torch.float32).repeat(2)[torch.randperm(32)]
    weight = (0.0123 * levels + -0.071).reshape(1, 32)  # Q4_1: a scale and a minimum
    matrix = GroupedMatrix.quantized(weight)
    assert (matrix.dequantized() - weight).abs().max() < 1e-6 * 0.0123 * 15
    symmetric_error = (
        (torch.round(weight / (weight.abs().max() / 127)) * weight.abs().max() / 127 - weight)
        .abs()
        .max()
    )
    assert symmetric_error > 1e-3 * 0.0123  # the grid around zero could not have held it


def test_inputs_must_come_in_groups():
    with pytest.raises(Unsupported, match="divisible by 32"):
        GroupedMatrix.quantized(weights(4, 40))


@needs_kernel
@pytest.mark.parametrize("out", [37, 16, 5])
def test_a_block_of_outputs_is_the_matrixs_own(out):
    matrix = GroupedMatrix(*random_layout(out, 96, 16, 4, seed=8), 4)
    x = torch.randn(3, 96, generator=torch.Generator().manual_seed(9))
    whole = (out // 16) * 16
    for start, stop in [(0, min(16, out)), (whole, out)][: 2 if 0 < whole < out else 1]:
        assert torch.equal(matrix.outputs(start, stop).product(x), matrix.product(x)[:, start:stop])
    assert matrix.computes_rowwise()


@needs_kernel
@pytest.mark.parametrize("group,bits", [(32, 4), (16, 8), (32, 8), (16, 4)])
@pytest.mark.parametrize("out", [37, 16])  # a last block of 5 outputs; one block
def test_the_k_quants_scale_form_gives_the_bits_of_scales_per_group(group, bits, out):
    """A factor per 256 inputs times a byte per group, formed in the kernel: the same products as
    the float32 scales per group the file's decoders form, so the same output bits, alone or
    among other rows, in a block of outputs, and dequantized."""
    per_group, factored = factored_matrix(out, 512, group, bits, seed=3)
    x = 3 * torch.randn(9, 512, generator=torch.Generator().manual_seed(4))
    for rows in (1, 4, 9):
        assert torch.equal(factored.product(x[:rows]), per_group.product(x[:rows]))
    assert torch.equal(factored.dequantized(), per_group.dequantized())
    assert torch.equal(factored.outputs(0, 16).product(x), per_group.product(x)[:, :16])
    assert factored.super == 256 // group and per_group.super == 1
    assert factored.nbytes < per_group.nbytes
    assert factored.computes_rowwise()
