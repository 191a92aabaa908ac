"""Checks on what an edit did to a file, before it may replace it: does it still parse, what did it
remove or add at the top level, and how many lines changed (as `git diff --stat` shows it).

The format comes from the file's name. A format is checked only when the original parses as it, so
a file that was already broken (or is not what its name says) is never held against the edit.
Pure functions over (path, original, edited); the command line decides what to refuse.
"""

from __future__ import annotations

import ast
import difflib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import PurePath

import yaml

try:  # Python 3.11+
    import tomllib
except ImportError:  # pragma: no cover - 3.10 has no TOML parser in the standard library
    tomllib = None

FORMATS = {
    ".py": "Python",
    ".pyi": "Python",
    ".json": "JSON",
    ".toml": "TOML",
    ".yaml": "YAML",
    ".yml": "YAML",
    ".md": "Markdown",
    ".markdown": "Markdown",
}
SHOWN = 6  # structure names listed on the summary line before "and N more"


class ParseError(Exception):
    """The text does not parse as its format: the parser's message and 1-based line/column."""

    def __init__(self, message: str, line: int | None, column: int | None) -> None:
        where = "" if line is None else f"line {line}" + (f", column {column}" if column else "")
        super().__init__(f"{where}: {message}" if where else message)


@dataclass(frozen=True)
class Check:
    """What an edit did to a file. parses is None when the format was not checked."""

    format: str | None
    parses: bool | None
    error: str | None = None  # the edited text's parse error
    removed: list[str] = field(default_factory=list)  # top-level structure gone after the edit
    added: list[str] = field(default_factory=list)
    insertions: int = 0
    deletions: int = 0

    @property
    def broken(self) -> bool:
        return self.parses is False

    def as_dict(self) -> dict:
        """The `--json` check object; these names are an interface."""
        out = {
            "format": self.format,
            "parses": self.parses,
            "removed": self.removed,
            "added": self.added,
            "insertions": self.insertions,
            "deletions": self.deletions,
        }
        return out | ({"error": self.error} if self.error else {})


def check_edit(path: str, original: str, edited: str) -> Check:
    """Parse both texts as the format of path, compare their structure, count changed lines."""
    insertions, deletions = line_counts(original, edited)
    fmt = FORMATS.get(PurePath(path).suffix.lower())
    parse = PARSERS.get(fmt)
    if parse is None:
        return Check(fmt, None, insertions=insertions, deletions=deletions)
    try:
        before = structure(fmt, parse(original))
    except ParseError:  # broken before the edit: nothing to hold the edit to
        return Check(fmt, None, insertions=insertions, deletions=deletions)
    try:
        after = structure(fmt, parse(edited))
    except ParseError as exc:
        return Check(fmt, False, str(exc), insertions=insertions, deletions=deletions)
    removed = outermost([name for name in before if name not in set(after)])
    added = outermost([name for name in after if name not in set(before)])
    return Check(fmt, True, None, removed, added, insertions, deletions)


def outermost(names: list[str]) -> list[str]:
    """The names without those under another listed one (`a.b` goes when `a` is listed)."""
    listed = set(names)
    return [n for n in names if not any(n.startswith(f"{m.rstrip('()')}.") for m in listed)]


def summary_line(label: str, check: Check) -> str:
    """One line like `git diff --stat`, then the structure removed and added."""
    changed = check.insertions + check.deletions
    line = f"{label} | {changed} {bar(check.insertions, check.deletions)}".rstrip()
    line += (
        f" ({plural(check.insertions, 'insertion')}(+), {plural(check.deletions, 'deletion')}(-))"
    )
    if check.broken:
        return f"{line} · does not parse as {check.format}"
    for word, names in (("removed", check.removed), ("added", check.added)):
        if names:
            more = f" and {len(names) - SHOWN} more" if len(names) > SHOWN else ""
            line += f" · {word}: {', '.join(names[:SHOWN])}{more}"
    return line


def plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def bar(insertions: int, deletions: int, width: int = 40) -> str:
    """git's +/- bar, scaled down to width characters when the change is larger."""
    total = insertions + deletions
    if total > width:
        insertions = round(insertions * width / total)
        deletions = width - insertions
    return "+" * insertions + "-" * deletions


def line_counts(original: str, edited: str) -> tuple[int, int]:
    """(lines added, lines removed) as a unified diff counts them."""
    plus = minus = 0
    matcher = difflib.SequenceMatcher(None, original.splitlines(), edited.splitlines(), False)
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op != "equal":
            minus += i2 - i1
            plus += j2 - j1
    return plus, minus


def parse_python(text: str) -> ast.Module:
    try:
        return ast.parse(text)
    except SyntaxError as exc:
        raise ParseError(exc.msg, exc.lineno, exc.offset) from None


def parse_json(text: str) -> object:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ParseError(exc.msg, exc.lineno, exc.colno) from None


def parse_toml(text: str) -> dict:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        # Python 3.11 and 3.12 give the position only inside the message.
        found = re.search(r"\(at line (\d+), column (\d+)\)", str(exc))
        message = re.sub(r"\s*\(at line \d+, column \d+\)", "", str(exc))
        line, column = (int(found[1]), int(found[2])) if found else (None, None)
        raise ParseError(message, line, column) from None


def parse_yaml(text: str) -> list:
    try:
        return list(yaml.safe_load_all(text))
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        message = exc.problem or exc.context or "invalid YAML"
        line, column = (mark.line + 1, mark.column + 1) if mark else (None, None)
        raise ParseError(message, line, column) from None
    except yaml.YAMLError as exc:
        raise ParseError(str(exc).splitlines()[0], None, None) from None


def parse_markdown(text: str) -> list[str]:
    """Markdown always parses; its structure is its headings outside code fences."""
    headings, fenced = [], False
    for line in text.splitlines():
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
        elif not fenced and re.match(r"#{1,6} \S", line):
            headings.append(line.strip())
    return headings


PARSERS: dict[str | None, Callable[[str], object]] = {
    "Python": parse_python,
    "JSON": parse_json,
    "YAML": parse_yaml,
    "Markdown": parse_markdown,
} | ({"TOML": parse_toml} if tomllib else {})


def structure(fmt: str, tree: object) -> list[str]:
    """Top-level names: Python functions `f()`, classes `C` and methods `C.m()`; key paths to
    depth 2 for data formats; headings for Markdown."""
    if fmt == "Python":
        return python_names(tree)
    if fmt == "Markdown":
        return tree
    documents = tree if fmt == "YAML" else [tree]
    return [path for document in documents for path in key_paths(document)]


def python_names(module: ast.Module) -> list[str]:
    names = []
    for node in module.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            if not isinstance(node, ast.ClassDef):
                names.append(f"{node.name}()")
                continue
            names.append(node.name)
            names += [
                f"{node.name}.{member.name}()"
                for member in node.body
                if isinstance(member, ast.FunctionDef | ast.AsyncFunctionDef)
            ]
    return names


def key_paths(value: object, prefix: str = "", depth: int = 2) -> list[str]:
    if not isinstance(value, dict) or depth == 0:
        return []
    paths = []
    for key, child in value.items():
        path = f"{prefix}{key}"
        paths += [path, *key_paths(child, path + ".", depth - 1)]
    return paths
