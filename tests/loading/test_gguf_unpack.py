"""The C library writes a GGUF's blocks into a grouped matrix (csrc/gguf_unpack.c) with exactly
the bits numpy's decoders and GroupedMatrix's own packing give (gguf_blocks.py, the reference):
values, scales and offsets as stored and dequantized, for every type, fused matrices of mixed
types in parts (and, when asked, in the wider layout), rows in another order and a last block
narrower than 16 outputs."""

import numpy as np
import pytest
import torch
from gguf import GGMLQuantizationType
from random_blocks import HALVES, random_blocks

from pld_cli.loading.checkpoint import empty_model
from pld_cli.loading.gguf import default_gguf, gguf_metadata
from pld_cli.loading.gguf_blocks import LAYOUTS, blocks, stacked
from pld_cli.loading.gguf_file import Tensor
from pld_cli.loading.gguf_unpack import UNPACKED, Job, allocated, unpacked, unpacks, write
from pld_cli.loading.gguf_weights import gguf_weights, unpermuted, unpermuting
from pld_cli.runtime.clib.tables import MATRICES
from pld_cli.runtime.native.quantized.grouped import GroupedMatrix
from pld_cli.runtime.native.quantized.parts import GroupedParts

Q = GGMLQuantizationType
pytestmark = pytest.mark.skipif(not unpacks([]), reason="pld's C library is not built")


def tensor(qtype, rows: int, inputs: int, seed: int) -> Tensor:
    """A tensor of random blocks as the file reader gives it (shape in ggml's order)."""
    return Tensor(
        f"{qtype.name}.{seed}", (inputs, rows), qtype, random_blocks(qtype, rows, inputs, seed), 0
    )


def reference(tensors: list[Tensor], heads: list[int | None]) -> GroupedMatrix:
    """numpy's decoders, unpermuted and stacked as the numpy path does, packed by GroupedMatrix."""
    parts = [blocks(t.data, t.type, t.shape[1], t.shape[0]) for t in tensors]
    parts = [p if h is None else unpermuted(p, h) for p, h in zip(parts, heads, strict=True)]
    found = stacked(parts)
    return GroupedMatrix(found.values, found.scales, found.offsets, found.bits)


def orders_of(tensors: list[Tensor], heads: list[int | None]) -> list:
    return [
        None if h is None else unpermuting(t.shape[1], h)
        for t, h in zip(tensors, heads, strict=True)
    ]


def written(tensors: list[Tensor], heads: list[int | None]) -> GroupedMatrix:
    return unpacked([list(zip(tensors, orders_of(tensors, heads), strict=True))])[0]


def written_in_one_layout(tensors: list[Tensor], heads: list[int | None]) -> GroupedMatrix:
    """The tensors in the one layout that holds them all, as the C library writes it when asked
    (pld's loads keep each layout's tensors apart: `unpacked`)."""
    matrix, first = allocated(tensors), 0
    for tensor, order in zip(tensors, orders_of(tensors, heads), strict=True):
        write([Job(tensor, order, matrix, first)])
        first += tensor.shape[1]
    return matrix


def assert_same_bits(got: GroupedMatrix, want: GroupedMatrix) -> None:
    """Values, each group's scale and offset as the kernel forms them (where `got` keeps the
    K-quants' factors and bytes), and the dequantized weights, bit for bit."""
    assert (got.group, got.bits, got.shape) == (want.group, want.bits, want.shape)
    assert torch.equal(got.values, want.values)
    rows = torch.arange(got.shape[0])
    for formed, wanted in zip(got.scales_of(rows), want.scales_of(rows), strict=True):
        assert torch.equal(formed.view(torch.int32), wanted.view(torch.int32))
    assert torch.equal(got.dequantized().view(torch.int32), want.dequantized().view(torch.int32))


def is_k_quant(qtype) -> bool:
    return qtype.name.endswith("_K")


def test_every_type_with_a_layout_is_written_in_c():
    assert UNPACKED == set(LAYOUTS) == set(HALVES)


@pytest.mark.parametrize("qtype", sorted(UNPACKED), ids=lambda t: t.name)
@pytest.mark.parametrize("rows", [37, 16, 3])  # a last block of 5 outputs, one whole block, less
def test_each_type_is_written_with_numpys_bits(qtype, rows):
    matrix = [tensor(qtype, rows, 512, seed=rows)]
    got = written(matrix, [None])
    assert_same_bits(got, reference(matrix, [None]))
    assert got.super == (256 // got.group if is_k_quant(qtype) else 1)  # K-quants as the file


@pytest.mark.parametrize(
    "types,layout",
    [
        ((Q.Q4_K, Q.Q4_K, Q.Q6_K), (16, 8)),  # Q4_K_M's q/k beside its Q6_K v
        ((Q.Q4_0, Q.Q4_0, Q.Q8_0), (32, 8)),  # nibbles widened to bytes
        ((Q.Q4_K, Q.Q5_K, Q.Q3_K), (16, 8)),  # groups of 32 repeated into 16s
        ((Q.Q4_1, Q.Q2_K, Q.Q4_0), (16, 4)),  # ... as nibbles
    ],
    ids=["Q4_K_M", "Q4_0-Q8_0", "to-16s", "to-16s-nibbles"],
)
def test_mixed_types_in_one_layout_with_unpermuted_rows(types, layout):
    """q (4 heads) and k (2 heads) unpermuted, v as it is: 64 + 32 + 21 rows, the last block 5,
    each part in the layout that holds them all (nibbles widened, scales repeated)."""
    sizes = zip(types, (64, 32, 21), strict=True)
    parts = [tensor(kind, rows, 256, seed) for seed, (kind, rows) in enumerate(sizes)]
    heads = [4, 2, None]
    got = written_in_one_layout(parts, heads)
    assert (got.group, got.bits) == layout
    assert got.super == (256 // got.group if all(map(is_k_quant, types)) else 1)
    assert_same_bits(got, reference(parts, heads))


def test_a_fused_matrix_keeps_each_layout_in_parts():
    """Q4_K_M's q/k/v: the Q4_K q and k as one matrix of nibbles, the Q6_K v as bytes, each with
    numpy's bits; their product is each part's product side by side."""
    sizes = zip((Q.Q4_K, Q.Q4_K, Q.Q6_K), (64, 32, 21), strict=True)
    parts = [tensor(kind, rows, 256, seed) for seed, (kind, rows) in enumerate(sizes)]
    heads = [4, 2, None]
    got = written(parts, heads)
    assert isinstance(got, GroupedParts)
    assert [(p.group, p.bits) for p in got.parts] == [(32, 4), (16, 8)]
    assert_same_bits(got.parts[0], reference(parts[:2], heads[:2]))
    assert_same_bits(got.parts[1], reference(parts[2:], heads[2:]))
    x = torch.randn(5, 256, generator=torch.Generator().manual_seed(1))
    whole = torch.cat([part.product(x) for part in got.parts], -1)
    assert got.shape == (117, 256) and torch.equal(got.product(x), whole)
    assert got.nbytes < written_in_one_layout(parts, heads).nbytes


def test_every_float16_is_widened_exactly():
    """Q4_1 keeps d and m as the file has them: every float16 bit pattern (subnormals, -0,
    infinities and NaNs with their payloads among them) as some block's d and m."""
    patterns = np.arange(2**16, dtype=np.uint16).view(np.uint8).reshape(-1, 2)
    rows, inputs = 2**16 // 64, 64 * 32
    raw = random_blocks(Q.Q4_1, rows, inputs, seed=5).reshape(-1, 20)
    raw[:, :2], raw[:, 2:4] = patterns, patterns[::-1]
    matrix = [Tensor("q4_1", (inputs, rows), Q.Q4_1, raw.reshape(rows, -1), 0)]
    assert_same_bits(written(matrix, [None]), reference(matrix, [None]))


def test_a_layout_that_cannot_hold_the_type_is_refused():
    q6 = tensor(Q.Q6_K, 16, 256, seed=0)
    nibbles = GroupedMatrix.from_blocked(
        torch.empty(16, 128, dtype=torch.uint8), torch.empty(16, 16), torch.empty(16, 16), 4
    )
    with pytest.raises(ValueError, match="Q6_K.*4 bits"):
        write([Job(q6, None, nibbles, 0)])  # 6-bit values as nibbles


def test_a_row_order_that_is_not_a_permutation_is_refused():
    q8 = tensor(Q.Q8_0, 4, 32, seed=0)
    with pytest.raises(ValueError, match="not a permutation"):
        unpacked([[(q8, torch.tensor([0, 1, 2, 4]))]])


def test_several_matrices_are_written_in_one_call():
    """A layer's four matrices at once, each as it is alone."""
    specs = [[(Q.Q4_K, 64), (Q.Q4_K, 32), (Q.Q6_K, 32)], [(Q.Q4_K, 256)], [(Q.Q8_0, 40)]]
    matrices = [
        [tensor(kind, rows, 256, seed) for seed, (kind, rows) in enumerate(m)] for m in specs
    ]
    together = unpacked([[(t, None) for t in m] for m in matrices])
    alone = [unpacked([[(t, None) for t in m]])[0] for m in matrices]
    for got, want in zip(together, alone, strict=True):
        for got_part, want_part in zip(parts_of(got), parts_of(want), strict=True):
            assert_same_bits(got_part, want_part)


def parts_of(matrix) -> list[GroupedMatrix]:
    return matrix.parts if isinstance(matrix, GroupedParts) else [matrix]


@pytest.mark.slow
def test_the_default_models_weights_are_numpys_bit_for_bit(monkeypatch):
    """SmolLM2's Q4_1 GGUF (its Q8_0 embedding, q/k unpermuted) loads through the C library to
    the matrices numpy's path builds."""
    path = default_gguf()
    folder = gguf_metadata(path)
    written = gguf_weights(empty_model(folder, False), path)
    monkeypatch.setattr("pld_cli.loading.gguf_weights.unpacks", lambda types: False)
    reference = gguf_weights(empty_model(folder, False), path)
    pairs = [(written.head, reference.head), (written.embed, reference.embed)]
    for got, want in zip(written.layers, reference.layers, strict=True):
        pairs += [(getattr(got, name), getattr(want, name)) for name in MATRICES]
    for got, want in pairs:
        assert isinstance(got, GroupedMatrix)
        assert_same_bits(got, want)
