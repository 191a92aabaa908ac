"""Every GGUF type pld maps holds its weights exactly: random blocks (every bit pattern is a valid
block but for its float16 fields) and gguf-py's own quantizer's blocks, through pld's layout,
dequantize to gguf-py's floats to the bit."""

import numpy as np
import pytest
import torch
from gguf import GGMLQuantizationType, quants
from random_blocks import HALVES, random_blocks

from pld_cli.errors import Unsupported
from pld_cli.loading.gguf_blocks import DECODERS, Blocks, blocks, stacked
from pld_cli.runtime.native.quantized.grouped import GroupedMatrix

Q = GGMLQuantizationType
LAYOUTS = {Q.Q6_K: (16, 8), Q.Q3_K: (16, 4), Q.Q2_K: (16, 4), Q.Q4_0: (32, 4), Q.Q4_1: (32, 4)}
LAYOUTS |= {Q.Q4_K: (32, 4), Q.Q8_0: (32, 8), Q.Q5_0: (32, 8), Q.Q5_1: (32, 8), Q.Q5_K: (32, 8)}


def dequantized(found: Blocks) -> torch.Tensor:
    return GroupedMatrix(found.values, found.scales, found.offsets, found.bits).dequantized()


def test_the_table_covers_every_type_and_each_maps_to_its_layout():
    assert set(DECODERS) == set(HALVES) == set(LAYOUTS)


@pytest.mark.parametrize("qtype", list(HALVES), ids=lambda t: t.name)
def test_random_blocks_dequantize_to_gguf_floats_exactly(qtype):
    raw = random_blocks(qtype, 6, 512)
    found = blocks(raw, qtype, 6, 512)
    assert (found.group, found.bits) == LAYOUTS[qtype]
    assert int(found.values.max()) < 2**found.bits
    want = torch.from_numpy(quants.dequantize(raw, qtype))
    assert torch.equal(dequantized(found), want)


@pytest.mark.parametrize("qtype", [Q.Q8_0, Q.Q4_0, Q.Q4_1, Q.Q5_0, Q.Q5_1], ids=lambda t: t.name)
def test_gguf_quantizers_blocks_dequantize_to_its_floats_exactly(qtype):
    weights = np.random.default_rng(1).normal(0, 0.05, (9, 576)).astype(np.float32)
    raw = quants.quantize(weights, qtype)
    want = torch.from_numpy(quants.dequantize(raw, qtype))
    assert torch.equal(dequantized(blocks(raw, qtype, 9, 576)), want)


def test_matrices_stacked_take_the_layout_that_holds_them_all():
    parts = [blocks(random_blocks(t, 3, 256, seed=2), t, 3, 256) for t in (Q.Q4_K, Q.Q6_K)]
    both = stacked(parts)
    assert (both.group, both.bits) == (16, 8)
    want = torch.cat([dequantized(part) for part in parts])
    assert torch.equal(dequantized(both), want)


def test_a_type_without_an_exact_layout_is_refused_by_name():
    with pytest.raises(Unsupported, match="IQ2_XXS"):
        blocks(np.zeros((1, 66), np.uint8), Q.IQ2_XXS, 1, 256)
