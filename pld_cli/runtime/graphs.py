"""What CUDA-graph replay of either runtime shares: the sizes, the capture, the check.

A pass of q positions replays the graph of the smallest captured size of at least q, padded
(`kernels.PADDED_SIZES`). Every graph is captured once, largest first, in one memory pool, and
each is checked by replays against eager passes on the same input: one of its own length, and one
padded up to it where a shorter length rounds up to it. A replay that disagrees raises, and the
runtime runs eagerly (runtime/opening.py). native/graphs.py and hf/graphs.py hold how each
runtime records and feeds a graph.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Generic, Protocol, TypeVar

import torch

from pld_cli.runtime.kernels import PADDED_SIZES

SIZES = PADDED_SIZES


class Captured(Protocol):
    graph: object  # torch.cuda.CUDAGraph, or a stand-in with replay()
    logits: torch.Tensor  # [size, vocab] the graph's output


Pass = TypeVar("Pass", bound=Captured)


class Graphs(Generic[Pass]):
    """The captured passes of one runtime, by size."""

    def __init__(self, passes: dict[int, Pass]) -> None:
        self.passes = passes

    def fits(self, q: int) -> bool:
        return q <= max(self.passes)

    def size_for(self, q: int) -> int:
        return min(s for s in self.passes if s >= q)


def capture_all(
    runtime, sizes: Sequence[int], record: Callable[[object, int, object], Pass]
) -> dict[int, Pass]:
    """record(runtime, size, pool) for each size, largest first, sharing one memory pool."""
    pool = torch.cuda.graph_pool_handle() if runtime.device.type == "cuda" else None
    return {size: record(runtime, size, pool) for size in sorted(sizes, reverse=True)}


def probe_lengths(sizes: Sequence[int]) -> list[int]:
    """Pass lengths that replay every graph once at its own length and, where a shorter length
    rounds up to it, once padded: (1, 2, 4, 8) -> 1, 2, 4, 3, 8, 7."""
    lengths = []
    for size in sorted(sizes):
        lengths.append(size)
        if size > 1 and size - 1 not in sizes:
            lengths.append(size - 1)
    return lengths


def check_agrees(replayed: torch.Tensor, eager: torch.Tensor, q: int) -> None:
    """RuntimeError unless a replay's logits [q, vocab] match an eager pass's: close (2% of the
    largest logit: bfloat16 graphs fuse differently) and the same greedy token in every row."""
    replayed, eager = replayed.float(), eager.float()
    scale = eager.abs().max().item()
    close = torch.allclose(replayed, eager, rtol=0.02, atol=0.02 * scale)
    if not close or not torch.equal(replayed.argmax(-1), eager.argmax(-1)):
        raise RuntimeError(f"graph replay of {q} positions disagrees with the eager pass")
