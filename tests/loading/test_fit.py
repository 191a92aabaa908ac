"""--quantize auto: float weights where they fit the memory available, int8 where only int8
fits, int4 below that; float on a GPU."""

import pytest

import pld_cli.loading.models as models
from pld_cli.loading.fit import auto_quantize, available_memory
from pld_cli.loading.models import ModelSpec, load_model
from pld_cli.runtime.native.model import scheme_of
from pld_cli.runtime.native.quantized.scheme import Scheme

GB = 10**9


@pytest.mark.parametrize(
    "parameters,available,device,scheme",
    [
        (135_000_000, 24 * GB, "cpu", None),  # the default model
        (7 * GB, 24 * GB, "cpu", Scheme.INT8),  # 28 GB in float32, 7 GB in int8
        (70 * GB, 64 * GB, "cpu", Scheme.INT4),
        (70 * GB, 8 * GB, "cuda", None),
    ],
)
def test_auto_quantizes_only_what_does_not_fit(parameters, available, device, scheme):
    assert auto_quantize(parameters, available, device) is scheme


def test_available_memory_is_some_of_this_machine():
    assert 0 < available_memory() < 2**50


@pytest.mark.parametrize("available,scheme", [(10**12, None), (16 * 10**6, Scheme.INT8)])
def test_a_load_with_auto_follows_the_memory(monkeypatch, tiny_model_dir, available, scheme):
    monkeypatch.setattr(models, "available_memory", lambda: available)
    messages = []
    loaded = load_model(ModelSpec(name=tiny_model_dir, device="cpu"), messages.append)
    assert scheme_of(loaded.model) == scheme
    assert any("--quantize auto: int8" in m for m in messages) == (scheme is Scheme.INT8)
