"""The static runtime computes what the dynamic one does, and rolls back by moving a position."""

import pytest
import torch
from conftest import tiny_llama
from families import tiny_family_model

from pld_cli.errors import Unsupported
from pld_cli.runtime.hf import compat
from pld_cli.runtime.hf.dynamic import DynamicRuntime
from pld_cli.runtime.hf.static import StaticRuntime


def assert_same_cache(static: StaticRuntime, dynamic: DynamicRuntime) -> None:
    """Each static layer writes next at the runtime's length (where this transformers keeps the
    position in the layer) and holds the dynamic cache's keys and values before it."""
    end = static.length
    for layer, reference in zip(static.cache.layers, dynamic.cache.layers, strict=True):
        assert compat.write_position(layer) in (end, None)
        torch.testing.assert_close(layer.keys[:, :, :end], reference.keys, rtol=1e-4, atol=1e-5)
        torch.testing.assert_close(layer.values[:, :, :end], reference.values, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("family", ["llama", "mistral"])  # mistral: a window of 8, passed
def test_logits_and_cache_match_the_dynamic_runtime_across_rollbacks(family):
    model = tiny_family_model(family)
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
        assert static.length == keep
        assert_same_cache(static, dynamic)
    static.prefill(ids[:5])  # a new prompt on the same cache
    dynamic.prefill(ids[:5])
    assert torch.allclose(dynamic.forward(ids[5:9]), static.forward(ids[5:9]), atol=1e-5)
    assert_same_cache(static, dynamic)


def test_context_limit_is_the_capacity_and_a_full_cache_refuses():
    static = StaticRuntime(tiny_llama(0), 16)
    assert static.context_limit == 16
    static.prefill(list(range(3, 15)))
    static.forward([3, 4, 5, 6])
    with pytest.raises(ValueError, match="full"):
        static.forward([7])


@pytest.mark.parametrize("family", ["lfm2", "qwen3_next", "mamba"])
def test_conv_and_recurrent_models_are_refused(family):
    model = tiny_family_model(family)
    # Older transformers keep such state in model-specific caches: refused for every runtime.
    why = "not only full ones" if compat.HAS_LINEAR_ATTENTION_LAYERS else "need a newer"
    with pytest.raises(Unsupported, match=why):
        StaticRuntime(model, 64)


def test_rollback_works_on_position_tensors_made_in_inference_mode():
    # On CUDA the layers' write positions are moved to the device inside the first (inference
    # mode) pass, which makes them inference tensors; the loop rolls back outside that mode.
    static = StaticRuntime(tiny_llama(0), 64)
    static.prefill(list(range(3, 13)))
    if compat.write_position(static.cache.layers[0]) is None:
        pytest.skip("this transformers takes explicit cache positions")
    with torch.inference_mode():
        for layer in static.cache.layers:
            layer.cumulative_length = layer.cumulative_length.clone()
    static.forward([3, 4, 5])
    static.rollback(11)
    assert static.length == 11
