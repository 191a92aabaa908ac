"""Every variant of pld's C library that this CPU runs gives the same bits: the int8 product, row
attention, whole passes of every covered family (the default model's decoding, slow, in
test_default_model_variants.py), and a GGUF's blocks written into a grouped matrix."""

import pytest
import torch
from conftest import repetitive_prompt
from native_families import FAMILIES
from random_blocks import factored_matrix, random_blocks

from pld_cli.loading.gguf_file import Tensor
from pld_cli.loading.gguf_unpack import UNPACKED, unpacked
from pld_cli.runtime.clib import library
from pld_cli.runtime.native.attention import attend_rows
from pld_cli.runtime.native.quantized.grouped import GroupedMatrix
from pld_cli.runtime.native.quantized.quantize import quantize_model
from pld_cli.runtime.native.runtime import NativeRuntime

RUNNABLE = library.runnable()
pytestmark = pytest.mark.skipif(len(RUNNABLE) < 2, reason=f"variants run here: {RUNNABLE}")


def each_variant(monkeypatch, compute) -> dict:
    """compute() under each variant this CPU runs, by variant."""
    results = {}
    for variant in RUNNABLE:
        monkeypatch.setenv("PLD_KERNELS", variant.value)
        library._load.cache_clear()
        assert library.variant() is variant
        results[variant] = compute()
    library._load.cache_clear()
    return results


def assert_same_bits(results: dict) -> None:
    first, *others = results.values()
    for variant, result in results.items():
        for got, want in zip(result, first, strict=True):
            assert torch.equal(got, want), f"{variant} differs from {RUNNABLE[0]}"
    assert others  # at least two variants compared


def randn(*shape: int, seed: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("outputs,inputs", [(37, 576), (64, 1536), (16, 32), (5, 96)])
def test_the_int8_product_is_the_same_on_every_variant(monkeypatch, outputs, inputs):
    matrix = GroupedMatrix.quantized(0.05 * randn(outputs, inputs, seed=0))
    x = 3 * randn(9, inputs, seed=1)
    x[0, :32] = 0  # a group of zeros
    x[1, 5] = 1e4  # a group whose step is large
    assert_same_bits(each_variant(monkeypatch, lambda: [matrix.product(x[:m]) for m in (1, 4, 9)]))


@pytest.mark.parametrize("group,bits", [(32, 4), (16, 8), (16, 4)])
def test_every_layouts_product_is_the_same_on_every_variant(monkeypatch, group, bits):
    generator = torch.Generator().manual_seed(6)
    values = torch.randint(0, 2**bits, (37, 576), generator=generator, dtype=torch.uint8)
    scales = 0.01 * torch.rand(37, 576 // group, generator=generator)
    matrix = GroupedMatrix(values, scales, -4 * scales, bits)
    x = 3 * randn(9, 576, seed=7)
    assert_same_bits(each_variant(monkeypatch, lambda: [matrix.product(x[:m]) for m in (1, 4, 9)]))


@pytest.mark.parametrize("group,bits", [(32, 4), (16, 8)])  # Q4_K's own, Q6_K's (or a fused)
def test_the_k_quants_scale_form_is_the_same_on_every_variant(monkeypatch, group, bits):
    _, matrix = factored_matrix(37, 512, group, bits, seed=8)
    x = 3 * randn(9, 512, seed=7)
    assert_same_bits(each_variant(monkeypatch, lambda: [matrix.product(x[:m]) for m in (1, 4, 9)]))


@pytest.mark.parametrize("end", [1, 255, 600])  # within a chunk of slots, and across chunks
@pytest.mark.parametrize("head_dim", [64, 128, 32])  # the kernel's two constant sizes, and any
def test_row_attention_is_the_same_on_every_variant(monkeypatch, end, head_dim):
    query, keys, values = (
        randn(6, 5, head_dim, seed=2),
        randn(2, 640, head_dim, seed=3),
        randn(2, 640, head_dim, seed=4),
    )
    rows = min(5, end)

    def attend():
        return [attend_rows(query[:, :rows], keys, values, end, 0.125, use_kernel=True)]

    assert_same_bits(each_variant(monkeypatch, attend))


@pytest.mark.parametrize("family", FAMILIES)
def test_a_pass_is_the_same_on_every_variant(monkeypatch, family):
    torch.manual_seed(0)
    model = FAMILIES[family]().eval()
    quantize_model(model, "int8")
    ids = repetitive_prompt(0)[:60]

    def passes():
        runtime = NativeRuntime(model, 128)
        assert runtime.decoder is not None
        runtime.prefill(ids[:40])
        verify = runtime.forward(ids[40:52]).clone()  # a verify pass through the C decoder
        return [verify, runtime.forward(ids[52:53]).clone(), runtime.keys[:, :, :53].clone()]

    assert_same_bits(each_variant(monkeypatch, passes))


@pytest.mark.parametrize("qtype", sorted(UNPACKED), ids=lambda t: t.name)
def test_gguf_blocks_are_written_the_same_on_every_variant(monkeypatch, qtype):
    raw = random_blocks(qtype, 37, 512, seed=9)
    tensor = Tensor("w", (512, 37), qtype, raw, 0)

    def written():
        (matrix,) = unpacked([[(tensor, torch.arange(37).flip(0))]])
        return matrix.arrays()

    assert_same_bits(each_variant(monkeypatch, written))
