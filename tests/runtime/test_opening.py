"""Opening and reusing runtimes: native where covered, else static where allowed, else dynamic."""

import pytest
from conftest import tiny_llama
from families import tiny_family_model

from pld_cli.errors import PldError
from pld_cli.runtime.hf.dynamic import DynamicRuntime
from pld_cli.runtime.hf.static import StaticRuntime
from pld_cli.runtime.names import RuntimeName
from pld_cli.runtime.native.runtime import NativeRuntime
from pld_cli.runtime.opening import CAPACITY_STEP, OPENERS, RuntimePool


def pool(model, runtime: RuntimeName | None = None) -> RuntimePool:
    return RuntimePool(model, runtime)


def test_auto_is_native_on_a_cpu_and_reused_while_it_has_room():
    runtimes = pool(tiny_llama(0, max_positions=2048))
    first = runtimes.get(100)
    assert isinstance(first, NativeRuntime) and first.context_limit == CAPACITY_STEP
    assert runtimes.get(CAPACITY_STEP) is first
    assert runtimes.get(CAPACITY_STEP + 1) is not first  # grown to the next step
    assert isinstance(runtimes.get(100, RuntimeName.DYNAMIC), DynamicRuntime)
    assert isinstance(runtimes.get(100, RuntimeName.STATIC), StaticRuntime)


def test_a_conv_model_falls_back_with_a_note_or_refuses_static():
    notes = []
    try:
        model = tiny_family_model("lfm2")
        runtime = pool(model).get(100, note=notes.append)
    except PldError:
        pytest.skip("this transformers has no cache layers for conv state")
    assert isinstance(runtime, DynamicRuntime)
    assert "native runtime unavailable (Lfm2ForCausalLM is not a covered family" in notes[0]
    assert "static runtime unavailable" in notes[1]
    with pytest.raises(PldError, match="--runtime static"):
        pool(model, RuntimeName.STATIC).get(100)


def test_a_sliding_window_model_runs_static_and_verbose_names_the_kernels():
    notes = []
    runtime = pool(tiny_family_model("mistral")).get(100, note=notes.append)
    assert isinstance(runtime, StaticRuntime)
    assert "native runtime unavailable (a sliding window of 8 positions" in notes[0]
    assert notes[1].startswith("runtime: static (auto: pld's own forward does not cover this")
    assert "linear layers 15 Linear" in notes[2]  # 7 per layer and the head


def test_a_request_past_the_model_limit_reuses_the_runtime():
    runtimes = pool(tiny_llama(0, max_positions=512))
    first = runtimes.get(1000)  # more than the model can hold: capped at its limit
    assert first.context_limit == 512
    assert runtimes.get(1000) is first


def test_every_runtime_name_has_an_opener_and_auto_tries_them_in_order():
    assert list(OPENERS) == list(RuntimeName) == ["native", "static", "dynamic"]
