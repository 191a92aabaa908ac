"""A file comes back as the model left it: --write with an editor that rewrites nothing, or one
line, checked on the file's bytes, mode and inode. (The model does not matter here: what is tested
is pld's writing, so a scripted `run` stands in for the decode, writing LF lines and a final
newline as a model does.)"""

from __future__ import annotations

import json
import os

import pytest

from pld_cli.core.stats import Stats
from pld_cli.errors import ExitStatus
from pld_cli.tasks.result import Result


@pytest.fixture
def model_edit(monkeypatch):
    """Rewrites the file as a model would (LF lines, a final newline), renaming old to new;
    files containing 'LONG' stop at --max-new-tokens."""

    def run_task(loaded, task, config, observe=None):
        text = task.document.replace("\r\n", "\n").rstrip("\n").replace("old", "new") + "\n"
        stop = "max_new_tokens" if "LONG" in task.document else "eos"
        return Result(text, [1], Stats(new_tokens=1, passes=1, decode_s=0.1, stop=stop))

    monkeypatch.setattr("pld_cli.cli.run.run_task", run_task)


def write(tmp_path, data: bytes, name: str = "f.py"):
    path = tmp_path / name
    path.write_bytes(data)
    return path


@pytest.mark.parametrize("data", [b"a = 1\r\nb = 2\r\n", b"a = 1\nb = 2", b"a = 1\r\nb = 2"])
def test_an_unchanged_file_is_not_rewritten(pld, tiny, tmp_path, model_edit, data):
    path = write(tmp_path, data)
    link = tmp_path / "link.py"
    link.symlink_to(path)
    for target in (path, link):
        before = os.stat(path)
        code, out, err = pld("edit", str(target), "-i", "nothing", "--write", *tiny)
        assert code == 0, err
        assert f"{target}: no changes, not rewritten" in err and "wrote" not in err
        assert path.read_bytes() == data and os.stat(path).st_ino == before.st_ino
        assert link.is_symlink()


@pytest.mark.parametrize(
    "data,written",
    [
        (b"old = 1\r\nb = 2\r\n", b"new = 1\r\nb = 2\r\n"),
        (b"old = 1\nb = 2", b"new = 1\nb = 2"),
    ],
)
def test_a_changed_file_keeps_its_endings_and_last_line(
    pld, tiny, tmp_path, model_edit, data, written
):
    path = write(tmp_path, data)
    os.chmod(path, 0o640)
    code, _, err = pld("edit", str(path), "-i", "rename", "--write", *tiny)
    assert code == 0 and f"wrote {path}" in err
    assert path.read_bytes() == written
    assert path.stat().st_mode & 0o777 == 0o640
    copy = write(tmp_path, data, "copy.py")
    _, out, _ = pld("edit", str(copy), "-i", "rename", *tiny)  # stdout: the same bytes
    assert out.encode() == written


def test_a_read_only_file_is_refused_before_the_model_loads(
    pld, tiny, tmp_path, model_edit, monkeypatch
):
    monkeypatch.setattr("pld_cli.engines.local.load_model", never_loaded)
    path = write(tmp_path, b"old = 1\n")
    os.chmod(path, 0o444)
    code, out, err = pld("edit", str(path), "-i", "rename", "--write", *tiny)
    assert code == ExitStatus.ERROR and out == ""
    assert "read-only (mode 444)" in err and "Traceback" not in err
    assert path.read_bytes() == b"old = 1\n"


def never_loaded(*_args, **_kwargs):
    raise AssertionError("the model was loaded")


def test_a_cut_edit_on_stdout_warns_and_exits_3(pld, tiny, tmp_path, model_edit):
    path = write(tmp_path, b"old = 1  # LONG\n")
    code, out, err = pld("edit", str(path), "-i", "rename", *tiny)
    assert code == ExitStatus.INCOMPLETE
    assert out == "new = 1  # LONG\n"
    assert "pld: warning: " in err and "incomplete" in err and "--max-new-tokens" in err


@pytest.mark.parametrize("how", [["--diff"], ["-o", "OUT"], ["--write"]])
def test_a_cut_edit_is_never_written_nor_diffed(pld, tiny, tmp_path, model_edit, how):
    path = write(tmp_path, b"old = 1  # LONG\n")
    out_file = tmp_path / "out.py"
    args = [str(out_file) if arg == "OUT" else arg for arg in how]
    code, out, err = pld("edit", str(path), "-i", "rename", *args, *tiny)
    assert code == ExitStatus.INCOMPLETE and out == ""
    (line,) = [line for line in err.splitlines() if line.startswith("pld: error:")]
    assert ("edit incomplete: no diff" if how == ["--diff"] else "left untouched") in line
    assert path.read_bytes() == b"old = 1  # LONG\n" and not out_file.exists()


def test_json_has_a_record_for_every_file(pld, tiny, tmp_path, model_edit):
    good, cut = write(tmp_path, b"old\n", "a.py"), write(tmp_path, b"old LONG\n", "b.py")
    missing = tmp_path / "missing.py"
    code, out, err = pld(
        "edit", str(good), str(missing), str(cut), "-i", "r", "--write", "--json", *tiny
    )
    records = [json.loads(line) for line in out.splitlines()]
    assert [r["file"] for r in records] == [str(good), str(missing), str(cut)]
    assert records[0]["text"] == "new\n" and "error" not in records[0]
    assert "no such file" in records[1]["error"] and "left untouched" in records[2]["error"]
    assert code == ExitStatus.ERROR
    assert "1 file done, 2 failed (1 cut short at --max-new-tokens)" in err
    assert err.count("pld: loading") == 1  # one loading line


def test_a_diff_of_an_unchanged_crlf_file_is_empty(pld, tiny, tmp_path, model_edit):
    path = write(tmp_path, b"a = 1\r\nb = 2\r\n")
    code, out, err = pld("edit", str(path), "-i", "nothing", "--diff", *tiny)
    assert code == 0 and out == ""
    assert f"{path}: no changes" in err
