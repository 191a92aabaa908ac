"""Repetition in what the model writes: transformers' repetition penalty, exact under drafting, and
the loop stop, which ends an output that has started repeating a span of its own verbatim.

The penalty (as transformers' RepetitionPenaltyLogitsProcessor): at each position, the score of
every token that occurs anywhere before it (prompt and output) is divided by the penalty when
positive, multiplied when negative. A verify pass scores 1 + k positions at once; position j sees
the sequence up to and including draft token j, so each gets the scores plain decoding would give
it. Both rules depend only on the tokens, so drafting changes neither the output nor the stop.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from pld_cli.core.config import DecodeConfig
from pld_cli.core.runtime import Runtime

LOOP_SPAN = DecodeConfig.loop_span
LOOP_REPEATS = 2  # the output stops when a span comes back for the second time (its 3rd copy)


class PenalizedRuntime:
    """A runtime whose logits carry the repetition penalty over all tokens before each position."""

    def __init__(self, runtime: Runtime, penalty: float) -> None:
        self.runtime = runtime
        self.penalty = penalty
        self.tokens: list[int] = []  # what the cache holds, to know what precedes a position
        self.counts: torch.Tensor | None = None  # [vocab] occurrences of each id in self.tokens

        # The rest of the Runtime protocol is the wrapped runtime's own.
        self.context_limit, self.refusal = runtime.context_limit, runtime.refusal
        self.paths, self.choose, self.notes = runtime.paths, runtime.choose, runtime.notes

    @property
    def name(self) -> str:
        return self.runtime.name

    @property
    def length(self) -> int:
        return self.runtime.length

    def prefill(self, ids: Sequence[int]) -> int | None:
        self.tokens = list(ids)
        self.counts = None
        return self.runtime.prefill(ids)

    def forward(self, ids: Sequence[int]) -> torch.Tensor:
        scores = self.runtime.forward(ids).float()  # [q, vocab], as generate() processes them
        q, vocab = scores.shape
        if self.counts is None:
            self.counts = torch.zeros(vocab, dtype=torch.int32, device=scores.device)
            self.count(self.tokens, 1)
        new = torch.tensor(list(ids), device=scores.device)  # [q]
        rows = torch.arange(q, device=scores.device)[new < vocab]  # larger ids score nothing
        hits = torch.zeros(q, vocab, dtype=torch.int32, device=scores.device)
        hits[rows, new[new < vocab]] = 1
        # Row j predicts the token after ids[j]: it sees the cache plus ids[0..j].
        before = (hits.cumsum(0) > 0) | (self.counts > 0)  # [q, vocab]
        penalized = torch.where(scores < 0, scores * self.penalty, scores / self.penalty)
        self.tokens.extend(ids)
        self.count(ids, 1)
        return torch.where(before, penalized, scores)

    def rollback(self, length: int) -> None:
        self.count(self.tokens[length:], -1)
        del self.tokens[length:]
        self.runtime.rollback(length)

    def count(self, ids: Sequence[int], sign: int) -> None:
        if self.counts is None or not ids:
            return
        vocab = self.counts.shape[0]
        index = torch.tensor([i for i in ids if i < vocab], dtype=torch.long)
        ones = torch.full(index.shape, sign, dtype=torch.int32)
        self.counts.index_add_(0, index.to(self.counts.device), ones.to(self.counts.device))


class LoopStop:
    """Watches the output token by token for a span of LOOP_SPAN tokens seen LOOP_REPEATS times
    before: a loop, which a model seldom leaves once in it."""

    def __init__(self, span: int = LOOP_SPAN, repeats: int = LOOP_REPEATS) -> None:
        self.span, self.repeats = span, repeats
        self.tokens: list[int] = []
        self.seen: dict[tuple[int, ...], int] = {}  # span -> times it ended a prefix so far

    def extend(self, tokens: Sequence[int]) -> int | None:
        """Append tokens; how many of them to keep when the loop shows at one of them, else None."""
        for i, token in enumerate(tokens):
            self.tokens.append(token)
            if len(self.tokens) < self.span:
                continue
            window = tuple(self.tokens[-self.span :])
            times = self.seen.get(window, 0)
            if times >= self.repeats:
                return i + 1
            self.seen[window] = times + 1
        return None


def repeat_start(tokens: Sequence[int], span: int = LOOP_SPAN) -> int | None:
    """Where the output began to repeat itself: the start of the first run of `span` tokens that
    occurred verbatim earlier on, or None. tokens[:start] holds no such repeat, and everything
    the loop stop saw after it is a copy of something before.

    >>> repeat_start([9, 1, 2, 3, 1, 2, 3, 1, 2, 3], span=3)  # 9, then 1 2 3 three times
    4
    """
    earlier: set[tuple[int, ...]] = set()
    for start in range(len(tokens) - span + 1):
        window = tuple(tokens[start : start + span])
        if window in earlier:
            return start
        earlier.add(window)
    return None


def repeated_share(tokens: Sequence[int], span: int = LOOP_SPAN) -> float:
    """The share of tokens inside a span of `span` tokens that occurred verbatim earlier on."""
    if not tokens:
        return 0.0
    earlier: set[tuple[int, ...]] = set()
    covered = [False] * len(tokens)
    for start in range(len(tokens) - span + 1):
        window = tuple(tokens[start : start + span])
        if window in earlier:
            covered[start : start + span] = [True] * span
        earlier.add(window)
    return sum(covered) / len(tokens)
