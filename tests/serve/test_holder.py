"""The model holder's keep-alive and slots, with a stand-in engine (no model): loaded once and
kept while used, let go after --keep-alive idle and loaded again, at most `parallel` at once,
and a stop that releases whoever waits."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace

import pytest

from pld_cli.serve.errors import ShuttingDown
from pld_cli.serve.holder import ModelHolder


class Engine:
    def __init__(self) -> None:
        self.name, self.context, self.parallel = "fake", 64, 1
        self.tokenizer = SimpleNamespace(name_or_path="/models/fake")
        self.repetition_penalty = None
        self.closed = False

    def close(self) -> None:
        self.closed = True


class Loads(list):
    def __call__(self) -> Engine:
        self.append(Engine())
        return self[-1]


def holder(keep_alive: float | None) -> tuple[ModelHolder, Loads, list[str]]:
    loads, notes = Loads(), []
    held = ModelHolder(loads, keep_alive, notes.append)
    held.open()
    return held, loads, notes


def until(condition, seconds: float = 5.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline
        time.sleep(0.01)


def test_the_model_is_loaded_once_and_kept():
    held, loads, _ = holder(keep_alive=None)
    for _ in range(3):
        with held.engine() as engine:
            assert engine is loads[0]
    assert len(loads) == 1 and held.served.name == "fake" and held.served.root == "/models/fake"
    held.close()
    assert loads[0].closed and held.current is None


def test_an_idle_model_is_let_go_after_keep_alive_and_loaded_again():
    held, loads, notes = holder(keep_alive=0.2)
    with held.engine():
        time.sleep(0.4)  # in use: never let go, however long
        assert held.current is loads[0] and not loads[0].closed
    until(lambda: notes)
    assert held.current is None and loads[0].closed and "let go: idle for 0.2 s" in notes[-1]
    with held.engine() as engine:
        assert engine is loads[1] and len(loads) == 2
    held.close()


def test_one_slot_each_and_a_stop_releases_who_waits():
    held, _, _ = holder(keep_alive=None)
    failures = []

    def second() -> None:
        try:
            with held.engine():
                pass
        except ShuttingDown as exc:
            failures.append(exc)

    with held.engine():
        waiter = threading.Thread(target=second)
        waiter.start()
        until(lambda: held.users == 2)  # the second waits for the one slot
        stopper = threading.Thread(target=held.close, args=(5.0,))
        stopper.start()
        waiter.join(timeout=5)
        assert failures and not waiter.is_alive()
        assert stopper.is_alive()  # the stop waits for the decode in flight to end
    stopper.join(timeout=5)
    assert not stopper.is_alive() and held.current is None
    with pytest.raises(ShuttingDown), held.engine():
        pass
