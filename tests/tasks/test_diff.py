"""Edits as unified diffs that git apply and patch take."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from pld_cli.tasks.diff import unified

BEFORE = "def f(x):\n\treturn x + 1\n\n\ndef g():\n    pass\n"


def apply(tmp_path, monkeypatch, before: str, after: str, *command: str) -> str:
    (tmp_path / "pkg").mkdir()
    path = tmp_path / "pkg" / "a.py"
    path.write_text(before)
    monkeypatch.chdir(tmp_path)
    patch = unified(before, after, "pkg/a.py")
    subprocess.run([*command], input=patch, text=True, check=True, capture_output=True)
    return path.read_text()


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_git_apply_takes_the_diff(tmp_path, monkeypatch):
    after = BEFORE.replace("x + 1", "x + 2")
    assert apply(tmp_path, monkeypatch, BEFORE, after, "git", "apply", "-") == after


@pytest.mark.skipif(shutil.which("patch") is None, reason="needs patch")
def test_patch_p1_takes_a_diff_that_drops_the_last_newline(tmp_path, monkeypatch):
    after = BEFORE.rstrip("\n") + "  # end"
    assert apply(tmp_path, monkeypatch, BEFORE, after, "patch", "-p1") == after


def test_headers_name_a_and_b_and_no_change_is_empty(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    patch = unified(BEFORE, BEFORE.replace("g()", "h()"), str(tmp_path / "src" / "a.py"))
    assert patch.startswith("--- a/src/a.py\n+++ b/src/a.py\n@@")
    assert unified(BEFORE, BEFORE, "a.py") == ""
