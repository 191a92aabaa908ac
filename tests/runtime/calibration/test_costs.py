import pytest
import torch
from conftest import tiny_llama
from families import tiny_family_model

import pld_cli.runtime.calibration.costs as costs
from pld_cli.runtime.hf.dynamic import DynamicRuntime
from pld_cli.runtime.native.runtime import NativeRuntime


def test_interpolate_is_piecewise_linear_and_never_decreasing():
    table = costs.interpolate({1: 1.0, 4: 1.6, 8: 1.5, 16: 9.0, 32: 2.0}, 12)
    assert table[1] == 1.0 and table[8] == 1.5
    assert abs(table[2] - 1 / 6 - 1.0) < 1e-9
    assert table[4] == 1.5  # a size measured slower than a larger one costs as that one
    assert table[12] == 1.75  # an outlier (16: 9.0) counts as the next larger size


def test_pass_costs_are_measured_once_then_cached(tmp_path, monkeypatch):
    runtime = DynamicRuntime(tiny_llama(0))
    cache = tmp_path / "costs.json"
    first = costs.pass_costs(runtime, 64, "tiny|cpu", cache, 11)
    assert len(first) == 12 and all(t > 0 for t in first[1:])

    def no_measuring(*args):
        raise AssertionError("measured again")

    monkeypatch.setattr(costs, "measure", no_measuring)
    assert costs.pass_costs(runtime, 64, "tiny|cpu", cache, 11) == first


def test_interpolate_extends_the_last_segment_past_the_largest_size():
    table = costs.interpolate({1: 1.0, 16: 2.0, 32: 3.0}, 40)
    assert abs(table[40] - 3.5) < 1e-9


@pytest.mark.parametrize("family", ["gemma3", "qwen3_next"])
def test_calibration_rolls_back_past_a_window_and_a_recurrent_state(family, monkeypatch):
    # Every timed pass is rolled back to the calibration context, here far past the window.
    monkeypatch.setattr(costs, "CONTEXT", 64)
    monkeypatch.setattr(costs, "REPEATS", 1)
    runtime = DynamicRuntime(tiny_family_model(family))
    measured, _ = costs.measure(runtime, 64)
    assert set(measured) == set(costs.MEASURED_SIZES)
    assert runtime.length == 64


def test_the_calibration_chooses_a_kernel_path_per_size_and_caches_the_choice(tmp_path):
    model = tiny_llama(0, max_positions=2048)
    runtime = NativeRuntime(model, 2048)
    cache = tmp_path / "costs.json"
    first = costs.pass_costs(runtime, 64, "tiny|cpu|native", cache, 11)
    chosen = runtime.layout.choice
    assert set(chosen) == set(costs.MEASURED_SIZES) and set(chosen.values()) <= set(runtime.paths)
    again = NativeRuntime(model, 2048)
    assert costs.pass_costs(again, 64, "tiny|cpu|native", cache, 11) == first
    assert again.layout.choice == chosen


def test_a_table_from_another_copy_speed_is_measured_again_and_a_near_one_is_kept(
    tmp_path, monkeypatch
):
    runtime = DynamicRuntime(tiny_llama(0))
    cache = tmp_path / "costs.json"
    measured = []
    real = costs.measure

    def counted(*args):
        measured.append(True)
        return real(*args)

    monkeypatch.setattr(costs, "measure", counted)
    notes = []
    costs.pass_costs(runtime, 64, "tiny|cpu", cache, 11, speed=50e9)
    costs.pass_costs(runtime, 64, "tiny|cpu", cache, 11, notes.append, speed=60e9)
    assert len(measured) == 1 and notes == []  # within the tolerance: the cached table
    costs.pass_costs(runtime, 64, "tiny|cpu", cache, 11, notes.append, speed=20e9)
    assert len(measured) == 2  # a busy (or another) machine: measured again
    assert "20 GB/s, 50 when they were" in notes[0]
    costs.pass_costs(runtime, 64, "tiny|cpu", cache, 11, speed=21e9)
    assert len(measured) == 2  # the new table kept the speed it was measured at


def test_a_table_that_recorded_no_speed_is_measured_again_on_a_cpu(tmp_path, monkeypatch):
    runtime = DynamicRuntime(tiny_llama(0))
    cache = tmp_path / "costs.json"
    costs.pass_costs(runtime, 64, "tiny|cuda", cache, 11)  # no speed: a GPU's table

    def no_measuring(*args):
        raise AssertionError("measured again")

    monkeypatch.setattr(costs, "measure", no_measuring)
    costs.pass_costs(runtime, 64, "tiny|cuda", cache, 11)  # still no speed: kept
    with pytest.raises(AssertionError, match="measured again"):  # on a CPU: measured again
        costs.pass_costs(runtime, 64, "tiny|cuda", cache, 11, speed=50e9)


def test_copy_speed_is_a_plausible_memory_speed():
    assert 1e8 < costs.copy_speed() < 1e13


class Recorder:
    """A runtime that records what it is asked to run."""

    paths, context_limit = (), 512

    def __init__(self):
        self.prefix, self.passes = None, []

    def prefill(self, ids):
        self.prefix = list(ids)

    def forward(self, ids):
        self.passes.append(list(ids))
        return torch.zeros(len(ids), 4)

    def rollback(self, length):
        pass


def test_the_calibration_times_passes_that_continue_a_repeated_pattern(monkeypatch):
    # The quantized head's work depends on how sure the model is: a copied span, not random ids.
    monkeypatch.setattr(costs, "CONTEXT", 300)
    runtime = Recorder()
    costs.measure(runtime, 64)
    prefix, period = runtime.prefix, costs.PATTERN
    assert len(prefix) == 300 and prefix[period : 2 * period] == prefix[:period]
    assert len(set(prefix[:period])) > period // 2  # the pattern itself is random
    for ids in runtime.passes:  # each pass goes on where the prefix stops
        assert ids == (prefix[:period] * 4)[300 % period : 300 % period + len(ids)]
