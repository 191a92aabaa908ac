"""The served model: loaded once, kept while requests come, let go after --keep-alive idle.

A model takes seconds to load and its calibration more, so it is loaded at start and kept: a
second request starts decoding at once. After `keep_alive` seconds with no request in flight or
waiting (None: never), it is let go (its batch closed, its memory freed) and the next request
loads it again, as ollama's keep_alive does. At most `parallel` requests decode at once (the
engine's slots, -j N); the others wait here for one (a semaphore: about in arrival order).
What the server says about its model (/v1/models) does not need it loaded: `Served` is kept.
"""

from __future__ import annotations

import contextlib
import gc
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from pld_cli.engines.local import LocalEngine
from pld_cli.serve.errors import ShuttingDown

WAIT_STEP = 0.25  # seconds between looks at the stop flag while waiting for a slot
GRACE = 30.0  # seconds a stop waits for the decodes in flight to end (each at its next pass)


@dataclass(frozen=True)
class Served:
    """The served model as /v1/models lists it."""

    name: str
    root: str  # where its tokenizer lies (`pld --server` reads it there, on this machine)
    context: int  # prompt and new tokens of one request
    parallel: int  # requests decoded at once
    created: int  # when it was first loaded (Unix seconds)


class ModelHolder:
    """The engine as `load` opens it: prepared for requests of up to its `context` positions;
    its tokenizer and the model's own repetition penalty are kept across loads."""

    def __init__(
        self,
        load: Callable[[], LocalEngine],
        keep_alive: float | None,
        note: Callable[[str], None] = lambda _: None,
    ) -> None:
        self.load, self.keep_alive, self.note = load, keep_alive, note
        self.lock = threading.Condition()
        self.stopping = threading.Event()
        self.users = 0  # requests holding or waiting for the engine
        self.last_used = time.monotonic()
        self.current: LocalEngine | None = None
        self.reaper = threading.Thread(target=self.reap, name="pld-keep-alive", daemon=True)

    def open(self) -> Served:
        """The first load: the model, and what is kept of it across loads."""
        engine = self.current = self.load()
        self.slots = threading.BoundedSemaphore(engine.parallel)
        self.tokenizer, self.penalty = engine.tokenizer, engine.repetition_penalty
        root = engine.tokenizer.name_or_path
        self.served = Served(engine.name, root, engine.context, engine.parallel, int(time.time()))
        self.last_used = time.monotonic()
        self.reaper.start()
        return self.served

    @contextlib.contextmanager
    def engine(self) -> Iterator[LocalEngine]:
        """The engine with a decode slot held for the caller, loaded again if it was let go."""
        with self.lock:
            self.check_open()
            self.users += 1
        try:
            engine = self.loaded()
            self.take_slot()
            try:
                yield engine
            finally:
                self.slots.release()
        finally:
            with self.lock:
                self.users -= 1
                self.last_used = time.monotonic()
                self.lock.notify_all()

    def loaded(self) -> LocalEngine:
        with self.lock:
            if self.current is None:
                self.note(f"loading {self.served.name} again")
                self.current = self.load()
            return self.current

    def take_slot(self) -> None:
        while not self.slots.acquire(timeout=WAIT_STEP):
            self.check_open()
        if self.stopping.is_set():
            self.slots.release()
            raise ShuttingDown()

    def check_open(self) -> None:
        if self.stopping.is_set():
            raise ShuttingDown()

    def reap(self) -> None:
        """The keep-alive thread: lets the engine go once idle for keep_alive seconds."""
        with self.lock:
            while not self.stopping.is_set():
                due = self.due()
                if due is not None and due <= 0:
                    self.unload(f"idle for {self.keep_alive:g} s (--keep-alive)")
                    continue
                self.lock.wait(timeout=due)  # a request's end notifies: due is counted again

    def due(self) -> float | None:
        """Seconds until the engine may be let go; None while it may not (no keep-alive, not
        loaded, a request in flight or waiting)."""
        if self.keep_alive is None or self.current is None or self.users:
            return None
        return self.keep_alive - (time.monotonic() - self.last_used)

    def unload(self, why: str) -> None:
        """Lets the engine go (called holding the lock)."""
        engine, self.current = self.current, None
        if engine is not None:
            engine.close()
            del engine
            gc.collect()
            self.note(f"{self.served.name} let go: {why}")

    def close(self, grace: float = GRACE) -> None:
        """Stop: what waits raises ShuttingDown, what decodes is cut (the batch's Cancelled, or
        its next check), and once they have ended (or after `grace` seconds) the model is let
        go, so no thread is left inside torch when the process ends."""
        self.stopping.set()
        with self.lock:
            self.lock.notify_all()
            engine = self.current
        if engine is not None:
            engine.close()
        deadline = time.monotonic() + grace
        with self.lock:
            while self.users and deadline > time.monotonic():
                self.lock.wait(timeout=deadline - time.monotonic())
        if self.reaper.is_alive():
            self.reaper.join()
        with self.lock:
            self.unload("the server stopped")
