"""The `pld` command line: data on stdout, everything else on stderr, one line per error."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path
from typing import Annotated

import typer

try:  # typer >= 0.2x vendors its own click
    from typer._click import exceptions as click_exceptions
except ImportError:
    from click import exceptions as click_exceptions

from pld_cli.bench.command import bench
from pld_cli.cli.options import (
    CompareOpt,
    DeviceOpt,
    DraftOpt,
    DtypeOpt,
    JsonOpt,
    LiveOpt,
    MaxNewOpt,
    ModelOpt,
    NgramMaxOpt,
    NgramMinOpt,
    NoPldOpt,
    NumDraftOpt,
    Options,
    QuietOpt,
    RemoteCodeOpt,
    RevisionOpt,
    RuntimeOpt,
    SeedOpt,
    StatsOpt,
    TemperatureOpt,
    TopKOpt,
    TopPOpt,
    VerboseOpt,
    options,
)
from pld_cli.errors import PldError
from pld_cli.files import atomic_write, read_document
from pld_cli.tasks.models import load_model
from pld_cli.tasks.pipeline import Result, ready, run, task_ids
from pld_cli.tasks.prompts import Task

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="Edit and summarize documents with a local language model, sped up by prompt lookup.",
)


@app.command()
def edit(
    file: Annotated[str, typer.Argument(help="The file to edit, or - for stdin.")],
    instruction: Annotated[str, typer.Option("-i", "--instruction", help="What to change.")],
    output: Annotated[
        Path | None, typer.Option("-o", "--output", help="Write the result to this file.")
    ] = None,
    write: Annotated[
        bool, typer.Option("-w", "--write", help="Replace FILE with the result.")
    ] = False,
    model: ModelOpt = None,
    revision: RevisionOpt = None,
    device: DeviceOpt = "auto",
    dtype: DtypeOpt = "auto",
    runtime: RuntimeOpt = "auto",
    trust_remote_code: RemoteCodeOpt = False,
    max_new_tokens: MaxNewOpt = 2048,
    ngram_max: NgramMaxOpt = 3,
    ngram_min: NgramMinOpt = 1,
    num_draft: NumDraftOpt = 24,
    draft: DraftOpt = "adaptive",
    temperature: TemperatureOpt = 0.0,
    top_p: TopPOpt = 1.0,
    top_k: TopKOpt = 0,
    seed: SeedOpt = None,
    no_pld: NoPldOpt = False,
    live: LiveOpt = True,
    quiet: QuietOpt = False,
    stats: StatsOpt = False,
    compare: CompareOpt = False,
    json_out: JsonOpt = False,
    verbose: VerboseOpt = False,
) -> None:
    """Rewrite FILE as the instruction asks; the whole updated file goes to stdout."""
    opts = options(locals())
    if write and output:
        raise PldError("--write and --output exclude each other", code=2)
    if write and file == "-":
        raise PldError("--write needs a FILE, not stdin", code=2)
    text, name = read_document(file)
    if not instruction.strip():
        raise PldError("the instruction is empty", code=2)
    destination = Path(file) if write else output
    execute(Task("edit", text, instruction.strip(), name), opts, destination)


@app.command()
def summarize(
    file: Annotated[
        str | None, typer.Argument(help="The document, or - / nothing for stdin.")
    ] = None,
    output: Annotated[
        Path | None, typer.Option("-o", "--output", help="Write the summary here.")
    ] = None,
    model: ModelOpt = None,
    revision: RevisionOpt = None,
    device: DeviceOpt = "auto",
    dtype: DtypeOpt = "auto",
    runtime: RuntimeOpt = "auto",
    trust_remote_code: RemoteCodeOpt = False,
    max_new_tokens: MaxNewOpt = 512,
    ngram_max: NgramMaxOpt = 3,
    ngram_min: NgramMinOpt = 1,
    num_draft: NumDraftOpt = 24,
    draft: DraftOpt = "adaptive",
    temperature: TemperatureOpt = 0.0,
    top_p: TopPOpt = 1.0,
    top_k: TopKOpt = 0,
    seed: SeedOpt = None,
    no_pld: NoPldOpt = False,
    live: LiveOpt = True,
    quiet: QuietOpt = False,
    stats: StatsOpt = False,
    compare: CompareOpt = False,
    json_out: JsonOpt = False,
    verbose: VerboseOpt = False,
) -> None:
    """Summarize a document; the summary goes to stdout."""
    opts = options(locals())
    text, name = read_document(file)
    execute(Task("summarize", text, name=name), opts, output)


app.command()(bench)


def execute(task: Task, opts: Options, destination: Path | None) -> None:
    ui = opts.ui
    ui.quiet_libraries()
    with ui.progress("loading model") as report:
        loaded = load_model(opts.model, report)
        positions = len(task_ids(loaded, task, opts.decode)) + opts.decode.max_new_tokens
        ready(loaded, positions, opts.decode, report=report, note=ui.detail)
    with ui.live() as observe:
        result = run(loaded, task, opts.decode, observe=observe)
    plain = None
    if opts.compare:
        with ui.progress("decoding again without drafting (--compare)"):
            plain = run(loaded, task, dataclasses.replace(opts.decode, use_pld=False))
        ui.comparison(result, plain)
    if opts.stats:
        label = "pld" if opts.decode.use_pld else "plain"
        ui.stats_table({label: result.stats} | ({"plain": plain.stats} if plain else {}))
    if destination is not None:
        save(result, destination, opts.decode.max_new_tokens)
        ui.note(f"wrote {destination}")
    if opts.json:
        print(json.dumps(as_json(result, loaded.name, plain), ensure_ascii=False))
    elif destination is None:
        sys.stdout.write(result.text)
        sys.stdout.flush()


def save(result: Result, destination: Path, max_new_tokens: int) -> None:
    if not result.complete:
        raise PldError(
            f"{destination} left untouched: generation stopped at {result.stats.stop} "
            f"({result.stats.new_tokens} tokens) before the model finished; "
            f"raise --max-new-tokens (now {max_new_tokens})"
        )
    atomic_write(destination, result.text)


def as_json(result: Result, model: str, plain: Result | None) -> dict:
    out = {"text": result.text, "model": model, "stats": result.stats.as_dict(),
           "stop": result.stats.stop}  # fmt: skip
    if plain is not None:
        out["compare"] = {
            "plain": plain.stats.as_dict(),
            "speedup": round(result.speedup_over(plain), 3),
            "identical": plain.token_ids == result.token_ids,
        }
    return out


def main() -> None:
    try:
        code = app(standalone_mode=False)
    except click_exceptions.UsageError as exc:
        print(f"pld: error: {exc.format_message()} (see pld --help)", file=sys.stderr)
        code = 2
    except click_exceptions.ClickException as exc:
        print(f"pld: error: {exc.format_message()}", file=sys.stderr)
        code = exc.exit_code
    except typer.Abort:
        code = 130
    except PldError as exc:
        print(f"pld: error: {exc}", file=sys.stderr)
        code = exc.code
    except KeyboardInterrupt:
        print("pld: interrupted", file=sys.stderr)
        code = 130
    except BrokenPipeError:
        code = 1
    sys.exit(code or 0)
