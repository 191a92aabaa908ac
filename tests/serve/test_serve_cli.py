"""`pld serve` as a command: its usage errors before any model loads, the URL on stdout once it
serves, and Ctrl-C or SIGTERM in the middle of a stream: the stream ends with an error event,
the process exits at once (130, 0), cleanly."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from pld_server import connection

from pld_cli.cache import cache_dir

PLD = str(Path(sys.executable).parent / "pld")
LONG = {
    "messages": [{"role": "user", "content": "Count from 1 to 1000, one number per line."}],
    "max_tokens": 1500,
    "stream": True,
}


def test_a_wrong_keep_alive_is_a_usage_error(pld):
    code, _, err = pld("serve", "--keep-alive", "soon")
    assert code == 2 and "--keep-alive soon: expected a duration" in err


def test_a_port_in_use_is_one_line_before_the_model_loads(pld):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        start = time.perf_counter()
        code, out, err = pld("serve", "--port", str(port))
    assert code == 1 and out == "" and f"cannot listen on 127.0.0.1:{port}" in err
    assert time.perf_counter() - start < 10 and "loading" not in err


def sigint_as_from_a_terminal() -> None:
    """A suite started in the background ignores SIGINT; the server gets it as from a terminal."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.fixture
def cache(tmp_path) -> Path:
    """A cache of the test's own for pass costs, sharing the user's converted default model."""
    (cache_dir() / "models").mkdir(parents=True, exist_ok=True)
    (tmp_path / "models").symlink_to(cache_dir() / "models")
    return tmp_path


def read_stream(url: str, events: list[str], first: threading.Event) -> None:
    client = connection(url, timeout=120)
    client.request("POST", "/v1/chat/completions", json.dumps(LONG).encode())
    response = client.getresponse()
    for line in response:
        if line.startswith(b"data: "):
            events.append(line.decode().removeprefix("data: ").strip())
            first.set()


@pytest.mark.slow
@pytest.mark.parametrize("signum, code", [(signal.SIGINT, 130), (signal.SIGTERM, 0)])
def test_a_signal_mid_stream_stops_the_server_cleanly(cache, signum, code):
    env = os.environ | {"HF_HUB_OFFLINE": "1", "PLD_CACHE_DIR": str(cache)}
    args = [PLD, "serve", "--port", "0", "--context", "2048", "-j", "2"]
    server = subprocess.Popen(
        args,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        preexec_fn=sigint_as_from_a_terminal,
    )
    try:
        url = server.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:"), server.communicate(timeout=60)[1]
        events, first = [], threading.Event()
        reader = threading.Thread(target=read_stream, args=(url, events, first), daemon=True)
        reader.start()
        assert first.wait(timeout=120)
        stopped = time.perf_counter()
        server.send_signal(signum)
        out, err = server.communicate(timeout=60)
        assert time.perf_counter() - stopped < 30  # not the 1,500 tokens
        reader.join(timeout=10)
    finally:
        if server.poll() is None:
            server.kill()
    assert server.returncode == code and out == "" and "Traceback" not in err, err
    assert "shutting down" in events[-2] and events[-1] == "[DONE]"
    assert "pld: stopped" in err
