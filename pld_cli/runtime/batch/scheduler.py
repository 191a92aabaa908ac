"""Continuous batching on one machine: documents in flight share each pass, each exact as alone.

Each document in flight holds a slot: a region of one native runtime's cache (its own positions,
its own length). Its decode loop (core/decode.py) runs unchanged in its own thread over a `Slot`,
which is a `Runtime`: a prefill or a forward hands the slot's rows to the `Batch` and waits. When
every slot in flight has handed in its rows, the batch's own thread runs one pass of the C
decoder over all of them (NativeRuntime.run_pieces): every slot's decode or verify rows whole, and
prompts in slices of PREFILL_SLICE rows among them, so the others keep decoding beside a long
prefill. A finished document frees its slot for the next one. Every pass runs on that one thread,
while documents are in flight, and the documents' threads run no OpenMP team: one team in the
process keeps its threads spinning between a pass's steps (runtime/clib/threads.py).

Why each document's tokens are those it gets alone (and under --no-pld): the C decoder computes
every row from that row alone (its products and attention never mix rows, grouped.c and
row_attention.c), at its own positions, attending to its own region only; so what a row gets
does not depend on which rows share its pass, nor on how its prompt was sliced.

Worked example, two slots, PREFILL_SLICE = 256: A verifies [t, d1, d2] while B's 600-token prompt
enters: pass 1 = A's 3 rows + B's rows 0..255, pass 2 = A's next rows + B's 256..511, pass 3 = A's
+ B's 512..599; B's prefill returns after pass 3, A's forwards after each pass.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch

from pld_cli.runtime.clib.threads import serial_thread
from pld_cli.runtime.native.runtime import PREFILL_SLICE, NativeRuntime, Piece


class Cancelled(RuntimeError):
    """The batch was closed (Ctrl-C, the end of a run) while a document waited for a pass."""


@dataclass
class Rows:
    """A slot's rows waiting for passes: the ids still to run, from position `start`; whether the
    pass returns their logits (a forward's, run whole) or none (a prompt's, run in slices)."""

    ids: list[int]
    start: int
    logits_wanted: bool
    logits: torch.Tensor | None = None
    done: bool = False
    error: BaseException | None = None


@dataclass
class Batch:
    """The slots of one runtime (one per cache region) and the passes that serve them."""

    runtime: NativeRuntime
    regions: int
    free: list[int] = field(init=False)
    held: int = 0  # slots in use: documents in flight
    waiting: dict[int, Rows] = field(default_factory=dict)  # by region, in the order handed in
    last_pass: dict[int, int] = field(default_factory=dict)  # rows per region, the latest pass
    passes: threading.Thread | None = None  # the thread that runs them, while slots are held
    closed: bool = False
    lock: threading.Condition = field(default_factory=threading.Condition)

    def __post_init__(self) -> None:
        self.free = list(range(self.regions))

    @contextmanager
    def slot(self) -> Iterator[Slot]:
        """A free slot for one document's decode, waited for when all are held."""
        serial_thread()
        with self.lock:
            while not self.free:
                self.check_open()
                self.lock.wait()
            self.check_open()
            region = self.free.pop(0)
            self.held += 1
            if self.passes is None:
                self.passes = threading.Thread(target=self.serve, name="pld-passes", daemon=True)
                self.passes.start()
        try:
            yield Slot(self, region)
        finally:
            with self.lock:
                self.held -= 1
                self.waiting.pop(region, None)
                self.free.append(region)
                self.lock.notify_all()  # one fewer to wait for; a slot to take

    def close(self) -> None:
        """Every document waiting for a pass or a slot raises Cancelled; returns when the pass in
        flight, if any, has ended (so the process may exit: no thread is left inside torch)."""
        with self.lock:
            self.closed = True
            self.lock.notify_all()
            passes = self.passes
        if passes is not None:
            passes.join()

    def check_open(self) -> None:
        if self.closed:
            raise Cancelled("decoding cancelled")

    def run(self, region: int, rows: Rows) -> Rows:
        """Hands in a slot's rows; returns once passes have run them all."""
        with self.lock:
            self.waiting[region] = rows
            self.lock.notify_all()
            while not rows.done:
                self.check_open()
                self.lock.wait()
        if rows.error is not None:
            raise rows.error
        return rows

    def serve(self) -> None:
        """The batch's thread: a pass each time every slot held has handed in its rows, until no
        slot is held (a later one starts the thread again) or the batch is closed."""
        with self.lock:
            while self.held and not self.closed:
                if self.waiting and len(self.waiting) == self.held:
                    self.lead()
                else:
                    self.lock.wait()
            self.passes = None

    def lead(self) -> None:
        """One pass over the rows handed in (called holding the lock, released while it runs)."""
        taken = assemble(self.waiting)
        pieces = [
            Piece(region, rows.start, rows.ids[:n], n * rows.logits_wanted)
            for region, rows, n in taken
        ]
        self.lock.release()
        try:
            logits, error = self.runtime.run_pieces(pieces), None
        except Exception as exc:  # noqa: BLE001 - each document in the pass raises it
            logits, error = [None] * len(pieces), exc
        finally:
            self.lock.acquire()
        for (region, rows, n), rows_logits in zip(taken, logits, strict=True):
            rows.ids, rows.start, rows.logits, rows.error = (
                rows.ids[n:],
                rows.start + n,
                rows_logits,
                error,
            )
            if not rows.ids or error is not None:
                rows.done = True
                self.waiting.pop(region, None)  # its slot may have been let go meanwhile
        self.last_pass = {region: n for region, _, n in taken}
        self.lock.notify_all()

    def others(self, region: int) -> tuple[int, int]:
        """Rows of the other documents in the latest pass, and how many documents it held
        (this one included): what a pass costs.SharedCosts reads."""
        rows = sum(n for other, n in self.last_pass.items() if other != region)
        return rows, len(self.last_pass.keys() - {region}) + 1


def assemble(waiting: Mapping[int, Rows]) -> list[tuple[int, Rows, int]]:
    """What the next pass takes of each slot's rows, (region, rows, how many): a forward's rows
    whole, prompts' rows up to PREFILL_SLICE in all, in the order handed in."""
    taken, budget = [], PREFILL_SLICE
    for region, rows in waiting.items():
        if rows.logits_wanted:
            taken.append((region, rows, len(rows.ids)))
        elif budget > 0:
            n = min(len(rows.ids), budget)
            budget -= n
            taken.append((region, rows, n))
    return taken


class Slot:
    """One document's view of the batch: a `Runtime` (core/runtime.py) over its cache region."""

    refusal = None  # a rollback only moves the length back
    paths: tuple[str, ...] = ()

    def __init__(self, batch: Batch, region: int) -> None:
        self.batch, self.region = batch, region
        self.context_limit = batch.runtime.context_limit
        self._length = 0

    @property
    def name(self) -> str:
        return self.batch.runtime.name

    @property
    def length(self) -> int:
        return self._length

    def prefill(self, ids: Sequence[int], start: int = 0) -> None:
        """Fills positions start.. (those before taken as written: restore())."""
        self._length = start
        if len(ids) > start:
            self.batch.run(self.region, Rows(list(ids[start:]), start, logits_wanted=False))
            self._length = len(ids)

    def snapshot(self, length: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.batch.runtime.snapshot(length, self.region)

    def restore(self, keys: torch.Tensor, values: torch.Tensor, count: int) -> None:
        """Written while this slot has no rows in a pass: the pass thread never writes its
        region meanwhile."""
        self.batch.runtime.restore(keys, values, count, self.region)

    def forward(self, ids: Sequence[int]) -> torch.Tensor:
        if self._length + len(ids) > self.context_limit:
            raise ValueError("native KV cache is full")
        rows = self.batch.run(self.region, Rows(list(ids), self._length, logits_wanted=True))
        self._length += len(ids)
        return rows.logits

    def rollback(self, length: int) -> None:
        self._length = min(self._length, length)

    def choose(self, choice: Mapping[int, str]) -> None:
        """One kernel path: nothing to choose."""

    def notes(self) -> list[str]:
        return self.batch.runtime.notes()
