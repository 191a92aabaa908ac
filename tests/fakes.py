"""A scripted runtime: the 'model' continues a fixed token script, for testing the loop's logic."""

from __future__ import annotations

import torch


class ScriptedRuntime:
    """Predicts script[i] as the token after position i - 1 of the sequence; records rollbacks."""

    def __init__(self, script: list[int], vocab_size: int = 32, context_limit: int = 1000) -> None:
        self.script = script
        self.vocab_size = vocab_size
        self.context_limit = context_limit
        self.length = 0
        self.rollbacks: list[int] = []
        self.passes: list[list[int]] = []

    def prefill(self, ids) -> None:
        self.length = len(ids)

    def forward(self, ids) -> torch.Tensor:
        self.passes.append(list(ids))
        logits = torch.zeros(len(ids), self.vocab_size)
        for row in range(len(ids)):
            logits[row, self.script[self.length + row + 1]] = 1.0
        self.length += len(ids)
        return logits

    def rollback(self, length: int) -> None:
        self.rollbacks.append(length)
        self.length = length
