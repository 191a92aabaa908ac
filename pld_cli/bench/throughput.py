"""Corpus throughput: every document decoded, wall time with prefill, tokens summed.

What a user with a folder of documents waits for: pld's own engine one document after another
(-j 1), then N documents at once in its shared passes (-j N), then a server (vLLM) with N
requests in flight that it batches. Measured on the same prompt ids in one run, one after the
other; each run's outputs are compared with the first's, document by document.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from pld_cli import waiting
from pld_cli.core.config import DecodeConfig
from pld_cli.core.stats import ratio
from pld_cli.tasks.engine import Engine


@dataclass(frozen=True)
class Throughput:
    method: str
    concurrency: int  # calls in flight
    documents: int
    new_tokens: int
    wall_s: float  # prefill included
    identical: int | None = None  # documents whose tokens equal the first run's (None: it)

    @property
    def tokens_per_s(self) -> float:
        return ratio(self.new_tokens, self.wall_s)

    def as_dict(self) -> dict:
        return {
            "method": self.method,
            "concurrency": self.concurrency,
            "documents": self.documents,
            "new_tokens": self.new_tokens,
            "wall_s": round(self.wall_s, 3),
            "tokens_per_s": round(self.tokens_per_s, 2),
            "identical_to_first": self.identical,
        }


def measure(
    method: str,
    engine: Engine,
    prompts: Sequence[list[int]],
    configs: Sequence[DecodeConfig],
    concurrency: int = 1,
    first: Sequence[list[int]] | None = None,
) -> tuple[Throughput, list[list[int]]]:
    """All prompts through the engine, `concurrency` at a time, timed from first to last; and
    each document's tokens, counted identical to `first`'s where given. One at a time runs on
    this thread, as `pld -j 1` does (a thread of its own would start a second OpenMP team)."""
    jobs = list(zip(prompts, configs, strict=True))
    start = time.perf_counter()
    if concurrency == 1:
        outputs = [engine.decode(*job)[0] for job in jobs]
    else:
        with ThreadPoolExecutor(concurrency) as pool:
            futures = [pool.submit(engine.decode, *job) for job in jobs]
            outputs = [waiting.result(future)[0] for future in futures]
    wall = time.perf_counter() - start
    same = None if first is None else sum(a == b for a, b in zip(outputs, first, strict=True))
    tokens = sum(map(len, outputs))
    return Throughput(method, concurrency, len(prompts), tokens, wall, same), outputs
