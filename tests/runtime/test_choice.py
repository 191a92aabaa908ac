"""Choosing and reusing runtimes: native where covered, else static where allowed, else dynamic."""

import pytest
from conftest import tiny_llama
from families import tiny_family_model

from pld_cli.errors import PldError
from pld_cli.runtime.choice import CAPACITY_STEP, runtime_for
from pld_cli.runtime.dynamic import DynamicRuntime
from pld_cli.runtime.native import NativeRuntime
from pld_cli.runtime.static import StaticRuntime
from pld_cli.tasks.models import LoadedModel


def loaded(model, runtime="auto") -> LoadedModel:
    return LoadedModel(model, None, "tiny", "cpu", "float32", runtime)


def test_auto_is_native_on_a_cpu_and_reused_while_it_has_room():
    model = loaded(tiny_llama(0, max_positions=2048))
    first = runtime_for(model, 100)
    assert isinstance(first, NativeRuntime) and first.context_limit == CAPACITY_STEP
    assert runtime_for(model, CAPACITY_STEP) is first
    assert runtime_for(model, CAPACITY_STEP + 1) is not first  # grown to the next step
    assert isinstance(runtime_for(model, 100, "dynamic"), DynamicRuntime)
    assert isinstance(runtime_for(model, 100, "static"), StaticRuntime)


def test_a_conv_model_falls_back_with_a_note_or_refuses_static():
    notes = []
    try:
        model = tiny_family_model("lfm2")
        runtime = runtime_for(loaded(model), 100, report=notes.append)
    except PldError:
        pytest.skip("this transformers has no cache layers for conv state")
    assert isinstance(runtime, DynamicRuntime)
    assert "native runtime unavailable (Lfm2ForCausalLM is not a covered family" in notes[0]
    assert "static runtime unavailable" in notes[1]
    with pytest.raises(PldError, match="--runtime static"):
        runtime_for(loaded(model, "static"), 100)


def test_a_sliding_window_model_runs_static_and_verbose_names_the_kernels():
    notes = []
    runtime = runtime_for(loaded(tiny_family_model("mistral")), 100, report=notes.append)
    assert isinstance(runtime, StaticRuntime)
    assert "native runtime unavailable (a sliding window of 8 positions" in notes[0]
    assert notes[1].startswith("runtime: static (auto: pld's own forward does not cover this")
    assert "linear layers 15 Linear" in notes[2]  # 7 per layer and the head


def test_a_request_past_the_model_limit_reuses_the_runtime():
    model = loaded(tiny_llama(0, max_positions=512))
    first = runtime_for(model, 1000)  # more than the model can hold: capped at its limit
    assert first.context_limit == 512
    assert runtime_for(model, 1000) is first
