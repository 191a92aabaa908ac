from functools import cache

import pytest

from pld_cli.core.config import DecodeConfig
from pld_cli.engines.local import LocalEngine
from pld_cli.errors import PldError
from pld_cli.loading import ready as ready_module
from pld_cli.loading.models import ModelSpec, load_model
from pld_cli.loading.ready import ready
from pld_cli.runtime.calibration.costs import MEASURED_SIZES
from pld_cli.tasks.kinds import kind_of
from pld_cli.tasks.pipeline import check_fits, run_task
from pld_cli.tasks.prompts import Task, answer_start


def test_input_that_does_not_fit_names_the_counts():
    with pytest.raises(PldError, match=r"900 prompt tokens \+ 200 new tokens .* 1000 tokens"):
        check_fits(900, 200, 1000)
    check_fits(800, 200, 1000)


@pytest.fixture
def tiny_loaded(tiny_model_dir):
    return load_model(ModelSpec(tiny_model_dir, device="cpu"))


class Seen:
    """An observer that keeps what the live view would show."""

    def __init__(self) -> None:
        self.fragments = []

    def append_all(self, step, fragments, stats) -> None:
        self.fragments += fragments


@pytest.fixture
def seen():
    return Seen()


def test_a_task_runs_to_its_kind_s_result_and_the_view_sees_every_token(tiny_loaded, seen):
    task = Task("edit", "x = 1\n", "rename x", "a.py")
    engine = LocalEngine(tiny_loaded)
    result = run_task(engine, task, DecodeConfig(max_new_tokens=12), observe=seen.append_all)
    decoded = tiny_loaded.tokenizer.decode(result.token_ids, skip_special_tokens=True)
    assert result.text == kind_of("edit").finish(task, answer_start(task) + decoded)
    assert result.stats.new_tokens == len(result.token_ids) == 12
    assert "".join(fragment.text for fragment in seen.fragments) == decoded


class Refusing:
    """A runtime that cannot roll back exactly."""

    refusal, paths, context_limit = "pld cannot draft for this model: a reason", (), 100


def test_ready_refuses_drafting_on_a_runtime_that_cannot_roll_back(tiny_loaded, monkeypatch):
    monkeypatch.setattr(tiny_loaded.runtimes, "get", lambda *args: Refusing())
    with pytest.raises(PldError, match="a reason; rerun with --no-pld"):
        ready(tiny_loaded, 10, DecodeConfig())
    runtime, costs = ready(tiny_loaded, 10, DecodeConfig(use_pld=False))
    assert isinstance(runtime, Refusing) and costs is None


def test_ready_calibrates_once_and_hands_the_choice_to_the_runtime(
    tiny_loaded, monkeypatch, tmp_path
):
    monkeypatch.setattr("pld_cli.loading.ready.cache_dir", lambda: tmp_path)  # nothing measured yet
    probes = []
    monkeypatch.setattr(ready_module, "copy_speed", lambda: probes.append(1) or 50e9)
    once = cache(ready_module.machine_speed.__wrapped__)  # this test's own process-wide cache
    monkeypatch.setattr(ready_module, "machine_speed", once)
    monkeypatch.setattr("pld_cli.runtime.calibration.costs.CONTEXT", 64)
    monkeypatch.setattr("pld_cli.runtime.calibration.costs.REPEATS", 1)
    notes = []
    runtime, costs = ready(tiny_loaded, 10, DecodeConfig(num_draft=8), report=notes.append)
    assert len(costs) == 10 and costs == sorted(costs)  # t(0..9), never decreasing
    assert set(runtime.layout.choice) == set(MEASURED_SIZES)  # every measured size got a path
    assert notes == ["measuring pass costs (once for this model, device and dtype)"]
    again, _ = ready(tiny_loaded, 10, DecodeConfig(num_draft=8), report=notes.append)
    assert again is runtime and len(notes) == 1  # read from the cache, not measured again
    assert len(probes) == 1  # the machine's speed: probed once per process, not per decode
