"""`pld --server` against pld serve, beside tests/cli/test_server_cli.py's scripted server: the
same files print the same text as pld on this machine, a wrong -m is refused, and a pld that is
interrupted frees the server's slots at once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

PLD = str(Path(sys.executable).parent / "pld")
NOTES = {
    "ferry.txt": "The ferry to the island now leaves at 7:40, not 8:10, from pier 3.\n",
    "bakery.txt": "The bakery on Elm Street closes for two weeks in August for repairs.\n",
    "library.txt": "The city library opens a second reading room with 40 seats on Monday.\n",
}


def documents(folder: Path, texts: dict[str, str]) -> list[str]:
    for name, text in texts.items():
        (folder / name).write_text(text)
    return [str(folder / name) for name in texts]


def test_files_through_pld_serve_print_what_pld_prints_here(pld, pld_server, tmp_path):
    paths = documents(tmp_path, NOTES)
    args = ["summarize", *paths, "--max-new-tokens", "48"]
    code, here, err = pld(*args)
    assert code in (0, 3), err
    code, served, err = pld(*args, "--server", pld_server.url, "-j", "3")
    assert code in (0, 3), err
    assert served == here and here.count("==> ") == 3


def test_a_model_the_server_does_not_serve_is_refused(pld, pld_server, tmp_path):
    (path,) = documents(tmp_path, {"a.txt": "alpha\n"})
    code, _, err = pld("summarize", path, "--server", pld_server.url, "-m", "gpt-4o")
    assert code == 2 and "serves SmolLM2-135M-Instruct" in err


def sigint_as_from_a_terminal() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_an_interrupted_pld_frees_the_servers_slots(pld_server, tmp_path):
    texts = {f"{n}.txt": f"Count from 1 to 1000 ({n}).\n" for n in "abc"}
    args = [PLD, "summarize", *documents(tmp_path, texts), "--allow-repetition"]
    args += ["--max-new-tokens", "1500", "--server", pld_server.url, "-j", "3"]
    client = subprocess.Popen(
        args,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=os.environ | {"HF_HUB_OFFLINE": "1"},
        preexec_fn=sigint_as_from_a_terminal,
    )
    holder = pld_server.holder
    deadline = time.perf_counter() + 120
    while holder.users < 3:
        assert time.perf_counter() < deadline and client.poll() is None, client.communicate()
        time.sleep(0.05)
    client.send_signal(signal.SIGINT)
    _, err = client.communicate(timeout=60)
    assert client.returncode == 130 and "Traceback" not in err
    interrupted = time.perf_counter()
    while holder.users or holder.current.batch.held:
        assert time.perf_counter() - interrupted < 15, "the server kept decoding"
        time.sleep(0.05)
