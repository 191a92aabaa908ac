"""The repetition penalty row by row against transformers' own processor, the loop stop under
drafting and without it, and the share of output that repeats itself."""

from __future__ import annotations

import torch
from transformers.generation.logits_process import RepetitionPenaltyLogitsProcessor

from pld_cli.core.config import DecodeConfig
from pld_cli.core.decode import Pass, generate
from pld_cli.core.repetition import (
    LOOP_SPAN,
    LoopStop,
    PenalizedRuntime,
    repeat_start,
    repeated_share,
)
from pld_cli.core.scripted import ScriptedRuntime
from pld_cli.core.stats import Stats


class RandomLogits(ScriptedRuntime):
    """Fixed random logits per absolute position (both signs), for checking the processing."""

    context_limit, name = 1000, "random"

    def __init__(self, vocab: int = 16) -> None:
        self.table = torch.randn(1000, vocab, generator=torch.Generator().manual_seed(0))
        self.length = 0

    def prefill(self, ids) -> None:
        self.length = len(ids)

    def forward(self, ids) -> torch.Tensor:
        self.length += len(ids)
        return self.table[self.length - len(ids) : self.length].clone()

    def rollback(self, length: int) -> None:
        self.length = length


def test_each_position_gets_transformers_scores_for_the_tokens_before_it():
    prompt, passes = [3, 4, 5, 3], [[6, 7, 3], [8, 8, 9, 15, 2]]
    runtime = PenalizedRuntime(RandomLogits(), 1.3)
    reference = RepetitionPenaltyLogitsProcessor(1.3)
    runtime.prefill(prompt[:-1])
    sequence = prompt[:-1]
    for ids in passes:
        raw = runtime.runtime.table[len(sequence) : len(sequence) + len(ids)]
        got = runtime.forward(ids)
        for j in range(len(ids)):
            seen = torch.tensor([sequence + ids[: j + 1]])
            assert torch.equal(got[j], reference(seen, raw[j : j + 1].clone())[0])
        runtime.rollback(len(sequence) + 1)  # keep only the first token of the pass
        sequence = sequence + ids[:1]
    assert runtime.tokens == sequence and runtime.counts.sum() == len(sequence)
    assert runtime.length == runtime.runtime.length == len(sequence)


def tokens(config: DecodeConfig, runtime, prompt=(1, 2, 3, 4)) -> list[int]:
    return [
        t
        for e in generate(runtime, list(prompt), {2}, config)
        if isinstance(e, Pass)
        for t in e.emitted
    ]


def looping_script(prompt: list[int]) -> list[int]:
    """Some text, then a 30-token passage over and over."""
    passage = list(range(40, 70))
    return prompt + list(range(100, 110)) + passage * 10


def test_the_loop_stop_ends_at_the_same_token_with_and_without_drafting():
    prompt = list(range(3, 30))
    results = []
    for use_pld in (True, False):
        config = DecodeConfig(max_new_tokens=200, use_pld=use_pld, stop_loops=True)
        events = list(
            generate(ScriptedRuntime(looping_script(prompt), vocab_size=128), prompt, {2}, config)
        )
        stats = Stats()
        for event in events:
            stats.add(event)
        results.append(([t for e in events if isinstance(e, Pass) for t in e.emitted], stats))
    (pld_tokens, pld), (plain_tokens, plain) = results
    assert pld_tokens == plain_tokens
    assert pld.stop == plain.stop == "repetition" and pld.passes < plain.passes
    # 10 tokens, the passage twice, then its first LOOP_SPAN tokens a third time: the stop.
    assert len(plain_tokens) == 10 + 2 * 30 + LOOP_SPAN
    unstopped = DecodeConfig(max_new_tokens=200)
    assert (
        len(tokens(unstopped, ScriptedRuntime(looping_script(prompt), vocab_size=128), prompt))
        == 200
    )


def test_loop_stop_needs_the_span_twice_before():
    stop = LoopStop(span=3, repeats=2)
    assert stop.extend([1, 2, 3, 1, 2, 3]) is None
    assert stop.extend([1, 2, 9, 1, 2]) is None
    assert stop.extend([3, 7]) == 1  # [1, 2, 3] for the third time


def test_repeated_share_counts_the_later_copies_only():
    assert repeated_share([]) == 0.0
    assert repeated_share(list(range(100))) == 0.0
    once = list(range(30))
    assert repeated_share(once + once) == 0.5
    assert repeated_share([1, 2, 3, 1, 2, 3, 4], span=3) == 3 / 7


def test_repeat_start_is_where_the_first_span_comes_back():
    before, cycle = list(range(100, 110)), list(range(200, 230))
    tokens = before + cycle * 4
    stopped = tokens[: LoopStop().extend(tokens)]
    assert repeat_start(stopped) == len(before) + len(cycle)
    assert repeat_start([9, 1, 2, 3, 1, 2, 3, 1, 2, 3], span=3) == 4  # the docstring's


def test_repeat_start_finds_a_repeat_that_began_inside_what_came_before():
    cycle = list(range(200, 230))
    tokens = [1, 2] + cycle[-5:] + cycle * 3  # the prefix ends like the cycle does
    assert repeat_start(tokens) == 2 + 5 + len(cycle) - 5


def test_repeat_start_is_none_without_a_repeat():
    assert repeat_start(list(range(100))) is None
    assert repeat_start([1, 2, 3], span=24) is None
