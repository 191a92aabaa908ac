"""Runtimes: a causal LM plus its KV cache, seen by the decode loop as three operations.

`prefill` fills the cache with a prompt, `forward` runs one pass over a few new positions on top of
the cache and returns their logits, `rollback` forgets cached positions after a rejected draft.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import torch
from transformers import PreTrainedModel


class Runtime(Protocol):
    context_limit: int
    name: str  # which runtime, for the pass-cost cache key

    @property
    def length(self) -> int:
        """Number of positions held in the KV cache."""
        ...

    def prefill(self, ids: Sequence[int]) -> None: ...

    def forward(self, ids: Sequence[int]) -> torch.Tensor:
        """Logits [len(ids), vocab] for the next token after each of ids."""
        ...

    def rollback(self, length: int) -> None: ...


def context_limit(model: PreTrainedModel) -> int:
    config = model.config
    for name in ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length"):
        value = getattr(config, name, None)
        if isinstance(value, int) and value > 0:
            return value
    return 2048


def chosen_path(choice: dict[int, str], q: int, default: str) -> str:
    """The kernel path the calibration chose for a pass of q positions: that of the smallest
    measured size of at least q (sizes in between run as the next measured one), else `default`."""
    size = min((s for s in choice if s >= q), default=None)
    return default if size is None else choice[size]
