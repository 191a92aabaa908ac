"""The `pld` command line: data on stdout, everything else on stderr, one line per error."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path
from typing import Annotated

import click
import typer

from .decode import DecodeConfig
from .errors import PldError
from .files import atomic_write, read_document
from .models import ModelSpec, load_model
from .pipeline import Result, run
from .prompts import Task
from .render import Ui

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="Edit and summarize documents with a local language model, sped up by prompt lookup.",
)

MODEL = "Model"
DECODING = "Decoding"
DISPLAY = "Display"
ModelOpt = Annotated[
    str | None,
    typer.Option(
        "-m",
        "--model",
        help="Hub id, local folder or .gguf file [default: embedded SmolLM2-135M-Instruct]",
        rich_help_panel=MODEL,
    ),
]
RevisionOpt = Annotated[str | None, typer.Option(help="Hub revision.", rich_help_panel=MODEL)]
DeviceOpt = Annotated[str, typer.Option(help="auto | cpu | cuda | cuda:N", rich_help_panel=MODEL)]
DtypeOpt = Annotated[
    str, typer.Option(help="auto | float32 | bfloat16 | float16", rich_help_panel=MODEL)
]
RemoteCodeOpt = Annotated[
    bool, typer.Option(help="Allow the model's own code from the hub.", rich_help_panel=MODEL)
]
MaxNewOpt = Annotated[
    int, typer.Option(min=1, help="Most tokens to generate.", rich_help_panel=DECODING)
]
NgramMaxOpt = Annotated[
    int, typer.Option(min=1, help="Longest n-gram to match.", rich_help_panel=DECODING)
]
NgramMinOpt = Annotated[
    int, typer.Option(min=1, help="Shortest n-gram to match.", rich_help_panel=DECODING)
]
NumDraftOpt = Annotated[
    int, typer.Option(min=0, help="Most draft tokens verified per pass.", rich_help_panel=DECODING)
]
NoPldOpt = Annotated[
    bool,
    typer.Option("--no-pld", help="Plain greedy decoding, no drafting.", rich_help_panel=DECODING),
]
LiveOpt = Annotated[bool, typer.Option(help="Live view on a terminal.", rich_help_panel=DISPLAY)]
QuietOpt = Annotated[
    bool,
    typer.Option("-q", "--quiet", help="Nothing on stderr but errors.", rich_help_panel=DISPLAY),
]
StatsOpt = Annotated[
    bool,
    typer.Option("--stats", help="A stats table on stderr at the end.", rich_help_panel=DISPLAY),
]
CompareOpt = Annotated[
    bool,
    typer.Option(
        "--compare",
        help="Also decode without drafting; report the measured speedup.",
        rich_help_panel=DISPLAY,
    ),
]
JsonOpt = Annotated[
    bool,
    typer.Option(
        "--json", help="One JSON object on stdout instead of text.", rich_help_panel=DISPLAY
    ),
]
VerboseOpt = Annotated[
    bool, typer.Option("--verbose", help="Library warnings on stderr.", rich_help_panel=DISPLAY)
]


@dataclasses.dataclass(frozen=True)
class Options:
    model: ModelSpec
    decode: DecodeConfig
    ui: Ui
    stats: bool
    compare: bool
    json: bool


def options(params: dict) -> Options:
    """The shared options of edit and summarize, from a command's parameters."""
    if params["ngram_min"] > params["ngram_max"]:
        raise PldError("--ngram-min must not exceed --ngram-max", code=2)
    return Options(
        model=ModelSpec(
            params["model"],
            params["revision"],
            params["device"],
            params["dtype"],
            params["trust_remote_code"],
        ),
        decode=DecodeConfig(
            max_new_tokens=params["max_new_tokens"],
            num_draft=params["num_draft"],
            ngram_max=params["ngram_max"],
            ngram_min=params["ngram_min"],
            use_pld=not params["no_pld"],
        ),
        ui=Ui(quiet=params["quiet"], live=params["live"], verbose=params["verbose"]),
        stats=params["stats"],
        compare=params["compare"],
        json=params["json_out"],
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
    trust_remote_code: RemoteCodeOpt = False,
    max_new_tokens: MaxNewOpt = 2048,
    ngram_max: NgramMaxOpt = 3,
    ngram_min: NgramMinOpt = 1,
    num_draft: NumDraftOpt = 10,
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
    trust_remote_code: RemoteCodeOpt = False,
    max_new_tokens: MaxNewOpt = 512,
    ngram_max: NgramMaxOpt = 3,
    ngram_min: NgramMinOpt = 1,
    num_draft: NumDraftOpt = 10,
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


def execute(task: Task, opts: Options, destination: Path | None) -> None:
    ui = opts.ui
    quiet_libraries(ui.verbose)
    with ui.progress("loading model") as report:
        loaded = load_model(opts.model, report)
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
            "speedup": round(plain.stats.decode_s / result.stats.decode_s, 3),
            "identical": plain.token_ids == result.token_ids,
        }
    return out


def quiet_libraries(verbose: bool) -> None:
    """transformers' own progress bars and warnings would interleave with ours on stderr."""
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    if not verbose:
        hf_logging.set_verbosity_error()


def main() -> None:
    try:
        code = app(standalone_mode=False)
    except click.UsageError as exc:
        print(f"pld: error: {exc.format_message()} (see pld --help)", file=sys.stderr)
        code = 2
    except click.Abort:
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
