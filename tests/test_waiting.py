"""A Ctrl-C that another thread takes still ends the main thread's wait (the wait in slices)."""

import subprocess
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor

import pytest

from pld_cli.waiting import result

# SIGINT sent to a helper thread itself: its handler runs there, as when the kernel picks a
# thread other than the main one; an untimed Future.result() would never see it.
CHILD = textwrap.dedent(
    """
    import signal, threading, time
    from concurrent.futures import ThreadPoolExecutor
    from pld_cli.waiting import result

    never = threading.Event()
    future = ThreadPoolExecutor(1).submit(never.wait)

    def interrupt_this_thread():
        time.sleep(0.2)
        signal.pthread_kill(threading.get_ident(), signal.SIGINT)

    threading.Thread(target=interrupt_this_thread, daemon=True).start()
    start = time.monotonic()
    try:
        result(future)
    except KeyboardInterrupt:
        print(f"interrupted {time.monotonic() - start:.2f}")
    never.set()
    """
)


def test_ctrl_c_taken_by_another_thread_ends_the_wait():
    done = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    word, seconds = done.stdout.split()
    assert word == "interrupted" and float(seconds) < 5


def timed_out() -> None:
    raise TimeoutError("the work's own")


def test_the_result_and_the_error_are_the_works():
    with ThreadPoolExecutor(1) as pool:
        assert result(pool.submit(lambda: 7)) == 7
        with pytest.raises(TimeoutError, match="the work's own"):  # not a slice's end
            result(pool.submit(timed_out))
