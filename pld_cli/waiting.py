"""Waiting on another thread's work in slices, so that Ctrl-C always ends the wait.

The kernel may hand a process's SIGINT to any thread that does not block it: to another one
while the main thread blocks signals for a moment (glibc does, around creating a thread). Python
then only flags it for the main thread, and a main thread asleep in an untimed wait such as
`Future.result()` sleeps on until the work ends: the rest of the run, for streams of minutes. A
wait in slices wakes every SLICE seconds, sees the flag and raises KeyboardInterrupt.
"""

from __future__ import annotations

from concurrent.futures import Future, wait
from typing import TypeVar

SLICE = 0.1  # seconds: how late Ctrl-C may be seen

T = TypeVar("T")


def result(future: Future[T]) -> T:
    """`future.result()`, with Ctrl-C seen within SLICE whichever thread the kernel woke."""
    while not future.done():
        wait([future], timeout=SLICE)
    return future.result()
