"""Quantized weights flattened to named tensors and restored onto a meta model give the same
logits; a tied head is stored once; the restored model is quantized and its rows checked."""

import pytest
import torch
from conftest import tiny_llama
from native_families import FAMILIES

from pld_cli.runtime.native.model import scheme_of
from pld_cli.runtime.native.quantized.quantize import quantize_model
from pld_cli.runtime.native.quantized.state import flatten, restore
from pld_cli.runtime.native.runtime import NativeRuntime

IDS = list(range(3, 30))


def on_meta(model: torch.nn.Module) -> torch.nn.Module:
    with torch.device("meta"):
        empty = type(model)(model.config).eval()
    empty.model.rotary_emb = type(model.model.rotary_emb)(config=model.config)
    return empty


def logits(model) -> torch.Tensor:
    return NativeRuntime(model, 64).run(IDS, keep=len(IDS))


@pytest.mark.parametrize("scheme", ["int8", "int4"])
def test_restored_weights_give_the_same_logits(scheme):
    model = tiny_llama(4)
    state = {k: v.clone() for k, v in flatten(quantize_model(model, scheme)).items()}
    restored = on_meta(model)
    weights = restore(restored, state, scheme)
    assert scheme_of(restored) == scheme
    assert all(layer.qkv.rows_checked > 0 for layer in weights.layers)
    assert torch.equal(logits(restored), logits(model))


def test_a_tied_head_is_stored_once():
    model = FAMILIES["smollm2"]()
    state = flatten(quantize_model(model, "int8"))
    assert "embed.values" in state and not any(name.startswith("head.") for name in state)
    assert restore(on_meta(model), state, "int8").head.values is state["embed.values"]
