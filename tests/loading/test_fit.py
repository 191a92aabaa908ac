"""--quantize auto: a GGUF runs its own blocks on a CPU, a float checkpoint as float, whatever the
memory free; a model that does not fit is refused with the figure."""

import pytest

import pld_cli.loading.models as models
from pld_cli.errors import PldError
from pld_cli.loading.fit import GIB, auto_choice, available_memory, refusal
from pld_cli.loading.models import ModelSpec, load_model
from pld_cli.runtime.names import RuntimeName
from pld_cli.runtime.native.model import scheme_of
from pld_cli.runtime.native.quantized.scheme import Scheme


@pytest.mark.parametrize(
    "gguf,device,kernels,scheme",
    [
        (True, "cpu", None, Scheme.GGUF),  # the default model: its own blocks, pld's kernels
        (False, "cpu", None, None),  # a float checkpoint, as it is
        (True, "cuda", None, None),
        (True, "cpu", "not built when pld was installed", None),
    ],
)
def test_auto_chooses_from_the_file_the_device_and_the_build(gguf, device, kernels, scheme):
    choice = auto_choice(gguf, device, kernels)
    assert choice.scheme is scheme and choice.why
    assert (kernels or "") in choice.why


def test_a_model_that_does_not_fit_is_refused_with_the_figure():
    assert refusal(135_000_000, None, 4, 24 * GIB) is None
    why = refusal(7 * 10**9, None, 4, 24 * GIB)  # a 7B in float32: 26 GiB
    assert why == "needs ~26.1 GiB, 24.0 GiB available; try --quantize int8"
    assert "try --quantize int4" in refusal(70 * 10**9, Scheme.INT8, 4, 64 * GIB)
    assert "no quantization pld has fits it" in refusal(70 * 10**9, Scheme.INT4, 4, 8 * GIB)


def test_available_memory_is_some_of_this_machine():
    assert 0 < available_memory() < 2**50


@pytest.mark.parametrize("available", [10**12, 10**9])
def test_the_choice_does_not_follow_the_memory_free(monkeypatch, tiny_model_dir, available):
    monkeypatch.setattr(models, "available_memory", lambda: available)
    loaded = load_model(ModelSpec(name=tiny_model_dir, device="cpu"))
    assert scheme_of(loaded.model) is None and "float checkpoint" in loaded.why


def test_too_little_memory_refuses_before_loading(monkeypatch, tiny_model_dir):
    monkeypatch.setattr(models, "available_memory", lambda: 10**6)
    with pytest.raises(PldError, match=r"needs ~0\.\d GiB, 0\.0 GiB available"):
        load_model(ModelSpec(name=tiny_model_dir, device="cpu"))


def test_a_transformers_runtime_asked_for_runs_float_weights():
    choice = auto_choice(True, "cpu", None, RuntimeName.STATIC)
    assert choice.scheme is None and "--runtime static" in choice.why


@pytest.mark.parametrize("available", [10**12, 10**9])
def test_a_ggufs_choice_does_not_follow_the_memory_free(monkeypatch, available):
    monkeypatch.setattr(models, "available_memory", lambda: available)
    loaded = load_model(ModelSpec(device="cpu"))  # the default model, 135M: fits both
    assert scheme_of(loaded.model) is Scheme.GGUF and "own blocks" in loaded.why


def test_a_gguf_too_large_refuses_before_loading(monkeypatch):
    monkeypatch.setattr(models, "available_memory", lambda: 10**7)
    monkeypatch.setattr(models, "gguf_weights", lambda *_: pytest.fail("loaded"))
    with pytest.raises(PldError, match=r"GGUF's own blocks\): needs ~0\.\d GiB, 0\.0 GiB"):
        load_model(ModelSpec(device="cpu"))
