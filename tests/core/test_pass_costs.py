import random

import pytest

from pld_cli.core.config import DecodeConfig
from pld_cli.core.decode import Pass, generate
from pld_cli.core.pass_costs import FRESH, SETTLED, WINDOW, ObservedCosts
from pld_cli.core.scripted import ScriptedRuntime

CALIBRATED = [10.0, 10.0, 10.5, 11.0, 11.5]  # extra rows nearly free, as the table says


def test_the_docstrings_worked_example():
    costs = ObservedCosts(CALIBRATED)
    for _ in range(3):
        costs.observe(1, 10.0)
        costs.observe(3, 16.0)
    assert costs[1] == pytest.approx(10.0)
    assert costs[3] == pytest.approx(16.0)
    assert costs[2] == pytest.approx(10.5 * (1 + 5 / 11 / 2))
    assert costs[4] == pytest.approx(11.5 * (1 + 3 * 5 / 11 / 2))


def test_one_size_run_scales_the_whole_table():
    costs = ObservedCosts(CALIBRATED)
    costs.observe(1, 5.0)
    assert list(costs) == pytest.approx([c / 2 for c in CALIBRATED])


def test_a_preempted_pass_moves_nothing_where_its_size_ran_undisturbed():
    costs = ObservedCosts(CALIBRATED)
    for _ in range(3):
        costs.observe(1, 10.0)
        costs.observe(2, 10.5)
    costs.observe(2, 105.0)  # ten times its cost, once: the machine was busy
    assert list(costs) == pytest.approx(CALIBRATED)


def test_a_machine_slowed_for_good_is_followed_within_a_window():
    costs = ObservedCosts(CALIBRATED)
    for _ in range(WINDOW):
        costs.observe(1, 10.0)
    for _ in range(WINDOW):
        costs.observe(1, 20.0)
    assert costs[1] == pytest.approx(20.0)


def test_the_table_never_decreases_with_the_pass_size():
    costs = ObservedCosts(CALIBRATED)
    for _ in range(3):
        costs.observe(1, 20.0)  # one row measured twice as slow, three rows as calibrated
        costs.observe(3, 11.0)
    assert list(costs) == sorted(costs)
    assert costs[3] == costs[1] == 20.0


def test_sizes_outside_the_table_are_ignored():
    costs = ObservedCosts(CALIBRATED)
    costs.observe(0, 5.0)
    costs.observe(len(CALIBRATED), 5.0)
    assert list(costs) == CALIBRATED


class Clock:
    """A stand-in for time.perf_counter: a pass over q rows takes q + 1 units (each verify row
    costs its own arithmetic, as on a small model's CPU pass)."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def cost(self, rows: int) -> float:
        return rows + 1


class CheapRowsClock(Clock):
    """Verify rows nearly free, as the table says, but the first long pass preempted (ten times
    its cost): a busy machine's one slow pass of a size rarely run."""

    def __init__(self, preempted: bool) -> None:
        super().__init__()
        self.preempted = preempted

    def cost(self, rows: int) -> float:
        seconds = 1 + 0.05 * rows
        if self.preempted and rows > 2:
            self.preempted, seconds = False, 10 * seconds
        return seconds


class LinearRuntime(ScriptedRuntime):
    def __init__(self, script, clock: Clock) -> None:
        super().__init__(script)
        self.clock = clock

    def forward(self, ids):
        self.clock.now += self.clock.cost(len(ids))
        return super().forward(ids)


def summary_like(seed: int = 0) -> tuple[list[int], list[int]]:
    """A prompt of 400 tokens over a small vocabulary (so n-grams recur and drafts are often
    offered) and an output that copies short stretches of it between tokens of its own: drafts
    are offered on most passes and mostly wrong after their first tokens."""
    rng = random.Random(seed)
    prompt = [rng.randrange(3, 40) for _ in range(400)]
    output: list[int] = []
    while len(output) < 300:
        start = rng.randrange(len(prompt) - 4)
        output += prompt[start : start + rng.randrange(1, 4)] + [rng.randrange(3, 40)]
    return prompt, output[:300]


def decoded(config: DecodeConfig, costs, clock: Clock, monkeypatch) -> list[Pass]:
    monkeypatch.setattr("pld_cli.core.decode.time.perf_counter", clock)
    prompt, output = summary_like()
    runtime = LinearRuntime(prompt + output + [2], clock)
    return [e for e in generate(runtime, prompt, {2}, config, costs) if isinstance(e, Pass)]


def decode_time(config: DecodeConfig, costs, monkeypatch) -> tuple[float, list[int]]:
    clock = Clock()
    passes = decoded(config, costs, clock, monkeypatch)
    return clock.now, [t for p in passes for t in p.emitted]


def test_drafting_that_does_not_pay_switches_itself_off(monkeypatch):
    """Where the calibrated table says extra rows are nearly free but each costs its own time,
    the table alone drafts long and loses to plain decoding; corrected by the passes the loop
    runs, pld loses the passes that show the slope (a size counts for good after SETTLED), then
    runs as plain decoding."""
    config = DecodeConfig(max_new_tokens=300)
    flat = [1.0] * (config.num_draft + 2)
    plain, plain_tokens = decode_time(
        DecodeConfig(max_new_tokens=300, use_pld=False), None, monkeypatch
    )
    trusting, trusting_tokens = decode_time(config, flat, monkeypatch)
    observing, observing_tokens = decode_time(config, ObservedCosts(flat), monkeypatch)
    assert observing_tokens == trusting_tokens == plain_tokens
    assert trusting > 1.1 * plain  # the table alone loses (the test can tell)
    longest = config.num_draft + 2  # the units of a pass over a whole draft
    assert observing <= plain + (SETTLED + 1) * longest  # long passes learn the slope, then plain


def test_one_preempted_pass_of_a_rare_size_does_not_keep_drafting_off(monkeypatch):
    """Its size leaves the line FRESH passes later, so drafting is tried again and the size's
    next, undisturbed pass corrects it; the output is plain decoding's all along."""
    config = DecodeConfig(max_new_tokens=300)
    calibrated = [1 + 0.05 * q for q in range(config.num_draft + 2)]

    def drafted_passes(preempted: bool) -> tuple[int, list[int]]:
        clock = CheapRowsClock(preempted)
        passes = decoded(config, ObservedCosts(calibrated), clock, monkeypatch)
        return sum(1 for p in passes if p.drafted), [t for p in passes for t in p.emitted]

    undisturbed, tokens = drafted_passes(preempted=False)
    after_preemption, preempted_tokens = drafted_passes(preempted=True)
    assert preempted_tokens == tokens
    assert undisturbed > 2 * FRESH  # drafts are verified on most passes here
    assert after_preemption >= undisturbed - 2 * FRESH
