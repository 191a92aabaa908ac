"""Benchmarking decoding methods on equal terms: one model, same prompts, methods interleaved.

Each method is a runner from bench_methods.py. Per item, every repeat runs every method in turn so
machine drift hits all alike; times are medians over the repeats and the speedup is measured
against greedy, next to the estimate 1 / (f/L + (1 - f)).
"""

from __future__ import annotations

import dataclasses
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from pld_cli.bench.corpus import Item, expand
from pld_cli.bench.methods import LOOP_RUNNERS, RUNNERS, RUNTIME_SUFFIXES, Run, runner
from pld_cli.core.config import DecodeConfig, SamplingConfig
from pld_cli.core.repetition import repeated_share
from pld_cli.core.stats import measured_speedup, predicted_speedup, ratio
from pld_cli.errors import ExitStatus, PldError
from pld_cli.runtime.base import context_limit
from pld_cli.tasks.longdoc import Splitter
from pld_cli.tasks.models import LoadedModel
from pld_cli.tasks.pipeline import check_fits, ready
from pld_cli.tasks.prompts import prompt_ids

WARMUP_TOKENS = 8


@dataclass
class MethodResult:
    run: Run  # the first repeat's tokens and counts
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
        return ratio(self.run.accepted_tokens, self.run.new_tokens)

    @property
    def mean_accepted(self) -> float | None:
        if self.run.passes_accepting is None:
            return None
        return ratio(self.run.accepted_tokens, self.run.passes_accepting)

    @property
    def loop_share(self) -> float:
        """Share of the output inside a span it already wrote (a loop, not a fast copy)."""
        return repeated_share(self.run.token_ids)

    @property
    def predicted_speedup(self) -> float | None:
        run = self.mean_accepted
        return None if run is None else predicted_speedup(self.copy_rate, run)

    def as_dict(self) -> dict:
        run = self.run
        return {
            "prompt_tokens": run.prompt_tokens,
            "new_tokens": run.new_tokens,
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
class Report:
    model: str
    device: str
    dtype: str
    repeat: int
    max_new_tokens: int
    sampling: SamplingConfig
    items: list[ItemResult] = field(default_factory=list)
    wall_s: float = 0.0
    runtimes: dict[str, str] = field(default_factory=dict)  # method -> runtime that ran it

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
            "dtype": self.dtype,
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
        }

    def diverging(self, method: str = "pld") -> list[str]:
        """Ids of the items where `method`'s tokens differ from greedy's."""
        return [
            r.item.id
            for r in self.items
            if method in r.methods and r.methods[method].identical_to_greedy is False
        ]


def pooled_mean_accepted(report: Report, corpus: str, method: str = "pld") -> float | None:
    """A corpus's mean accepted run L for a method: its accepted tokens over accepting passes."""
    runs = [
        r.methods[method].run
        for r in report.items
        if r.item.corpus == corpus and method in r.methods
    ]
    if not runs or any(run.passes_accepting is None for run in runs):
        return None
    accepting = sum(run.passes_accepting for run in runs)
    return sum(run.accepted_tokens for run in runs) / accepting if accepting else None


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


Progress = Callable[[str], None]


def run_bench(
    loaded: LoadedModel,
    items: Sequence[Item],
    methods: Sequence[str],
    config: DecodeConfig,
    repeat: int = 1,
    progress: Progress = lambda _: None,
    chunk_tokens: int | None = None,
) -> Report:
    """Warm up, then for each item and repeat run each method in turn; medians over repeats.
    An item too long for one call runs as its first round of chunks or pieces (longdoc.py)."""
    start = time.perf_counter()
    report = Report(
        loaded.name, loaded.device, loaded.dtype, repeat, config.max_new_tokens, config.sampling
    )
    limit = context_limit(loaded.model)
    items = expand(
        items, Splitter(loaded, config.max_new_tokens, chunk_tokens, whole_rewrites=False)
    )
    prompts = [prompt_ids(loaded.tokenizer, item.task) for item in items]
    for item, ids in zip(items, prompts, strict=True):
        try:
            check_fits(len(ids), config.max_new_tokens, limit)
        except PldError as exc:
            raise PldError(f"{item.corpus}/{item.id}: {exc}") from None
    # Every runtime opened once, with room for the longest item: all items share its cache.
    positions = max(map(len, prompts)) + config.max_new_tokens
    for method in methods:
        base, _, kind = method.partition("@")
        if base in LOOP_RUNNERS:
            report.runtimes[method] = ready(loaded, positions, config, kind or None)[0].name
    warm = dataclasses.replace(config, max_new_tokens=min(WARMUP_TOKENS, config.max_new_tokens))
    for method in methods:
        runner(method)(loaded, prompts[0], warm)
        progress(f"warm-up {method}")
    for item, ids in zip(items, prompts, strict=True):
        runs: dict[str, list[Run]] = {method: [] for method in methods}
        task_config = config.for_task(item.task.kind)  # the loop stop only for summaries
        for _ in range(repeat):
            for method in methods:
                runs[method].append(runner(method)(loaded, ids, task_config))
                progress(f"{item.corpus}/{item.id} {method}")
        report.items.append(ItemResult(item, compare(runs)))
    report.wall_s = time.perf_counter() - start
    return report


def compare(runs: dict[str, list[Run]]) -> dict[str, MethodResult]:
    """One item's results: first repeat's tokens, median time, measured against pld's greedy and
    transformers' (stats.measured_speedup)."""
    results = {
        method: MethodResult(reps[0], statistics.median(r.decode_s for r in reps))
        for method, reps in runs.items()
    }
    greedy, hf_greedy = results.get("greedy"), results.get("hf-greedy")
    for result in results.values():
        if hf_greedy is not None:
            result.speedup_vs_hf_greedy = measured_speedup(
                result.tokens_per_s, hf_greedy.tokens_per_s
            )
        if greedy is not None:
            result.first_divergence = first_divergence(greedy.run.token_ids, result.run.token_ids)
            result.identical_to_greedy = result.first_divergence is None
            result.speedup_vs_greedy = measured_speedup(result.tokens_per_s, greedy.tokens_per_s)
    return results


def parse_methods(text: str) -> list[str]:
    methods = list(dict.fromkeys(m.strip() for m in text.split(",") if m.strip()))
    unknown = [m for m in methods if runner(m) is None]
    if unknown or not methods:
        raise PldError(
            f"--methods: unknown method {', '.join(unknown) or '(none)'}; "
            f"expected a comma-separated list of {', '.join(RUNNERS)} "
            f"(pld's own methods also as METHOD@{'|'.join(RUNTIME_SUFFIXES)})",
            code=ExitStatus.USAGE,
        )
    return methods
