"""`pld bench`: decoding methods compared on corpora of edit and summarize tasks, one model loaded.

Everything the user can get wrong (methods, manifests, documents, the plot's matplotlib) is
checked before the model loads; results go to a table (stderr when JSON goes to stdout), `--json`
on stdout, `-o FILE` (JSON) and `--plot FILE.png`. Model libraries load only when it runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from pld_cli.cli.options import Settings, with_options
from pld_cli.errors import ExitStatus, PldError

BENCH = "Benchmark"
HF_QUANTIZED = (
    "--quantize: transformers' generate() (hf-greedy, hf-pld) has no float weights left to run "
    "on; leave those methods out"
)
HF_FLOAT = (
    "--quantize auto: float weights, which transformers' generate() (hf-greedy, hf-pld) needs, "
    "so every method runs on the same weights (--methods greedy,pld for a GGUF's own blocks)"
)
# Help too long for one line: its first sentence (or clause) is the option's line under -h.
METHODS_HELP = (
    "Methods to compare, comma-separated (greedy, pld, pld-fixed, hf-pld, hf-greedy; "
    "greedy@native, or @static, @dynamic, runs pld's own methods on that runtime)."
)
CONCURRENCY_HELP = (
    "Also the prefill rate beside the machine's peak, and the corpus's throughput (wall time, "
    "prefill included): pld one document after another, pld with this many at once (-j), and "
    "with --server the server with this many in flight."
)


@with_options(max_new_tokens=256, seed=0)
def bench(
    corpus_dir: Annotated[
        list[Path], typer.Argument(help="Corpus folders, each with a manifest.jsonl.")
    ],
    methods: Annotated[
        str, typer.Option(help=METHODS_HELP, rich_help_panel=BENCH)
    ] = "hf-greedy,greedy,pld,hf-pld",
    repeat: Annotated[
        int,
        typer.Option(
            min=1, help="Runs per item and method; times are medians.", rich_help_panel=BENCH
        ),
    ] = 1,
    output: Annotated[
        Path | None,
        typer.Option(
            "-o", "--output", help="Write the results as JSON to this file.", rich_help_panel=BENCH
        ),
    ] = None,
    json_out: Annotated[
        bool,
        typer.Option(
            "--json", help="The results as one JSON object on stdout.", rich_help_panel=BENCH
        ),
    ] = False,
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
    concurrency: Annotated[
        int | None,
        typer.Option(min=1, show_default=False, help=CONCURRENCY_HELP, rich_help_panel=BENCH),
    ] = None,
    *,
    settings: Settings,
) -> None:
    """Benchmark pld against greedy and transformers' generate() on corpora; table, JSON, plot.

    With --server, the server (its first listed model; the same model as -m) is one more method,
    `server`, on the same prompt ids.
    """
    import dataclasses
    import json

    from pld_cli.bench.corpus import load_corpora

    items = load_corpora(corpus_dir)  # a bad manifest fails before torch is imported
    from pld_cli.bench import view as bench_view
    from pld_cli.bench.run import parse_methods, run_bench
    from pld_cli.cli.render import Ui
    from pld_cli.engines import open_engine
    from pld_cli.files import atomic_write
    from pld_cli.loading.models import load_model
    from pld_cli.loading.ready import ready
    from pld_cli.runtime.native.model import scheme_of

    config, spec = settings.decode_config(), settings.model_spec()
    chosen = parse_methods(methods, server=bool(settings.server))
    transformers_methods = any(m.startswith("hf-") for m in chosen)
    if settings.quantize.value not in ("auto", "none") and transformers_methods:
        raise PldError(HF_QUANTIZED, code=ExitStatus.USAGE)
    if settings.quantize.value == "auto" and transformers_methods:
        spec = dataclasses.replace(spec, quantize="none")  # every method on the same weights
    if check and not {"greedy", "pld"} <= set(chosen):
        raise PldError("--check needs both greedy and pld in --methods", code=ExitStatus.USAGE)
    if check and settings.temperature > 0:
        raise PldError(
            "--check compares greedy outputs: it needs --temperature 0", code=ExitStatus.USAGE
        )
    if plot is not None:
        bench_view.require_matplotlib()
    ui = Ui(quiet=settings.quiet, live=False, verbose=settings.verbose)
    ui.quiet_libraries()
    with ui.progress("loading model") as report_load:
        if spec.quantize == "none" and settings.quantize.value == "auto":
            report_load(HF_FLOAT)
        loaded = load_model(spec, report_load)
        if scheme_of(loaded.model) is not None and transformers_methods:
            raise PldError(f"{HF_QUANTIZED} (or pass --quantize none)", code=ExitStatus.USAGE)
        config = settings.decode_config(model_penalty=loaded.repetition_penalty)
        ready(loaded, 0, config, report=report_load, note=ui.detail)  # calibration, once
        server = None
        if settings.server:  # the first model it serves: -m names the local one
            server = open_engine(dataclasses.replace(settings, model=None), report_load)
    throughput_runs = 2 + (concurrency > 1) + bool(server) if concurrency else 0  # prefill, -j
    total = len(chosen) * (1 + repeat * len(items)) + throughput_runs
    with bench_view.progress(total, settings.quiet) as advance:
        report = run_bench(
            loaded,
            items,
            chosen,
            config,
            repeat,
            advance,
            settings.chunk_tokens,
            server,
            concurrency,
        )
    results = json.dumps(report.as_json(), indent=2, ensure_ascii=False) + "\n"
    if output is not None:
        atomic_write(output, results)
    if plot is not None:
        bench_view.plot(report, plot)
    if not settings.quiet or not (json_out or output):
        bench_view.show(report, to_stderr=json_out)
    if json_out:
        print(results, end="")
    diverging = report.diverging("pld")
    if check and diverging:
        raise PldError(
            f"--check: pld output differs from greedy on {len(diverging)} of "
            f"{len(report.items)} items: {', '.join(diverging)}"
        )
