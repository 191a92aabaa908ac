"""`make demo` on the real default model: the edit changes only what it asks, the summary ends on
its own (no loop). The commands are read from the Makefile, so this checks the demo as it is."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest

from pld_cli.core.repetition import repeated_share

ROOT = Path(__file__).parents[2]


def demo_command(kind: str) -> list[str]:
    """The arguments of the demo's `pld KIND ...` line (continuation lines joined)."""
    makefile = (ROOT / "Makefile").read_text().replace("\\\n", " ")
    line = re.search(rf"\$\(BIN\)/pld {kind} (.*)", makefile)[1]
    return [kind, *(str(ROOT / a) if a.startswith("samples/") else a for a in shlex.split(line))]


def test_the_demo_commands_are_found():
    edit, summary = demo_command("edit"), demo_command("summarize")
    assert "--diff" in edit and "-i" in edit and Path(edit[1]).is_file()
    assert Path(summary[1]).is_file()


@pytest.mark.slow
def test_the_demo_edit_changes_only_what_it_asks(pld, default_model):
    code, out, err = pld(*demo_command("edit"), "-q")
    assert code == 0, err
    changed = [line for line in out.splitlines() if line[:1] in "+-" and line[:3] not in "+++---"]
    assert changed == ["-  port: 8000", "+  port: 9000"]


@pytest.mark.slow
def test_the_demo_summary_ends_without_a_loop(pld, default_model):
    args = [a for a in demo_command("summarize") if a not in ("--stats", "--compare")]
    code, out, err = pld(*args, "--json", "-q")
    assert code == 0, err
    result = json.loads(out)
    assert result["stop"] == "eos"  # not the loop stop, nor the token limit
    assert repeated_share(default_model.tokenizer(result["text"])["input_ids"]) == 0.0
