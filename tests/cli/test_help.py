"""`-h` fits a terminal, one line per option; `--help` keeps every word; neither shows `<bool>`."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
import typer

from pld_cli.cli.app import app
from pld_cli.cli.brief import fit
from pld_cli.cli.options import RUNTIME_HELP

COMMANDS = ["edit", "summarize", "bench", "serve"]


@pytest.fixture
def narrow(monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")


def option_names(command: str) -> list[str]:
    """Every option name the command accepts (its -h and --help included)."""
    click_command = typer.main.get_command(app).commands[command]
    ctx = click_command.make_context(command, ["-i", "x", "x"], resilient_parsing=True)
    params = click_command.get_params(ctx)
    options = [p for p in params if p.param_type_name == "option"]
    return sorted(name for p in options for name in [*p.opts, *p.secondary_opts])


def listed_names(page: str) -> list[str]:
    """The option names in the left column of a -h page (`-m, --model TEXT`, `--[no-]live`)."""
    names = []
    for line in page.splitlines():
        left = re.match(r" {2,6}(-.*?)(?: {2}|$)", line)
        for name in re.findall(r"(?:^|, )(--\[no-\][\w-]+|-[\w-]+)", left.group(1) if left else ""):
            plain = name.replace("[no-]", "")
            names += [plain, plain.replace("--", "--no-", 1)] if "[no-]" in name else [plain]
    return sorted(names)


def test_edit_short_help_fits_80_columns(pld, narrow):
    code, out, _ = pld("edit", "-h")
    assert code == 0
    lines = out.splitlines()
    assert len(lines) <= 90, len(lines)
    assert max(len(line) for line in lines) <= 80
    assert "Usage: " in lines[0] and lines[-1].endswith("edit --help")


@pytest.mark.parametrize("command", COMMANDS)
def test_short_help_lists_each_option_once(pld, narrow, command):
    code, out, _ = pld(command, "-h")
    assert code == 0
    assert listed_names(out) == option_names(command)
    assert max(len(line) for line in out.splitlines()) <= 80


@pytest.mark.parametrize("args", [["-h"], ["--help"], ["edit", "-h"], ["edit", "--help"]])
def test_no_type_after_a_flag(pld, narrow, args):
    code, out, _ = pld(*args)
    assert code == 0
    assert "<bool>" not in out


def test_short_help_is_the_first_sentence_full_help_the_whole(pld, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    _, short, _ = pld("edit", "-h")
    (runtime,) = [line for line in short.splitlines() if "--runtime" in line]
    assert runtime.endswith("  Which forward runs the model")  # its first sentence only
    monkeypatch.setenv("COLUMNS", "200")  # rich cuts a long word in a narrow column
    code, full, _ = pld("edit", "--help")
    assert code == 0
    words = " ".join(full.replace("│", " ").split())
    assert " ".join(RUNTIME_HELP.split()) in words


def test_top_level_and_bench_short_help(pld, narrow):
    code, out, _ = pld("-h")
    assert code == 0
    assert all(re.search(rf"^  {c} ", out, re.M) for c in COMMANDS)
    assert "--version" in out and len(out.splitlines()) <= 30
    code, out, _ = pld("bench", "-h")
    assert code == 0 and "--methods" in out and len(out.splitlines()) <= 90


def test_short_help_in_a_fresh_interpreter_loads_no_model_library():
    """As the command line runs: a new interpreter, its terminal's width, and no torch imported."""
    probe = (
        "import sys; from pld_cli.cli.app import main; sys.argv = ['pld', 'edit', '-h']\n"
        "try:\n    main()\nexcept SystemExit as exit:\n"
        "    assert exit.code == 0, exit.code\n"
        "    print('torch' in sys.modules, file=sys.stderr)"
    )
    env = {**os.environ, "COLUMNS": "60"}
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip() == "False"
    assert max(len(line) for line in done.stdout.splitlines()) <= 60


@pytest.mark.parametrize(
    "text,room,expected",
    [
        ("Short enough.", 20, "Short enough."),
        ("Do this; then that (and more)", 20, "Do this"),
        ("With -s: its tokenizer (a folder; default: its name)", 40, "With -s: its tokenizer"),
        ("One long clause without any break", 20, "One long clause…"),
        (
            "The server's API key, if any ($OPENAI_API_KEY)",
            40,
            "The server's API key… ($OPENAI_API_KEY)",
        ),
    ],
)
def test_fit_cuts_at_a_clause_then_a_word(text, room, expected):
    assert fit(text, room) == expected
    assert len(fit(text, room)) <= room
