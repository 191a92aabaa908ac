"""An edit that breaks its file's format, or removes its structure, is shown but not written.

The edits are scripted (the instruction `OLD=>NEW` replaces text and the call ends at EOS), so
these test what the command line does with an edit, not what a model writes."""

from __future__ import annotations

import json

import pytest

from pld_cli.core.stats import Stats
from pld_cli.tasks.result import Result

CONFIG = "service:\n  name: ledger\n  port: 80\nlogging:\n  level: info\n"


@pytest.fixture(autouse=True)
def scripted_edit(monkeypatch):
    def run_task(loaded, task, config, observe=None):
        old, new = task.instruction.split("=>")
        text = task.document.replace(old, new)
        return Result(text, [1, 2], Stats(new_tokens=2, passes=1, decode_s=0.1, stop="eos"))

    monkeypatch.setattr("pld_cli.cli.run.run_task", run_task)


def errors(err: str) -> list[str]:
    assert "Traceback" not in err
    return [line for line in err.splitlines() if line.startswith("pld: error:")]


BROKEN = [
    ("a.py", "def f(x):\n    return x\n", "(x)=>(x"),
    ("a.json", '{"a": 1,\n "b": 2}\n', "2}=>2"),
    ("a.toml", "a = 1\n[b]\nc = 2\n", "[b]=>[b"),
    ("a.yaml", CONFIG, "80=>[80"),
]


@pytest.mark.parametrize("name,content,edit", BROKEN, ids=["python", "json", "toml", "yaml"])
def test_write_refuses_an_edit_that_does_not_parse(pld, tiny, tmp_path, name, content, edit):
    path = tmp_path / name
    path.write_bytes(content.encode())
    code, out, err = pld("edit", str(path), "-i", edit, "--write", *tiny)
    assert code == 1 and out == ""
    assert path.read_bytes() == content.encode()
    [line] = errors(err)
    assert "left untouched" in line and "does not parse as" in line and "line " in line
    assert sorted(p.name for p in tmp_path.iterdir()) == [name]
    code, _, err = pld("edit", str(path), "-i", edit, "--write", "--no-check", *tiny)
    assert code == 0 and path.read_text() == content.replace(*edit.split("=>"))


def test_stdout_and_diff_still_show_a_broken_edit_with_a_warning(pld, tiny, tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(CONFIG)
    code, out, err = pld("edit", str(path), "-i", "80=>[80", *tiny)
    assert code == 0 and out == CONFIG.replace("80", "[80")
    assert "warning: the edit does not parse as YAML (line 4, column" in err
    code, out, err = pld("edit", str(path), "-i", "80=>[80", "--diff", *tiny)
    assert code == 0 and "+  port: [80" in out and "warning:" in err


def test_json_and_diffstat_say_what_was_removed(pld, tiny, tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(CONFIG)
    code, out, err = pld("edit", str(path), "-i", "logging:\n  level: info\n=>", "--json", *tiny)
    assert code == 0
    check = json.loads(out)["check"]
    assert check["format"] == "YAML" and check["parses"] is True
    assert check["removed"] == ["logging"] and check["added"] == []
    assert "c.yaml | 2 -- (0 insertions(+), 2 deletions(-)) · removed: logging" in err


def test_write_that_removes_structure_needs_force(pld, tiny, tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(CONFIG)
    edit = ("-i", "logging:\n  level: info\n=>", "--write", *tiny)
    code, _, err = pld("edit", str(path), *edit)
    assert code == 1 and path.read_text() == CONFIG
    assert "removes logging" in errors(err)[0] and "--force" in errors(err)[0]
    code, _, err = pld("edit", str(path), *edit, "--force")
    assert code == 0 and path.read_text() == "service:\n  name: ledger\n  port: 80\n"


def test_several_files_are_checked_one_by_one(pld, tiny, tmp_path):
    good, bad = tmp_path / "good.json", tmp_path / "bad.json"
    good.write_text('{"a": 1}\n')
    bad.write_text('{"a": 1, "b": [1]}\n')
    code, _, err = pld("edit", str(good), str(bad), "-i", "1]=>1", "--write", *tiny)
    assert code == 1 and bad.read_text() == '{"a": 1, "b": [1]}\n'
    assert "bad.json" in errors(err)[0] and "1 of 2 files failed" in errors(err)[1]


@pytest.mark.parametrize("flag,suffix", [("--backup", ".bak"), ("--backup=.orig", ".orig")])
def test_backup_keeps_the_original(pld, tiny, tmp_path, flag, suffix):
    path = tmp_path / "a.py"
    path.write_text("def f():\n    return 1\n")
    path.chmod(0o640)
    code, _, err = pld("edit", flag, str(path), "-i", "1=>2", "--write", *tiny)
    assert code == 0, err
    kept = tmp_path / f"a.py{suffix}"
    assert kept.read_text() == "def f():\n    return 1\n" and kept.stat().st_mode & 0o777 == 0o640
    assert path.read_text() == "def f():\n    return 2\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["a.py", kept.name])


def test_backup_needs_write(pld, tiny, tmp_path):
    path = tmp_path / "a.py"
    path.write_text("x = 1\n")
    code, _, err = pld("edit", str(path), "-i", "1=>2", "--backup", *tiny)
    assert code == 2 and "--backup needs --write" in errors(err)[0]


def test_a_rename_is_not_a_removal(pld, tiny, tmp_path):
    path = tmp_path / "a.py"
    path.write_text("def f():\n    return 1\n")
    code, _, err = pld("edit", str(path), "-i", "def f=>def g", "--write", *tiny)
    assert code == 0 and "removed: f() · added: g()" in err


@pytest.mark.parametrize("answer,written", [(b"y\n", True), (b"\n", False)])
def test_on_a_terminal_a_removal_is_asked(pld, tiny, tmp_path, monkeypatch, answer, written):
    monkeypatch.setattr("pld_cli.cli.guard.interactive", lambda ui: True)
    path = tmp_path / "c.yaml"
    path.write_text(CONFIG)
    code, _, err = pld(
        "edit", str(path), "-i", "logging:\n  level: info\n=>", "-w", *tiny, stdin=answer
    )
    assert "the edit removes logging; replace" in err
    assert (code, path.read_text() != CONFIG) == ((0, True) if written else (1, False))
