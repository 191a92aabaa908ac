"""Greedy verification: one pass over [pending token, d1 … dk], keep the agreeing prefix.

The pass predicts the model's own token after every input position, so the a draft tokens that
agree are exact, and the model's token after them (the bonus token) comes free.
"""

from __future__ import annotations

from collections.abc import Sequence

from pld_cli.core.runtime import Runtime


def accepted_prefix(draft: Sequence[int], targets: Sequence[int]) -> int:
    """How many leading draft tokens equal the model's greedy choice at their position."""
    accepted, limit = 0, min(len(draft), len(targets))
    while accepted < limit and draft[accepted] == targets[accepted]:
        accepted += 1
    return accepted


def verify_greedy(runtime: Runtime, pending: int, draft: Sequence[int]) -> tuple[int, list[int]]:
    """Run one pass; return (accepted draft tokens, emitted tokens) and trim the rejected cache."""
    logits = runtime.forward([pending, *draft])  # [1 + k, vocab]
    targets = logits.argmax(dim=-1).tolist()  # the only host read-back of the pass
    accepted = accepted_prefix(draft, targets)
    # The cache now holds pending + k drafts; keep pending + the accepted ones.
    runtime.rollback(runtime.length - (len(draft) - accepted))
    return accepted, [*draft[:accepted], targets[accepted]]
