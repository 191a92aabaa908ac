"""--quantize auto: float weights where they fit the memory available, int8 where only int8
fits, int4 below that; float on a GPU."""

import pytest

import pld_cli.tasks.models as models
from pld_cli.runtime.quantized import quantization
from pld_cli.tasks.fit import auto_quantize, available_memory
from pld_cli.tasks.models import ModelSpec, load_model

GB = 10**9


@pytest.mark.parametrize(
    "parameters,available,device,kind",
    [
        (135_000_000, 24 * GB, "cpu", "none"),  # the default model
        (7 * GB, 24 * GB, "cpu", "int8"),  # 28 GB in float32, 7 GB in int8
        (70 * GB, 64 * GB, "cpu", "int4"),
        (70 * GB, 8 * GB, "cuda", "none"),
    ],
)
def test_auto_quantizes_only_what_does_not_fit(parameters, available, device, kind):
    assert auto_quantize(parameters, available, device) == kind


def test_available_memory_is_some_of_this_machine():
    assert 0 < available_memory() < 2**50


@pytest.mark.parametrize("available,kind", [(10**12, "none"), (16 * 10**6, "int8")])
def test_a_load_with_auto_follows_the_memory(monkeypatch, tiny_model_dir, available, kind):
    monkeypatch.setattr(models, "available_memory", lambda: available)
    messages = []
    loaded = load_model(ModelSpec(name=tiny_model_dir, device="cpu"), messages.append)
    assert quantization(loaded.model) == kind
    assert any("--quantize auto: int8" in m for m in messages) == (kind == "int8")
