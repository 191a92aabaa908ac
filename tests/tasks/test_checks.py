"""Format checks and structure summaries of an edit (tasks/checks.py), one case per format."""

from __future__ import annotations

from pathlib import Path

import pytest

from pld_cli.tasks.checks import check_edit, summary_line

SAMPLES = Path(__file__).parents[2] / "samples" / "edit"

BROKEN = [
    ("a.py", "def f(x):\n    return x\n", "def f(x:\n    return x\n", "Python", "line 1"),
    ("a.json", '{"a": {"b": 1},\n "c": 2}\n', '{"a": {"b": 1},\n "c": 2\n', "JSON", "line 3"),
    ("a.toml", "a = 1\n[b]\nc = 2\n", "a = 1\n[b\nc = 2\n", "TOML", "line 2, column"),
    ("a.yaml", "a:\n  b: 1\nc: 2\n", "a:\n  b: [1\nc: 2\n", "YAML", "line 3, column"),
]


@pytest.mark.parametrize("path,before,after,fmt,where", BROKEN, ids=[b[3] for b in BROKEN])
def test_a_broken_edit_is_caught_with_its_position(path, before, after, fmt, where):
    check = check_edit(path, before, after)
    assert check.format == fmt and check.broken
    assert check.error.startswith(where)
    assert check_edit(path, before, before).parses is True


def test_a_file_broken_before_the_edit_is_not_checked():
    check = check_edit("a.json", "{oops", "{still oops")
    assert check.format == "JSON" and check.parses is None and not check.broken


def test_unknown_formats_are_not_checked():
    assert check_edit("a.js", "x(", "y(").parses is None


def test_yaml_key_paths_to_depth_two_removed_and_added():
    original = (SAMPLES / "change_config.yaml").read_text()
    gone = original[: original.index("  staging:")]
    check = check_edit("change_config.yaml", original, gone + "extra:\n  key: 1\n")
    assert check.parses
    assert "environments.staging" in check.removed and "environments.production" in check.removed
    assert "metrics" in check.removed and "metrics.port" not in check.removed  # under metrics
    assert "environments.development" not in check.removed
    assert check.added == ["extra"]


def test_python_functions_classes_and_methods():
    before = "def f():\n    pass\n\nclass C:\n    def m(self):\n        pass\n"
    after = "def g():\n    pass\n\nclass C:\n    pass\n"
    check = check_edit("a.py", before, after)
    assert check.removed == ["f()", "C.m()"] and check.added == ["g()"]


def test_markdown_headings_outside_code():
    before = "# T\n## A\n```\n# not a heading\n```\n## B\n"
    check = check_edit("a.md", before, "# T\n## A\n")
    assert check.removed == ["## B"] and check.added == []


def test_summary_line_is_a_diffstat():
    before = "def f():\n    return 0\n"
    check = check_edit("a.py", before, "def f():\n    return 1\n\n\ndef g():\n    return 2\n")
    line = summary_line("a.py", check)
    assert line.startswith("a.py | 6 +++++-")
    assert "5 insertions(+), 1 deletion(-)" in line and "added: g()" in line
