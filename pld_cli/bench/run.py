"""Running a benchmark on equal terms: one model, same prompts, methods interleaved.

Each method is a runner from methods.py. Per item, every repeat runs every method in turn so
machine drift hits all alike; times are medians over the repeats and the speedup is measured
against greedy and transformers' generate(), next to the estimate 1 / (f/L + (1 - f)). With a
concurrency, the prefill rate beside the machine's peak (prefill.py) and the corpus's throughput
follow (throughput.py): pld one document after another, pld with that many at once, and the
server (where given) with that many in flight.
"""

from __future__ import annotations

import dataclasses
import statistics
import time
from collections.abc import Callable, Sequence

from pld_cli.bench import prefill, throughput
from pld_cli.bench.corpus import Item, expand
from pld_cli.bench.machine import describe
from pld_cli.bench.methods import LOOP_RUNNERS, RUNNERS, MethodRun, runner
from pld_cli.bench.results import BenchReport, ItemResult, MethodResult, first_divergence
from pld_cli.core.config import DecodeConfig
from pld_cli.core.stats import measured_speedup
from pld_cli.engines.local import LocalEngine
from pld_cli.errors import ExitStatus, PldError
from pld_cli.loading.models import LoadedModel
from pld_cli.loading.ready import ready
from pld_cli.runtime.names import RuntimeName
from pld_cli.tasks.engine import Engine
from pld_cli.tasks.kinds import kind_of
from pld_cli.tasks.longdoc import Splitter
from pld_cli.tasks.pipeline import check_fits
from pld_cli.tasks.prompts import prompt_ids

WARMUP_TOKENS = 8


Progress = Callable[[str], None]


def run_bench(
    loaded: LoadedModel,
    items: Sequence[Item],
    methods: Sequence[str],
    config: DecodeConfig,
    repeat: int = 1,
    progress: Progress = lambda _: None,
    chunk_tokens: int | None = None,
    server: Engine | None = None,
    concurrency: int | None = None,
) -> BenchReport:
    """Warm up, then for each item and repeat run each method in turn; medians over repeats.
    An item too long for one call runs as its first round of chunks or pieces (longdoc.py)."""
    start = time.perf_counter()
    report = BenchReport(
        loaded.name,
        loaded.device,
        loaded.dtype,
        loaded.weights,
        repeat,
        config.max_new_tokens,
        config.sampling,
        machine=describe(loaded.device),
    )
    local = LocalEngine(loaded)
    limit = min(local.context, server.context) if server else local.context
    items = expand(
        items, Splitter(local, config.max_new_tokens, chunk_tokens, whole_rewrites=False)
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
        base, _, name = method.partition("@")
        if base in LOOP_RUNNERS:
            asked = RuntimeName(name) if name else None
            report.runtimes[method] = ready(loaded, positions, config, asked)[0].name
    runners = {method: runner(method, server) for method in methods}
    warm = dataclasses.replace(config, max_new_tokens=min(WARMUP_TOKENS, config.max_new_tokens))
    for method in methods:
        runners[method](loaded, prompts[0], warm)
        progress(f"warm-up {method}")
    configs = [config.for_task(kind_of(item.task.kind).stops_at_loops) for item in items]
    for item, ids, task_config in zip(items, prompts, configs, strict=True):
        runs: dict[str, list[MethodRun]] = {method: [] for method in methods}
        for _ in range(repeat):
            for method in methods:
                runs[method].append(runners[method](loaded, ids, task_config))
                progress(f"{item.corpus}/{item.id} {method}")
        report.items.append(ItemResult(item, compare(runs)))
    if concurrency:
        report.prefill = prefill.measure(loaded, prompts, config)
        progress("prefill rate")
        report.throughput = corpus_throughput(
            loaded, server, prompts, configs, concurrency, positions, progress
        )
    report.wall_s = time.perf_counter() - start
    return report


def corpus_throughput(
    loaded: LoadedModel,
    server: Engine | None,
    prompts: list[list[int]],
    configs: list[DecodeConfig],
    concurrency: int,
    positions: int,
    progress: Progress,
) -> list[throughput.Throughput]:
    """The corpus through pld -j 1, pld -j N (where it decodes several at once) and the server
    at N (where given)."""
    runs = [("pld", LocalEngine(loaded), 1)]
    batched = LocalEngine(loaded, concurrency)
    batched.prepare(positions, configs[0], lambda _: None, lambda _: None)
    if batched.parallel > 1:  # float weights go one at a time: -j 1 again, not measured twice
        runs.append(("pld", batched, batched.parallel))
    if server is not None:
        runs.append(("server", server, concurrency))
    measured, first = [], None
    for method, engine, jobs in runs:
        run, outputs = throughput.measure(method, engine, prompts, configs, jobs, first)
        measured.append(run)
        first = first or outputs
        progress(f"throughput: {method}, {jobs} in flight")
    return measured


def compare(runs: dict[str, list[MethodRun]]) -> dict[str, MethodResult]:
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


def parse_methods(text: str, server: bool = False) -> list[str]:
    """The methods named; `server` among them only (and always) when there is a server."""
    methods = list(dict.fromkeys(m.strip() for m in text.split(",") if m.strip()))
    unknown = [m for m in methods if runner(m) is None and not (server and m == "server")]
    if unknown or not methods:
        known = ", ".join([*RUNNERS, "server (with --server)"])
        raise PldError(
            f"--methods: unknown method {', '.join(unknown) or '(none)'}; "
            f"expected a comma-separated list of {known} "
            f"(pld's own methods also as METHOD@{'|'.join(RuntimeName)})",
            code=ExitStatus.USAGE,
        )
    return methods + (["server"] if server and "server" not in methods else [])
