"""`--server` from the command line against a scripted server: many files at once in order, each
fault one line naming its file, nothing half-written, the key never shown (the real vLLM runs in
tests/server/)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fake_server import Answer, FakeServer
from transformers import AutoTokenizer

SOURCE = "def f(x):\n    return x + 1\n"


@pytest.fixture
def fake(tiny_model_dir):
    """A server whose answer is a summary naming the document's first word, or for an edit
    the file with f renamed g; a document holding FAIL gets a 400."""
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)

    def answer(body: dict) -> Answer:
        prompt = tokenizer.decode(body["prompt"])
        if "FAIL" in prompt:
            return Answer(status=400, message="this request is refused")
        if "def f" in prompt:
            text = SOURCE.replace("def f", "def g") + "```"
        else:
            text = "About " + prompt.split("<doc>")[1].split()[0] + "."
        ids = tokenizer(text, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
        return Answer(chunks=[ids[i : i + 3] for i in range(0, len(ids), 3)], delay=0.05)

    server = FakeServer(tiny_model_dir, answer)
    yield server
    server.close()


def documents(tmp_path, **texts) -> list[str]:
    paths = []
    for name, text in texts.items():
        path = tmp_path / name
        path.write_bytes(text if isinstance(text, bytes) else text.encode())
        paths.append(str(path))
    return paths


def no_traceback(err: str) -> list[str]:
    assert "Traceback" not in err
    return [line for line in err.splitlines() if line.startswith("pld: error:")]


def test_many_files_at_once_come_out_in_order(pld, fake, tmp_path):
    names = {f"{n}.txt": f"<doc>{n} is a document about {n}.<doc>\n" for n in "abcde"}
    paths = documents(tmp_path, **names)
    code, out, err = pld("summarize", *paths, "--server", fake.url, "-j", "3")
    assert code == 0, err
    sections = [f"==> {path} <==\nAbout {n}.\n" for path, n in zip(paths, "abcde", strict=True)]
    assert out == "\n".join(sections)
    assert fake.most_in_flight == 3 and len(fake.requests) == 5
    assert "5 files done, 0 failed" in err


def test_a_refused_and_a_binary_file_are_named_and_the_others_go_on(pld, fake, tmp_path):
    texts = {
        "a.txt": "<doc>alpha<doc>\n",
        "bin.txt": b"\x00\x01\x02",
        "c.txt": "<doc>FAIL here<doc>\n",
        "d.txt": "<doc>delta<doc>\n",
    }
    paths = documents(tmp_path, **texts)
    code, out, err = pld("summarize", *paths, "--server", fake.url, "-j", "3")
    assert code == 1
    assert "About alpha." in out and "About delta." in out and "FAIL" not in out
    binary, refused, total = no_traceback(err)
    assert "bin.txt" in binary and "binary" in binary
    assert refused.startswith(f"pld: error: {paths[2]}: the server answered 400 Bad Request")
    assert "2 of 4 files failed" in total


def test_an_edit_cut_mid_stream_leaves_the_file_untouched(pld, fake, tmp_path):
    (path,) = documents(tmp_path, **{"app.py": SOURCE})
    fake.queue.append(Answer(chunks=[[1], [2], [3]], cut_after=2))
    code, _, err = pld("edit", path, "-i", "rename f to g", "--write", "--server", fake.url)
    assert code == 1 and Path(path).read_text() == SOURCE
    (line,) = no_traceback(err)
    assert "ended the stream before the answer did" in line
    code, _, err = pld("edit", path, "-i", "rename f to g", "--write", "--server", fake.url)
    assert code == 0 and Path(path).read_text() == SOURCE.replace("def f", "def g"), err


def test_the_key_is_never_printed(pld, fake, tmp_path):
    (path,) = documents(tmp_path, **{"a.txt": "<doc>alpha<doc>\n"})
    fake.queue.append(Answer(status=401, message="Unauthorized"))
    code, out, err = pld("summarize", path, "--server", fake.url, "--api-key", "sk-123-secret")
    assert code == 1 and "401 Unauthorized" in err and "sk-123" not in out + err
    assert fake.headers[0]["Authorization"] == "Bearer sk-123-secret"


def test_the_server_is_asked_for_its_model_and_a_wrong_name_is_refused(pld, fake, tmp_path):
    (path,) = documents(tmp_path, **{"a.txt": "<doc>alpha<doc>\n"})
    code, _, err = pld("summarize", path, "--server", fake.url, "-m", "other-model")
    assert code == 2 and "the server at" in err and "serves fake" in err


@pytest.mark.parametrize("flag", ["--no-pld", "--compare"])
def test_what_only_the_local_engine_does_is_refused_before_any_call(pld, fake, tmp_path, flag):
    (path,) = documents(tmp_path, **{"a.txt": "<doc>alpha<doc>\n"})
    code, _, err = pld("summarize", path, "--server", fake.url, flag)
    assert code == 2 and f"{flag} with --server" in err and not fake.requests


def test_an_unreachable_server_is_one_line(pld, fake, tmp_path):
    (path,) = documents(tmp_path, **{"a.txt": "<doc>alpha<doc>\n"})
    url = fake.url
    fake.close()
    code, _, err = pld("summarize", path, "--server", url)
    assert code == 1
    assert no_traceback(err) == [
        f"pld: error: cannot reach the server at {url}: connection refused (is it running?)"
    ]


def sigint_as_from_a_terminal() -> None:
    """A suite started in the background (`make test &`) ignores SIGINT, and a Python started
    with SIGINT ignored leaves it so: the child gets Ctrl-C as a user's terminal would send it."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_ctrl_c_cancels_what_is_in_flight_and_exits_130(fake, tmp_path):
    paths = documents(tmp_path, **{f"{n}.txt": f"<doc>{n}<doc>\n" for n in "abc"})
    # 2 minutes each, and no repeated span: the loop stop must not end them first.
    fake.answer = lambda body: Answer(chunks=[[n] for n in range(1000, 2200)], delay=0.1)
    pld = subprocess.Popen(
        [
            str(Path(sys.executable).parent / "pld"),
            "summarize",
            *paths,
            "--server",
            fake.url,
            "-j",
            "3",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=os.environ | {"HF_HUB_OFFLINE": "1"},
        preexec_fn=sigint_as_from_a_terminal,
    )
    start = time.perf_counter()
    while fake.in_flight < 3 and time.perf_counter() - start < 120:
        time.sleep(0.1)
    assert fake.in_flight == 3, pld.stderr.read() if pld.poll() is not None else ""
    interrupted = time.perf_counter()
    pld.send_signal(signal.SIGINT)
    out, err = pld.communicate(timeout=30)
    assert pld.returncode == 130 and "Traceback" not in err and out == ""
    assert time.perf_counter() - interrupted < 45  # not the 2 minutes the answers would take
    time.sleep(0.5)
    assert fake.in_flight == 0  # every stream was cut
