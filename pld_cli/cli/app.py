"""The `pld` command line: data on stdout, everything else on stderr, one line per error.

Commands import the model libraries only when they run, so `pld --help` and usage errors are fast.
"""

from __future__ import annotations

import sys
import traceback
from pathlib import Path
from typing import Annotated

import typer

try:  # typer >= 0.2x vendors its own click
    from typer._click import exceptions as click_exceptions
except ImportError:
    from click import exceptions as click_exceptions

from pld_cli import __version__
from pld_cli.cli.bench import bench
from pld_cli.cli.brief import PldCommand, PldGroup
from pld_cli.cli.options import Display, Drafting, Settings, with_options
from pld_cli.cli.preflight import Request, prepare
from pld_cli.cli.serve import serve
from pld_cli.errors import ExitStatus, PldError

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    cls=PldGroup,
    context_settings={"help_option_names": ["--help"]},  # -h: the short help (brief.py)
    help="Edit and summarize documents with a local language model, sped up by prompt lookup.",
)


def show_version(value: bool) -> None:
    if value:
        print(f"pld {__version__}")
        raise typer.Exit()


@app.callback()
def pld(
    version: Annotated[
        bool,
        typer.Option("--version", callback=show_version, is_eager=True, help="Show the version."),
    ] = False,
) -> None:
    """Edit and summarize documents with a local language model, sped up by prompt lookup.

    The default model is $PLD_MODEL when set, else the embedded SmolLM2-135M-Instruct.
    """


# Help too long for one line: its first sentence (or clause) is the option's line under -h.
FILES_HELP = "The files to edit, or - for stdin (several need --write, --diff or --json)."
DIFF_HELP = (
    "Print a unified diff instead of the file (on stderr with --write or -o, after the file is "
    "written)."
)
NO_CHECK_HELP = (
    "Write an edit even when it no longer parses (as the file's format: Python, JSON, TOML, YAML)."
)
FORCE_HELP = (
    "Allow a --write that removes top-level structure. Without --force, pld asks first on a "
    "terminal and refuses elsewhere."
)
BACKUP_HELP = (
    "With --write, keep each original as FILE.bak (or FILE + SUFFIX with --backup=SUFFIX), beside "
    "the file."
)


@app.command(cls=PldCommand)
@with_options(max_new_tokens=2048)
def edit(
    files: Annotated[list[str], typer.Argument(help=FILES_HELP)],
    instruction: Annotated[str, typer.Option("-i", "--instruction", help="What to change.")],
    output: Annotated[
        Path | None, typer.Option("-o", "--output", help="Write the result to this file.")
    ] = None,
    write: Annotated[
        bool, typer.Option("-w", "--write", help="Replace each FILE with its result.")
    ] = False,
    diff: Annotated[bool, typer.Option("--diff", help=DIFF_HELP)] = False,
    no_check: Annotated[bool, typer.Option("--no-check", help=NO_CHECK_HELP)] = False,
    force: Annotated[bool, typer.Option("--force", help=FORCE_HELP)] = False,
    backup: Annotated[
        str | None,
        typer.Option("--backup", metavar="[=SUFFIX]", show_default=False, help=BACKUP_HELP),
    ] = None,
    *,
    settings: Settings,
    drafting: Drafting,
    display: Display,
) -> ExitStatus:
    """Rewrite each FILE as the instruction asks; the updated file (or its diff) goes to stdout.

    A file too long for one pass is edited in pieces cut between top-level blocks and stitched
    back; a file is replaced only when every piece finished.
    """
    several = len(files) > 1
    if write and output:
        raise PldError("--write and --output exclude each other", code=ExitStatus.USAGE)
    if write and "-" in files:
        raise PldError("--write needs a FILE, not stdin", code=ExitStatus.USAGE)
    if several and "-" in files:
        raise PldError("stdin (-) can only be the one input", code=ExitStatus.USAGE)
    if several and output:
        raise PldError("--output takes one FILE; use --write for several", code=ExitStatus.USAGE)
    if several and not (write or diff or display.json):
        raise PldError(
            "several files to edit need --write, --diff or --json (their whole texts would run "
            "together on stdout)",
            code=ExitStatus.USAGE,
        )
    if not instruction.strip():
        raise PldError("the instruction is empty", code=ExitStatus.USAGE)
    if backup is not None and not (write and backup):
        raise PldError("--backup needs --write and a non-empty SUFFIX", code=ExitStatus.USAGE)
    request = Request(
        "edit",
        list(files),
        instruction.strip(),
        output,
        write,
        diff,
        not drafting.no_pld,
        check=not no_check,
        force=force,
        backup=backup,
    )
    return start(request, settings, display)


@app.command(cls=PldCommand)
@with_options(max_new_tokens=512)
def summarize(
    files: Annotated[
        list[str] | None, typer.Argument(help="The documents, or - / nothing for stdin.")
    ] = None,
    output: Annotated[
        Path | None, typer.Option("-o", "--output", help="Write the summary here.")
    ] = None,
    *,
    settings: Settings,
    drafting: Drafting,
    display: Display,
) -> ExitStatus:
    """Summarize documents; each summary goes to stdout (after a `==> FILE <==` line if several).

    A document longer than the context (or --chunk-tokens) is cut on its headings, paragraphs
    and sentences; the parts are summarized, then their summaries, until one call holds them.
    """
    files = files or [None]
    if len(files) > 1 and (None in files or "-" in files):
        raise PldError("stdin (-) can only be the one input", code=ExitStatus.USAGE)
    if len(files) > 1 and output:
        raise PldError("--output takes one document", code=ExitStatus.USAGE)
    request = Request("summarize", files, output=output, use_pld=not drafting.no_pld)
    return start(request, settings, display)


def start(request: Request, settings: Settings, display: Display) -> ExitStatus:
    """Everything checkable without the model libraries first; then import them and run."""
    if settings.server and display.compare:
        raise PldError(
            "--compare with --server: plain decoding is the server's own, started "
            "without --speculative-config",
            code=ExitStatus.USAGE,
        )
    entries = prepare(request, settings, display.json)
    from pld_cli.cli.run import execute

    return execute(request, entries, settings, display)


app.command(cls=PldCommand)(bench)
app.command(cls=PldCommand)(serve)


def optional_values(args: list[str]) -> list[str]:
    """A bare `--backup` means `--backup=.bak` (as `sed -i.bak`, the suffix only ever attached:
    click would take the next argument, a FILE, for it)."""
    end = args.index("--") if "--" in args else len(args)
    return [f"{a}=.bak" if a == "--backup" else a for a in args[:end]] + args[end:]


def main() -> None:
    debug = "--debug" in sys.argv[1:]
    try:
        code = app(args=optional_values(sys.argv[1:]), standalone_mode=False)
    except click_exceptions.UsageError as exc:
        print(f"pld: error: {exc.format_message()} (see pld --help)", file=sys.stderr)
        code = ExitStatus.USAGE
    except click_exceptions.ClickException as exc:
        print(f"pld: error: {exc.format_message()}", file=sys.stderr)
        code = exc.exit_code
    except typer.Abort:
        code = ExitStatus.INTERRUPTED
    except PldError as exc:
        if debug:  # what the library said, under pld's one line
            traceback.print_exc()
        print(f"pld: error: {exc}", file=sys.stderr)
        code = exc.code
    except KeyboardInterrupt:
        print("pld: interrupted", file=sys.stderr)
        code = ExitStatus.INTERRUPTED
    except BrokenPipeError:
        code = ExitStatus.ERROR
    except Exception as exc:  # noqa: BLE001 - anything else is a bug: one line unless --debug
        if debug:
            traceback.print_exc()
        message = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        hint = "" if debug else " (rerun with --debug for the traceback)"
        print(f"pld: error: {type(exc).__name__}: {message}{hint}", file=sys.stderr)
        code = ExitStatus.ERROR
    sys.exit(int(code or 0))
