"""A scripted runtime: a 'model' that continues a known token sequence, for replaying the loop.

Greedy output does not depend on the drafts, so a loop run against the sequence a model produced
(prompt + its greedy output) passes, drafts and accepts exactly as the real run would. Tests use
it to check the loop's logic; `scripts/policy_replay.py` to estimate a drafting change in passes.
It implements the whole `Runtime` protocol and records what it was asked.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch


class ScriptedRuntime:
    """Predicts script[i] as the token after position i - 1 of the sequence."""

    name = "scripted"
    refusal = None
    paths: tuple[str, ...] = ()

    def __init__(
        self, script: Sequence[int], vocab_size: int | None = None, context_limit: int = 1000
    ) -> None:
        self.script = list(script)
        self.vocab_size = vocab_size or max(self.script) + 1
        self.context_limit = context_limit
        self.length = 0
        self.passes: list[list[int]] = []  # ids of every forward
        self.rollbacks: list[int] = []  # the length of every rollback

    def prefill(self, ids: Sequence[int]) -> None:
        self.length = len(ids)

    def forward(self, ids: Sequence[int]) -> torch.Tensor:
        self.passes.append(list(ids))
        logits = torch.zeros(len(ids), self.vocab_size)  # [q, vocab]
        for row in range(len(ids)):
            logits[row, self.script[self.length + row + 1]] = 1.0
        self.length += len(ids)
        return logits

    def rollback(self, length: int) -> None:
        self.rollbacks.append(length)
        self.length = min(self.length, length)

    def choose(self, choice: Mapping[int, str]) -> None:
        """One path: nothing to choose."""

    def notes(self) -> list[str]:
        return []
