"""The static runtime computes what the dynamic one does, and rolls back by moving a position."""

import pytest
import torch
from conftest import tiny_llama
from transformers import MistralConfig, MistralForCausalLM

from pld_cli.runtime.dynamic import DynamicRuntime
from pld_cli.runtime.static import StaticRuntime, StaticUnsupported


def test_logits_match_the_dynamic_runtime_across_rollbacks():
    model = tiny_llama(0)
    ids = torch.randint(3, 64, (60,), generator=torch.Generator().manual_seed(0)).tolist()
    dynamic, static = DynamicRuntime(model), StaticRuntime(model, 128)
    for runtime in (dynamic, static):
        runtime.prefill(ids[:20])
    steps = [(ids[20:26], 22), (ids[30:34], 25), (ids[40:41], 26), (ids[41:52], 30)]
    for chunk, keep in steps:
        assert torch.allclose(dynamic.forward(chunk), static.forward(chunk), atol=1e-5)
        assert dynamic.length == static.length
        dynamic.rollback(keep)
        static.rollback(keep)
    static.prefill(ids[:5])  # a new prompt on the same cache
    dynamic.prefill(ids[:5])
    assert torch.allclose(dynamic.forward(ids[5:9]), static.forward(ids[5:9]), atol=1e-5)


def test_context_limit_is_the_capacity_and_a_full_cache_refuses():
    static = StaticRuntime(tiny_llama(0), 16)
    assert static.context_limit == 16
    static.prefill(list(range(3, 15)))
    static.forward([3, 4, 5, 6])
    with pytest.raises(ValueError, match="full"):
        static.forward([7])


def test_sliding_window_models_are_refused():
    config = MistralConfig(vocab_size=64, hidden_size=32, intermediate_size=64,
                           num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                           sliding_window=8)  # fmt: skip
    with pytest.raises(StaticUnsupported):
        StaticRuntime(MistralForCausalLM(config), 64)


def test_rollback_works_on_position_tensors_made_in_inference_mode():
    # On CUDA the layers' write positions are moved to the device inside the first (inference
    # mode) pass, which makes them inference tensors; the loop rolls back outside that mode.
    static = StaticRuntime(tiny_llama(0), 64)
    static.prefill(list(range(3, 13)))
    with torch.inference_mode():
        for layer in static.cache.layers:
            layer.cumulative_length = layer.cumulative_length.clone()
    static.forward([3, 4, 5])
    static.rollback(11)
    assert static.length == 11
