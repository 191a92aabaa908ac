"""Showing a benchmark: a progress bar while it runs, rich tables, and the speedup-vs-f plot.

The plot sets each item's measured speedup against its copy rate f, over the curve
1 / (f/L + (1 - f)) that the PLD speedup formula predicts for each corpus's mean accepted run L.
"""

from __future__ import annotations

import contextlib
import importlib.util
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from pld_cli.bench.prefill import PrefillRate
from pld_cli.bench.results import BenchReport, MethodResult, pooled_mean_accepted
from pld_cli.core.stats import predicted_speedup, ratio
from pld_cli.errors import PldError

T = TypeVar("T")  # what a table row is made from

MARKERS = "os^Dv<>P*X"


def console(stderr: bool = True) -> Console:
    """A console; off a terminal, wide enough that the tables are never cropped."""
    out = Console(stderr=stderr, highlight=False)
    if not out.is_terminal:
        out.width = max(out.width, 160)
    return out


@contextlib.contextmanager
def progress(total: int, quiet: bool) -> Iterator[Callable[[str], None]]:
    """A bar on a terminal, one line per run elsewhere, nothing under -q; callback per run done."""
    err = console()
    if quiet:
        yield lambda _: None
        return
    if not err.is_terminal:
        done = iter(range(1, total + 1))
        yield lambda label: err.print(
            f"pld: bench {next(done, total)}/{total} {label}", markup=False
        )
        return
    columns = (
        TextColumn("pld bench"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("{task.description}"),
    )
    with Progress(*columns, console=err, transient=True) as bar:
        task = bar.add_task("warm-up", total=total)
        yield lambda label: bar.update(task, advance=1, description=label)


def cell(value: float | None, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


def times(speedup: float | None) -> str:
    return "-" if not speedup else f"{speedup:.2f}×"


def same(result: MethodResult) -> str:
    if result.identical_to_greedy is None:
        return "-"
    return "yes" if result.identical_to_greedy else f"NO (at {result.first_divergence})"


def grouped_table(
    title: str, heads: list[str], groups: dict[str, dict[str, T]], cells: Callable[[T], list[str]]
) -> Table:
    """Rows grouped by their first column (groups: label -> method -> result), labelled once, a
    row per method: its `cells` after the two naming columns (left), numbers right."""
    table = Table(title=title, title_justify="left")
    for i, head in enumerate(heads):
        table.add_column(head, justify="left" if i < 2 else "right")
    for label, rows in groups.items():
        for n, (method, result) in enumerate(rows.items()):
            end = n == len(rows) - 1
            table.add_row(label if n == 0 else "", method, *cells(result), end_section=end)
    return table


def share(count: int | None, total: int) -> str:
    return "-" if count is None else f"{count}/{total}"


def item_cells(r: MethodResult) -> list[str]:
    return [
        str(r.run.new_tokens),
        str(r.run.passes),
        cell(ratio(r.run.new_tokens, r.run.passes), ".2f"),
        cell(r.copy_rate, ".1%"),
        cell(r.mean_accepted, ".2f"),
        times(r.predicted_speedup),
        times(r.speedup_vs_greedy),
        times(r.speedup_vs_hf_greedy),
        cell(r.tokens_per_s, ".1f"),
        same(r),
        cell(r.loop_share, ".0%"),
    ]


def corpus_cells(s: dict) -> list[str]:
    return [
        str(s["items"]),
        cell(s["tokens_per_s"], ".1f"),
        times(s["speedup_vs_greedy"]),
        times(s["speedup_vs_hf_greedy"]),
        share(s["identical_items"], s["items"]),
    ]


def document_cells(d: dict) -> list[str]:
    return [
        str(d["parts"]),
        str(d["new_tokens"]),
        f"{d['decode_s']:.2f} s",
        cell(d["tokens_per_s"], ".1f"),
        share(d["identical_parts"], d["parts"]),
    ]


def items_table(report: BenchReport) -> Table:
    heads = [
        "item",
        "method",
        "new tok",
        "passes",
        "tok/pass",
        "copy f",
        "run L",
        "predicted",
        "vs greedy",
        "vs hf-greedy",
        "tok/s",
        "= greedy",
        "loop",
    ]
    groups = {f"{row.item.corpus}/{row.item.id}": row.methods for row in report.items}
    return grouped_table("pld bench: items", heads, groups, item_cells)


def summary_table(report: BenchReport, loop_free: bool = False) -> Table:
    """The corpora; with loop_free, only items no output of which repeats itself ("loop" 0%)."""
    heads = ["corpus", "method", "items", "tok/s", "vs greedy", "vs hf-greedy", "= greedy"]
    title = "pld bench: corpora, loop-free items" if loop_free else "pld bench: corpora"
    return grouped_table(title, heads, report.summary(loop_free), corpus_cells)


def documents_table(report: BenchReport) -> Table:
    """Long items, run in parts: each part is a row of the items table; here, their totals."""
    heads = ["document", "method", "parts", "new tok", "decode", "tok/s", "= greedy"]
    title = "pld bench: long documents, all parts"
    return grouped_table(title, heads, report.documents(), document_cells)


def show(report: BenchReport, to_stderr: bool) -> None:
    out = console(stderr=to_stderr)
    out.print(
        f"pld bench: {report.model} ({report.device}, {report.weights}), median of "
        f"{report.repeat}, ≤{report.max_new_tokens} new tokens, {report.wall_s:.1f} s in all",
        markup=False,
    )
    if report.machine:
        out.print(f"machine: {report.machine}", markup=False)
    if report.runtimes:
        runtimes = ", ".join(f"{m}: {name}" for m, name in report.runtimes.items())
        out.print(f"runtimes: {runtimes}", markup=False)
    out.print(items_table(report))
    if report.documents():
        out.print(documents_table(report))
    out.print(summary_table(report))
    out.print(summary_table(report, loop_free=True))
    if report.prefill:
        out.print(prefill_table(report.prefill))
    if report.throughput:
        out.print(throughput_table(report))


def prefill_table(rate: PrefillRate) -> Table:
    """The prefill rate and its fraction of the machine's peak, measured in the same run."""
    title = f"pld bench: prefill of a {rate.prompt_tokens}-token prompt ({rate.variant})"
    table = Table(title=title, title_justify="left")
    for head in ("tok/s", "GMAC/s", "int8 peak", "of it", "kernel's peak", "of it"):
        table.add_column(head, justify="right")
    widest, kernel = rate.fraction(rate.peak_widest), rate.fraction(rate.peak_kernel)
    table.add_row(
        f"{rate.tokens_per_s:.0f}",
        f"{rate.macs / rate.seconds / 1e9:.1f}",
        f"{rate.peak_widest / 1e9:.0f}" if rate.peak_widest else "-",
        f"{widest:.1%}" if widest is not None else "-",
        f"{rate.peak_kernel / 1e9:.0f}" if rate.peak_kernel else "-",
        f"{kernel:.1%}" if kernel is not None else "-",
    )
    return table


def throughput_table(report: BenchReport) -> Table:
    """Every document, wall time with prefill: pld one after another and N at once, the server
    N at a time; how many documents' tokens equal the first run's."""
    table = Table(
        title="pld bench: corpus throughput (all items, prefill included)", title_justify="left"
    )
    heads = ("method", "in flight", "documents", "new tok", "wall", "tok/s", "vs -j 1", "same")
    for head in heads:
        table.add_column(head, justify="left" if head == "method" else "right")
    base = report.throughput[0].tokens_per_s
    for run in report.throughput:
        table.add_row(
            run.method,
            f"{run.concurrency}",
            f"{run.documents}",
            f"{run.new_tokens}",
            f"{run.wall_s:.1f} s",
            f"{run.tokens_per_s:.1f}",
            times(ratio(run.tokens_per_s, base) or None),
            "-" if run.identical is None else f"{run.identical}/{run.documents}",
        )
    return table


def require_matplotlib() -> None:
    if importlib.util.find_spec("matplotlib") is None:
        raise PldError("--plot needs matplotlib: pip install 'pld-cli[plot]'")


def plot(report: BenchReport, path: Path) -> None:
    """Measured speedup vs copy rate per item and method, over the formula's curve per corpus."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(7, 5), layout="constrained")
    FigureCanvasAgg(figure)
    ax = figure.add_subplot()
    methods = list(dict.fromkeys(m for row in report.items for m in row.methods))
    for i, method in enumerate(methods):
        results = [row.methods[method] for row in report.items if method in row.methods]
        points = [(r.copy_rate, r.speedup_vs_greedy) for r in results if r.speedup_vs_greedy]
        if points:
            xs, ys = zip(*points, strict=True)
            ax.scatter(xs, ys, marker=MARKERS[i % len(MARKERS)], color=f"C{i}", label=method)
    grid = [x / 100 for x in range(101)]
    corpora = dict.fromkeys(row.item.corpus for row in report.items)
    for j, corpus in enumerate(corpora):
        run = pooled_mean_accepted(report, corpus)
        if run:
            curve = [predicted_speedup(f, run) for f in grid]
            label = f"1/(f/L + 1 - f), {corpus}: L = {run:.2f}"
            ax.plot(grid, curve, linestyle="--", color=f"C{len(methods) + j}", label=label)
    ax.axhline(1.0, color="grey", linewidth=0.5)
    ax.set_xlim(0, 1)
    ax.set_xlabel("copy rate f (accepted draft tokens / new tokens)")
    ax.set_ylabel("measured speedup vs greedy (ratio of tok/s)")
    ax.set_title(f"pld bench: {report.model} ({report.device}, {report.weights})")
    ax.legend(fontsize="small")
    try:
        figure.savefig(path, dpi=120)
    except OSError as exc:
        raise PldError(f"{path}: cannot write the plot ({exc.strerror or exc})") from None
