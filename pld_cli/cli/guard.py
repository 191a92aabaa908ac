"""Whether an edit may replace a file, given what the checks found (tasks/checks.py).

An edit that no longer parses as the file's format is never written (unless --no-check): it is
still shown, with a warning. A --write that removes more top-level structure than it adds asks on
a terminal and is refused without --force elsewhere, since the original would be gone (a rename
removes one name and adds one: it passes).
"""

from __future__ import annotations

import sys
from pathlib import Path

from pld_cli.cli.render import Ui
from pld_cli.tasks.checks import Check


def refusal(
    check: Check, destination: Path | None, write: bool, enforce: bool, force: bool, ui: Ui
) -> str | None:
    """Why the edit must not go to destination (None: it may), after warning or asking."""
    if check.broken and enforce:
        problem = f"the edit does not parse as {check.format} ({check.error})"
        if destination is None:
            ui.note(f"warning: {problem}")
            return None
        return f"{destination} left untouched: {problem}; --no-check writes it anyway"
    if not write or force or len(check.removed) <= len(check.added):
        return None
    gone = ", ".join(check.removed)
    if interactive(ui) and ask(f"pld: the edit removes {gone}; replace {destination}? [y/N] "):
        return None
    return f"{destination} left untouched: the edit removes {gone}; --force writes it anyway"


def interactive(ui: Ui) -> bool:
    return sys.stdin is not None and sys.stdin.isatty() and ui.console.is_terminal


def ask(question: str) -> bool:
    sys.stderr.write(question)
    sys.stderr.flush()
    return sys.stdin.readline().strip().lower() in ("y", "yes")
