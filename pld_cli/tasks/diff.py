"""An edit shown as a unified diff that `git apply` and `patch -p1` take (a/ and b/ prefixes)."""

from __future__ import annotations

import difflib
import os

NO_NEWLINE = "\\ No newline at end of file\n"


def unified(before: str, after: str, path: str) -> str:
    """The diff from before to after of the file at path; empty when nothing changed."""
    name = diff_path(path)
    lines = difflib.unified_diff(
        before.splitlines(keepends=True),
        after.splitlines(keepends=True),
        fromfile=f"a/{name}",
        tofile=f"b/{name}",
    )
    # A last line without its newline gets one, plus the marker that says it had none.
    return "".join(line if line.endswith("\n") else line + "\n" + NO_NEWLINE for line in lines)


def diff_path(path: str) -> str:
    """The path as git names it: relative to the current folder when the file lies under it."""
    relative = os.path.relpath(os.path.abspath(path))
    if relative.startswith(os.pardir):
        return os.path.abspath(path).lstrip(os.sep).replace(os.sep, "/")
    return relative.replace(os.sep, "/")
