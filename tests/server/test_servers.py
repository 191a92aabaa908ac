"""pld --server against real servers, end to end: a vLLM (n-gram drafting on) and pld serve.

Each test but the last two runs against both. The vLLM runs are skipped unless PLD_TEST_SERVER
names one (`make test-server` starts it: scripts/test-server.sh, with the server's process group
in PLD_TEST_SERVER_PGID for the two tests that break it, vLLM's alone: the last, which kills it
mid-run, and the engine-core one, which the script runs alone against a second server). pld serve
runs in this process (tests/pld_server.py). Both serve pld's default model with a 2,048-token
context, so a long document must be cut to fit it.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from types import SimpleNamespace

import pytest

from pld_cli.core.config import DecodeConfig
from pld_cli.engines.server import open_engine
from pld_cli.tasks.pipeline import run_task
from pld_cli.tasks.prompts import Task, prompt_ids

VLLM = os.environ.get("PLD_TEST_SERVER")
SAMPLES = Path(__file__).parents[2] / "samples"
PLD = str(Path(sys.executable).parent / "pld")
ENV = os.environ | {"HF_HUB_OFFLINE": "1"}

vllm_only = pytest.mark.skipif(not VLLM, reason="needs PLD_TEST_SERVER (make test-server)")


@pytest.fixture(
    params=[
        pytest.param("vllm", marks=vllm_only),
        pytest.param("pld-serve", marks=pytest.mark.slow),
    ]
)
def url(request) -> str:
    """The server's URL: the vLLM PLD_TEST_SERVER names, or pld serve in this process."""
    return VLLM if request.param == "vllm" else request.getfixturevalue("pld_server").url


@pytest.fixture
def engine(url):
    settings = SimpleNamespace(
        server=url,
        api_key=None,
        timeout=600.0,
        token_timeout=60.0,
        model=None,
        tokenizer=None,
        jobs=1,
    )
    return open_engine(settings, lambda _: None)


def raw_completion(url: str, ids: list[int], max_tokens: int) -> list[int]:
    """What the server answers to the same prompt ids with no pld in between."""
    body = {
        "model": "SmolLM2-135M-Instruct",
        "prompt": ids,
        "max_tokens": max_tokens,
        "temperature": 0,
        "return_token_ids": True,
    }
    request = urllib.request.Request(
        f"{url}/v1/completions", json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=600) as response:
        return json.loads(response.read())["choices"][0]["token_ids"]


def run(url: str, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [PLD, *args, "--server", url], capture_output=True, text=True, timeout=900, cwd=cwd, env=ENV
    )


def test_the_stream_through_pld_is_what_the_server_answers_alone(url, engine):
    task = Task("summarize", (SAMPLES / "summarize/news.txt").read_text(), name="news.txt")
    ids = prompt_ids(engine.tokenizer, task)
    tokens, stats = engine.decode(ids, DecodeConfig(max_new_tokens=64))
    assert tokens == raw_completion(url, ids, 64)
    assert stats.drafts_known and stats.drafted_tokens > 0  # the server's per-request metrics
    done = run(
        url,
        "summarize",
        str(SAMPLES / "summarize/news.txt"),
        "--json",
        "--max-new-tokens",
        "64",
        "--allow-repetition",
    )
    assert done.returncode in (0, 3), done.stderr
    record = json.loads(done.stdout)
    assert record["text"] == run_task(engine, task, DecodeConfig(max_new_tokens=64)).text
    assert record["stats"]["new_tokens"] == len(tokens)


def test_an_edit_whose_diff_git_applies(url, tmp_path):
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    target = tmp_path / "app.yaml"
    shutil.copy(SAMPLES / "demo/app.yaml", target)
    done = run(
        url,
        "edit",
        "app.yaml",
        "-i",
        "Change the port to 9000.",
        "--diff",
        "--json",
        "--max-new-tokens",
        "512",
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    record = json.loads(done.stdout)
    assert record["stats"]["accepted_tokens"] > 0  # the server's drafts, copied from the file
    applied = subprocess.run(
        ["git", "apply", "-"], input=record["diff"], text=True, cwd=tmp_path, capture_output=True
    )
    assert applied.returncode == 0, applied.stderr
    assert "port: 9000" in target.read_text()


def test_three_files_at_once_one_binary(url, tmp_path):
    first, binary, last = tmp_path / "a.md", tmp_path / "b.bin", tmp_path / "c.txt"
    shutil.copy(SAMPLES / "summarize/abstract_intro.md", first)
    binary.write_bytes(b"\x00\x01\x02\x03")
    shutil.copy(SAMPLES / "summarize/news.txt", last)
    done = run(
        url, "summarize", str(first), str(binary), str(last), "-j", "3", "--max-new-tokens", "96"
    )
    assert done.returncode == 1 and "Traceback" not in done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("pld: error:")]
    assert "b.bin" in errors[0] and "binary" in errors[0]
    assert "1 of 3 files failed" in errors[-1]
    assert done.stdout.index(f"==> {first} <==") < done.stdout.index(f"==> {last} <==")


def test_a_document_longer_than_the_servers_context_is_summarized_in_chunks(url, tmp_path):
    parts = ["tech_doc.md", "postmortem.md", "meeting_notes.md", "readme.md", "changelog.md"]
    long = tmp_path / "long.md"
    long.write_text("\n\n".join((SAMPLES / "summarize" / p).read_text() for p in parts))
    done = run(url, "summarize", str(long), "--json", "-j", "4", "--max-new-tokens", "96")
    assert done.returncode in (0, 3), done.stderr
    record = json.loads(done.stdout)
    assert record["calls"] > 2 and record["text"].strip()
    assert max(c["prompt_tokens"] for c in record["chunks"]) + 96 <= 2048


@vllm_only
def test_a_server_killed_mid_run_leaves_every_file_as_it_was(tmp_path):
    """Last: it kills the server."""
    pld, paths, before = edits_in_flight(tmp_path, VLLM)
    os.killpg(int(os.environ["PLD_TEST_SERVER_PGID"]), signal.SIGKILL)
    _, err = pld.communicate(timeout=300)
    assert pld.returncode == 1 and "Traceback" not in err
    assert [path.read_bytes() for path in paths] == before
    errors = [line for line in err.splitlines() if line.startswith("pld: error:")]
    assert len(errors) == 4 and "3 of 3 files failed" in errors[-1]
    for path, line in zip(paths, errors, strict=False):
        assert str(path) in line and ("broke" in line or "ended the stream" in line), line


@vllm_only
def test_an_engine_core_stopped_mid_run_fails_the_files_within_a_minute(tmp_path):
    """As `systemctl stop` or a crashed engine does: SIGTERM to vLLM's engine core alone, its API
    server left up (scripts/test-server.sh runs this against a server of its own)."""
    pld, paths, before = edits_in_flight(tmp_path, VLLM)
    group = int(os.environ["PLD_TEST_SERVER_PGID"])
    found = subprocess.run(["pgrep", "-g", str(group), "-f", "EngineCore"], capture_output=True)
    core = int(found.stdout.split()[0])
    os.kill(core, signal.SIGTERM)
    start = time.perf_counter()
    _, err = pld.communicate(timeout=120)
    assert time.perf_counter() - start <= 60
    assert pld.returncode == 1 and "Traceback" not in err
    assert [path.read_bytes() for path in paths] == before
    errors = [line for line in err.splitlines() if line.startswith("pld: error:")]
    assert len(errors) == 4 and "3 of 3 files failed" in errors[-1]
    for path, line in zip(paths, errors, strict=False):
        assert str(path) in line, line


def edits_in_flight(folder: Path, url: str) -> tuple[subprocess.Popen, list[Path], list[bytes]]:
    """pld editing three sample files with --write on the server, once the server decodes them:
    the process (stderr piped), the files and their bytes before."""
    names = ["rename_symbol.py", "add_docstrings.py", "fix_bug.py"]
    paths = [folder / name for name in names]
    for name, path in zip(names, paths, strict=True):
        shutil.copy(SAMPLES / "edit" / name, path)
    before = [path.read_bytes() for path in paths]
    args = [PLD, "edit", *map(str, paths), "-i", "Add a comment above every function."]
    args += ["--write", "-j", "3", "--max-new-tokens", "768", "--server", url]
    pld = subprocess.Popen(args, stderr=subprocess.PIPE, text=True, env=ENV)
    wait_for_requests_running(pld, url)
    return pld, paths, before


def wait_for_requests_running(pld: subprocess.Popen, url: str, limit: float = 300) -> None:
    """Until the server is decoding what pld sent (its Prometheus gauge)."""
    start = time.perf_counter()
    while time.perf_counter() - start < limit:
        assert pld.poll() is None, pld.communicate()[1]
        with urllib.request.urlopen(f"{url}/metrics", timeout=10) as response:
            for line in response.read().decode().splitlines():
                if line.startswith("vllm:num_requests_running") and float(line.split()[-1]) >= 2:
                    return
        time.sleep(0.2)
    raise AssertionError("pld's requests never reached the server")
