"""-j N on this machine: documents decoded at once through pld's C decoder give the outputs of one
after another; a bad file among them is one error line; float weights go one at a time and say
so; Ctrl-C cuts the documents in flight."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_server_cli import sigint_as_from_a_terminal

from pld_cli.runtime.clib import library

needs_kernel = pytest.mark.skipif(
    library.kernel("decode_rows") is None, reason=f"no C kernel: {library.unavailable()}"
)
TEXT = "The report for part {n} lists revenue, costs and plans. " * 3


def documents(tmp_path, *sizes: int) -> list[str]:
    paths = []
    for n, size in enumerate(sizes):
        path = tmp_path / f"doc{n}.txt"
        path.write_text("".join(TEXT.format(n=i) for i in range(size)))
        paths.append(str(path))
    return paths


@needs_kernel
def test_documents_at_once_give_the_outputs_of_one_after_another(pld, tiny, tmp_path):
    paths = documents(tmp_path, 1, 6, 3)
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"\x00\x01")
    paths.insert(2, str(bad))
    args = ["summarize", *paths, "--quantize", "int8", *tiny]
    one_code, one_out, one_err = pld(*args, "-j", "1")
    many_code, many_out, many_err = pld(*args, "-j", "3", "--verbose")
    assert one_code == many_code == 1  # the bad file
    assert many_out == one_out and one_out.count("==> ") == 3
    assert "batch: 3 documents at once" in many_err and "Traceback" not in many_err
    assert many_err.count("pld: error:") == one_err.count("pld: error:")


def test_float_weights_go_one_document_at_a_time_and_say_so(pld, tiny, tmp_path):
    code, out, err = pld("summarize", *documents(tmp_path, 1, 2), *tiny, "-j", "2")
    assert code == 3 and out.count("==> ") == 2  # cut at --max-new-tokens 8
    assert "-j 2: this model's weights decode one document at a time" in err


@needs_kernel
def test_ctrl_c_cuts_the_documents_in_flight_and_exits_130(tiny_model_dir, tmp_path):
    paths = documents(tmp_path, *[1] * 200)  # minutes of work: still decoding at the signal
    command = [str(Path(sys.executable).parent / "pld"), "summarize", *paths, "-m", tiny_model_dir]
    command += ["--quantize", "int8", "-j", "3", "--max-new-tokens", "400", "--allow-repetition"]
    pld = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=os.environ | {"HF_HUB_OFFLINE": "1"},
        preexec_fn=sigint_as_from_a_terminal,
    )
    time.sleep(15)
    assert pld.poll() is None, pld.communicate()[1]
    interrupted = time.perf_counter()
    pld.send_signal(signal.SIGINT)
    _, err = pld.communicate(timeout=60)
    assert pld.returncode == 130 and "Traceback" not in err, err[-1500:]
    assert time.perf_counter() - interrupted < 30
