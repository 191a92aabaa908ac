"""Bad inputs, output targets and model names fail in one line before any model library loads."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from pld_cli.errors import ExitStatus

DOC = b"Revenue rose by 12 percent.\n"


def one_error_line(err: str) -> str:
    assert "Traceback" not in err
    errors = [line for line in err.splitlines() if line.startswith("pld: error:")]
    assert len(errors) == 1, err
    return errors[0]


def never_loaded(*_args, **_kwargs):
    raise AssertionError("the model was loaded")


@pytest.fixture
def no_load(monkeypatch):
    monkeypatch.setattr("pld_cli.engines.local.load_model", never_loaded)


def in_fresh_process(args: list[str], stdin: bytes = b"", env: dict | None = None):
    """(exit status, stderr, whether torch was imported) of `pld ARGS` in a new interpreter."""
    probe = (
        "import sys\nfrom pld_cli.cli.app import main\n"
        f"sys.argv = ['pld', *{args!r}]\n"
        "try:\n    main()\nexcept SystemExit as exc:\n"
        "    print('torch' in sys.modules, file=sys.stderr); sys.exit(exc.code)\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], input=stdin, capture_output=True, env=env)
    err = done.stderr.decode()
    *lines, torch = err.splitlines()
    return done.returncode, "\n".join(lines), torch == "True"


@pytest.mark.parametrize(
    "args,stdin,message",
    [
        (["summarize", "MISSING"], b"", "no such file"),
        (["summarize", "EMPTY"], b"", "is empty"),
        (["summarize", "-"], b"", "stdin: is empty"),
        (["edit", "UTF16", "-i", "x"], b"", "looks like UTF-16"),
        (["summarize", "OK", "-o", "NOFOLDER/out.txt"], b"", "does not exist"),
        (["edit", "OK", "-i", "x", "--write", "-m", "NOMODEL"], b"", "no such model folder"),
    ],
    ids=["missing", "empty", "empty-stdin", "utf16", "output-folder", "model-path"],
)
def test_bad_input_fails_before_torch_is_imported(tmp_path, args, stdin, message):
    (tmp_path / "empty.txt").write_bytes(b"")
    (tmp_path / "ok.txt").write_bytes(DOC)
    (tmp_path / "u16.txt").write_bytes("x = 1\n".encode("utf-16"))
    names = {
        "MISSING": "missing.txt",
        "EMPTY": "empty.txt",
        "UTF16": "u16.txt",
        "OK": "ok.txt",
        "NOFOLDER/out.txt": "no/out.txt",
        "NOMODEL": "no/such/model",
    }
    args = [str(tmp_path / names[a]) if a in names else a for a in args]
    code, err, torch = in_fresh_process(args, stdin)
    assert code == ExitStatus.ERROR
    assert message in one_error_line(err)
    assert not torch


def test_an_output_target_is_checked_before_the_model_loads(pld, tiny, tmp_path, no_load):
    (tmp_path / "ok.txt").write_bytes(DOC)
    code, out, err = pld(
        "summarize", str(tmp_path / "ok.txt"), "-o", "/nonexistent/dir/o.txt", *tiny
    )
    assert code == ExitStatus.ERROR and out == ""
    assert "/nonexistent/dir/o.txt: cannot write: the folder" in one_error_line(err)


@pytest.mark.parametrize("how", ["option", "env"])
def test_a_path_that_names_nothing_is_no_hub_id(pld, monkeypatch, how, no_load):
    args = ["-m", "./no/such/model"] if how == "option" else []
    if how == "env":
        monkeypatch.setenv("PLD_MODEL", "/tmp/nonexistent")
    code, _, err = pld("summarize", *args, stdin=DOC)
    assert code == ExitStatus.ERROR
    assert one_error_line(err).endswith(": no such model folder or file")


def test_an_empty_folder_is_not_a_model_and_debug_shows_the_traceback(pld, tmp_path, no_load):
    code, _, err = pld("summarize", "-m", str(tmp_path), stdin=DOC)
    assert code == ExitStatus.ERROR
    assert "not a model folder (no config.json)" in one_error_line(err)
    code, _, err = pld("summarize", "-m", str(tmp_path), "--debug", stdin=DOC)
    assert code == ExitStatus.ERROR and "Traceback" in err and "check_source" in err


def test_a_junk_gguf_is_bad_input_in_one_line(pld, tmp_path, no_load):
    junk = tmp_path / "junk.gguf"
    junk.write_bytes(b"this is no model\n")
    code, _, err = pld("summarize", "-m", str(junk), stdin=DOC)
    assert code == ExitStatus.ERROR
    line = one_error_line(err)
    assert "not a GGUF file" in line and "--debug" not in line


@pytest.mark.parametrize("offline", [True, False])
def test_an_unknown_hub_id_offline_is_one_line_at_once(pld, monkeypatch, offline, no_load):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1" if offline else "0")
    if not offline:  # no network: a hub that refuses connections
        monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    start = time.perf_counter()
    code, _, err = pld("summarize", "-m", "zzqx-nobody/not-a-model", stdin=DOC)
    assert time.perf_counter() - start < 3
    assert code == ExitStatus.ERROR
    line = one_error_line(err)
    assert "zzqx-nobody/not-a-model" in line and "not in the local cache" in line
    assert len(err.strip().splitlines()) == 1  # and nothing of huggingface_hub's


def test_json_records_failures_when_nothing_could_be_read(pld, tmp_path, no_load):
    missing = [str(tmp_path / "a.txt"), str(tmp_path / "b.txt")]
    code, out, err = pld("summarize", *missing, "--json")
    assert code == ExitStatus.ERROR
    records = [json.loads(line) for line in out.splitlines()]
    assert [r["file"] for r in records] == missing and all("error" in r for r in records)
    assert "no file could be read" in err


def test_a_bad_manifest_line_fails_before_torch_is_imported(tmp_path):
    (tmp_path / "manifest.jsonl").write_text("not json\n")
    code, err, torch = in_fresh_process(["bench", str(tmp_path)])
    assert code == ExitStatus.ERROR
    assert "manifest.jsonl:1: not valid JSON" in one_error_line(err)
    assert not torch
