"""The contract between the decode loop and a model: the `Runtime` protocol.

A runtime is a causal LM and its KV cache at explicit positions (gpt-fast's shape): `prefill`
fills positions 0..P-1, `forward` runs one pass over q new positions on top of the cache, and
`rollback` forgets the positions past a length after a rejected draft. Everything else a caller
may ask of a runtime is declared here too, never reached with getattr:

- `refusal`: why this runtime cannot roll back exactly (so it cannot draft), or None;
- `paths` and `choose`: the kernel paths a pass can take (() for one), which the pass-cost
  calibration times per pass size, and how the runtime is told what it measured faster;
- `notes()`: lines about how it runs, for `--verbose`.

It lives beside the loop that uses it and imports torch at most, as the rest of core.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

import torch


class Runtime(Protocol):
    context_limit: int  # the most positions the cache holds
    refusal: str | None  # why drafting cannot be exact on this runtime; None when it can
    paths: tuple[str, ...]  # kernel paths the calibration chooses between; () for one

    @property
    def name(self) -> str:
        """Which runtime (the pass-cost cache key, `--verbose`)."""
        ...

    @property
    def length(self) -> int:
        """Number of positions held in the KV cache."""
        ...

    def prefill(self, ids: Sequence[int]) -> int | None:
        """Empty the cache, then fill it with ids (positions 0..len(ids)-1). May return how many
        of them were copied from a kept prompt rather than computed (runtime/prefix/)."""
        ...

    def forward(self, ids: Sequence[int]) -> torch.Tensor:
        """Logits [len(ids), vocab] for the next token after each of ids, written at positions
        length..length+len(ids)-1. May be a view of the runtime's own buffer (a graph replay's
        output), valid only until the next call: read or copy it before."""
        ...

    def rollback(self, length: int) -> None:
        """Forget every position from `length` on (no-op when length >= self.length)."""
        ...

    def choose(self, choice: Mapping[int, str]) -> None:
        """Run passes of each measured size q (and the sizes just below it) on path choice[q]."""
        ...

    def notes(self) -> list[str]:
        """How this runtime runs, one line each, for `--verbose`."""
        ...
