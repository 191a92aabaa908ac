"""`pld bench`: decoding methods compared on corpora of edit and summarize tasks, one model loaded.

Everything the user can get wrong (methods, manifests, documents, the plot's matplotlib) is
checked before the model loads; results go to a table, `--json FILE` and `--plot FILE.png`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from pld_cli.bench import view as bench_view
from pld_cli.bench.corpus import load_corpora
from pld_cli.bench.report import parse_methods, run_bench
from pld_cli.cli.options import (
    DeviceOpt,
    DraftOpt,
    DtypeOpt,
    MaxNewOpt,
    ModelOpt,
    NgramMaxOpt,
    NgramMinOpt,
    NumDraftOpt,
    QuietOpt,
    RemoteCodeOpt,
    RevisionOpt,
    RuntimeOpt,
    SeedOpt,
    TemperatureOpt,
    TopKOpt,
    TopPOpt,
    VerboseOpt,
    decode_config,
    model_spec,
)
from pld_cli.cli.render import Ui
from pld_cli.errors import PldError
from pld_cli.files import atomic_write
from pld_cli.tasks.models import load_model
from pld_cli.tasks.pipeline import ready

BENCH = "Benchmark"


def bench(
    corpus_dir: Annotated[
        list[Path],
        typer.Argument(help="Corpus folders, each with a manifest.jsonl."),
    ],
    methods: Annotated[
        str,
        typer.Option(
            help="Comma-separated: greedy, pld, pld-fixed, hf-pld, hf-greedy; "
            "greedy@dynamic (or @static) runs pld's own methods on that runtime.",
            rich_help_panel=BENCH,
        ),
    ] = "greedy,pld,hf-pld",
    repeat: Annotated[
        int,
        typer.Option(
            min=1, help="Runs per item and method; times are medians.", rich_help_panel=BENCH
        ),
    ] = 1,
    json_file: Annotated[
        Path | None,
        typer.Option(
            "--json", help="Write the results as JSON to this file.", rich_help_panel=BENCH
        ),
    ] = None,
    plot: Annotated[
        Path | None,
        typer.Option(
            help="Save a speedup-vs-copy-rate plot (PNG); needs matplotlib.", rich_help_panel=BENCH
        ),
    ] = None,
    check: Annotated[
        bool,
        typer.Option(
            "--check", help="Exit 1 if any pld output differs from greedy.", rich_help_panel=BENCH
        ),
    ] = False,
    model: ModelOpt = None,
    revision: RevisionOpt = None,
    device: DeviceOpt = "auto",
    dtype: DtypeOpt = "auto",
    runtime: RuntimeOpt = "auto",
    trust_remote_code: RemoteCodeOpt = False,
    max_new_tokens: MaxNewOpt = 256,
    ngram_max: NgramMaxOpt = 3,
    ngram_min: NgramMinOpt = 1,
    num_draft: NumDraftOpt = 24,
    draft: DraftOpt = "adaptive",
    temperature: TemperatureOpt = 0.0,
    top_p: TopPOpt = 1.0,
    top_k: TopKOpt = 0,
    seed: SeedOpt = 0,
    quiet: QuietOpt = False,
    verbose: VerboseOpt = False,
) -> None:
    """Benchmark greedy, pld and transformers' prompt lookup on corpora; table, JSON, plot."""
    params = locals()
    config, spec = decode_config(params), model_spec(params)
    chosen = parse_methods(methods)
    if check and not {"greedy", "pld"} <= set(chosen):
        raise PldError("--check needs both greedy and pld in --methods", code=2)
    if check and temperature > 0:
        raise PldError("--check compares greedy outputs: it needs --temperature 0", code=2)
    if plot is not None:
        bench_view.require_matplotlib()
    items = load_corpora(corpus_dir)
    ui = Ui(quiet=quiet, live=False, verbose=verbose)
    ui.quiet_libraries()
    with ui.progress("loading model") as report_load:
        loaded = load_model(spec, report_load)
        ready(loaded, 0, config, report=report_load, note=ui.detail)  # calibration, once
    total = len(chosen) * (1 + repeat * len(items))
    with bench_view.progress(total, quiet) as advance:
        report = run_bench(loaded, items, chosen, config, repeat, advance)
    if json_file is not None:
        atomic_write(json_file, json.dumps(report.as_json(), indent=2, ensure_ascii=False) + "\n")
    if plot is not None:
        bench_view.plot(report, plot)
    if json_file is None or not quiet:
        bench_view.show(report, to_stderr=json_file is not None)
    diverging = report.diverging("pld")
    if check and diverging:
        raise PldError(
            f"--check: pld output differs from greedy on {len(diverging)} of "
            f"{len(report.items)} items: {', '.join(diverging)}"
        )
