"""A real vLLM stopped with SIGTERM mid-run (as `systemctl stop` stops it): pld notices in
seconds, not at --timeout, and leaves every file as it was.

Skipped unless PLD_TEST_STOPPED_SERVER names a server that this test may stop, with its process
group in PLD_TEST_STOPPED_SERVER_PGID: scripts/test-server.sh starts a second one for it.
"""

from __future__ import annotations

import os
import signal
import time

import pytest
from test_vllm import edits_in_flight

URL = os.environ.get("PLD_TEST_STOPPED_SERVER")
LIMIT = 60  # seconds from the signal to pld's exit (--timeout is 600)

pytestmark = pytest.mark.skipif(not URL, reason="needs PLD_TEST_STOPPED_SERVER (make test-server)")


def test_a_server_stopped_mid_run_fails_within_a_minute_leaving_every_file(tmp_path):
    pld, paths, before = edits_in_flight(tmp_path, URL)
    os.killpg(int(os.environ["PLD_TEST_STOPPED_SERVER_PGID"]), signal.SIGTERM)
    stopped = time.perf_counter()
    _, err = pld.communicate(timeout=300)
    assert time.perf_counter() - stopped <= LIMIT, err
    assert pld.returncode == 1 and "Traceback" not in err
    assert [path.read_bytes() for path in paths] == before
    errors = [line for line in err.splitlines() if line.startswith("pld: error:")]
    assert len(errors) == 4 and "3 of 3 files failed" in errors[-1], err
    for path, line in zip(paths, errors, strict=False):
        assert str(path) in line, line
