"""A benchmark's results as data: per item and method, what ran and how fast; per corpus, totals.

Every formula over the counts (f, L, the speedup estimate, measured speedups) is core/stats.py's.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field

from pld_cli.bench.corpus import Item
from pld_cli.bench.methods import MethodRun
from pld_cli.bench.prefill import PrefillRate
from pld_cli.bench.throughput import Throughput
from pld_cli.core.config import SamplingConfig
from pld_cli.core.repetition import repeated_share
from pld_cli.core.stats import copy_rate, mean_accepted, measured_speedup, predicted_speedup, ratio


@dataclass
class MethodResult:
    run: MethodRun  # the first repeat's tokens and counts
    decode_s: float  # median over the repeats
    speedup_vs_greedy: float | None = None
    speedup_vs_hf_greedy: float | None = None  # over transformers' generate(), what users run
    identical_to_greedy: bool | None = None
    first_divergence: int | None = None

    @property
    def tokens_per_s(self) -> float:
        return ratio(self.run.new_tokens, self.decode_s)

    @property
    def copy_rate(self) -> float:
        return copy_rate(self.run.accepted_tokens, self.run.new_tokens)

    @property
    def mean_accepted(self) -> float | None:
        if self.run.passes_accepting is None:
            return None
        return mean_accepted(self.run.accepted_tokens, self.run.passes_accepting)

    @property
    def loop_share(self) -> float:
        """Share of the output inside a span it already wrote (a loop, not a fast copy)."""
        return repeated_share(self.run.delivered_ids)

    @property
    def predicted_speedup(self) -> float | None:
        run = self.mean_accepted
        return None if run is None else predicted_speedup(self.copy_rate, run)

    def as_dict(self) -> dict:
        run = self.run
        return {
            "prompt_tokens": run.prompt_tokens,
            "new_tokens": run.new_tokens,
            "delivered_tokens": len(run.delivered_ids),
            "passes": run.passes,
            "tokens_per_pass": rounded(ratio(run.new_tokens, run.passes), 3),
            "drafted_tokens": run.drafted_tokens,
            "accepted_tokens": run.accepted_tokens,
            "decode_s": rounded(self.decode_s, 6),
            "tokens_per_s": rounded(self.tokens_per_s, 2),
            "copy_rate": rounded(self.copy_rate, 4),
            "mean_accepted": rounded(self.mean_accepted, 3),
            "predicted_speedup": rounded(self.predicted_speedup, 3),
            "speedup_vs_greedy": rounded(self.speedup_vs_greedy, 3),
            "speedup_vs_hf_greedy": rounded(self.speedup_vs_hf_greedy, 3),
            "identical_to_greedy": self.identical_to_greedy,
            "first_divergence": self.first_divergence,
            "loop_share": rounded(self.loop_share, 4),
        } | self.details()

    def details(self) -> dict:
        if self.run.trace is None:
            return {}
        return {
            "acceptance_histogram": self.run.acceptance_histogram,
            "passes_detail": self.run.trace,
        }


@dataclass
class ItemResult:
    item: Item
    methods: dict[str, MethodResult]

    @property
    def looping(self) -> bool:
        """Whether any method's output repeats a span of its own (core/repetition.py)."""
        return any(result.loop_share > 0 for result in self.methods.values())


@dataclass
class BenchReport:
    model: str
    device: str
    dtype: str
    weights: str  # their format: float32, int8 in groups of 32, ... (LoadedModel.weights)
    repeat: int
    max_new_tokens: int
    sampling: SamplingConfig
    items: list[ItemResult] = field(default_factory=list)
    wall_s: float = 0.0
    runtimes: dict[str, str] = field(default_factory=dict)  # method -> runtime that ran it
    throughput: list[Throughput] = field(default_factory=list)  # the corpus, wall time
    prefill: PrefillRate | None = None  # with --concurrency: the prefill rate and the peak
    machine: str = ""  # the CPU or GPU it ran on, in one line (machine.py)

    def summary(self, loop_free: bool = False) -> dict[str, dict[str, dict]]:
        """Per corpus and method: aggregate tok/s, its ratio to greedy's and to hf-greedy's,
        items identical; over the items without a loop in any output, with loop_free."""
        out: dict[str, dict[str, dict]] = {}
        kept = [r for r in self.items if not (loop_free and r.looping)]
        for corpus in dict.fromkeys(r.item.corpus for r in kept):
            results = [r.methods for r in kept if r.item.corpus == corpus]
            rates = {m: aggregate_rate([r[m] for r in results]) for m in results[0]}
            out[corpus] = {
                method: {
                    "tokens_per_s": rounded(rate, 2),
                    "speedup_vs_greedy": rounded(measured_speedup(rate, rates.get("greedy")), 3),
                    "speedup_vs_hf_greedy": rounded(
                        measured_speedup(rate, rates.get("hf-greedy")), 3
                    ),
                    "identical_items": sum(bool(r[method].identical_to_greedy) for r in results)
                    if "greedy" in rates
                    else None,
                    "items": len(results),
                }
                for method, rate in rates.items()
            }
        return out

    def documents(self) -> dict[str, dict[str, dict]]:
        """Per long item run in parts, per method: its parts' tokens and times together."""
        out: dict[str, dict[str, dict]] = {}
        for document in dict.fromkeys(r.item.part_of for r in self.items if r.item.part_of):
            rows = [r for r in self.items if r.item.part_of == document]
            key = f"{rows[0].item.corpus}/{document}"
            out[key] = {
                method: {
                    "parts": len(rows),
                    "new_tokens": sum(r.methods[method].run.new_tokens for r in rows),
                    "decode_s": rounded(sum(r.methods[method].decode_s for r in rows), 6),
                    "tokens_per_s": rounded(aggregate_rate([r.methods[method] for r in rows]), 2),
                    "identical_parts": None
                    if rows[0].methods[method].identical_to_greedy is None
                    else sum(bool(r.methods[method].identical_to_greedy) for r in rows),
                }
                for method in rows[0].methods
            }
        return out

    def as_json(self) -> dict:
        """The `--json` object; these names are an interface."""
        return {
            "model": self.model,
            "device": self.device,
            "machine": self.machine,
            "dtype": self.dtype,
            "weights": self.weights,
            "repeat": self.repeat,
            "max_new_tokens": self.max_new_tokens,
            "sampling": dataclasses.asdict(self.sampling),
            "wall_s": rounded(self.wall_s, 3),
            "runtimes": self.runtimes,
            "items": [
                {
                    "id": r.item.id,
                    "corpus": r.item.corpus,
                    "task": r.item.task.kind,
                    "part_of": r.item.part_of,
                    "methods": {m: res.as_dict() for m, res in r.methods.items()},
                }
                for r in self.items
            ],
            "summary": self.summary(),
            "summary_loop_free": self.summary(loop_free=True),
            "documents": self.documents(),
            "throughput": [run.as_dict() for run in self.throughput],
            "prefill": self.prefill.as_dict() if self.prefill else None,
        }

    def diverging(self, method: str = "pld") -> list[str]:
        """Ids of the items where `method`'s tokens differ from greedy's."""
        return [
            r.item.id
            for r in self.items
            if method in r.methods and r.methods[method].identical_to_greedy is False
        ]


def pooled_mean_accepted(report: BenchReport, corpus: str, method: str = "pld") -> float | None:
    """A corpus's mean accepted run L for a method: its accepted tokens over accepting passes."""
    runs = [
        r.methods[method].run
        for r in report.items
        if r.item.corpus == corpus and method in r.methods
    ]
    if not runs or any(run.passes_accepting is None for run in runs):
        return None
    accepting = sum(run.passes_accepting for run in runs)
    return mean_accepted(sum(run.accepted_tokens for run in runs), accepting) if accepting else None


def rounded(value: float | None, digits: int) -> float | None:
    return None if value is None else round(value, digits)


def aggregate_rate(results: Sequence[MethodResult]) -> float:
    return ratio(sum(r.run.new_tokens for r in results), sum(r.decode_s for r in results))


def first_divergence(a: Sequence[int], b: Sequence[int]) -> int | None:
    """Index of the first differing token (or the shorter length), None when a == b."""
    if list(a) == list(b):
        return None
    return next(
        (i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b))
    )
