"""The live view of many documents decoded at once (-j N): a row per file and the run's total.

Each row: the file, where it stands (waiting, decoding, done, failed), its new tokens, passes and
tokens per pass (summed over the calls of a long document, which may decode at once), its tok/s;
under the rows, the run's tokens and tok/s since the first call began. Decode threads update it
after each pass; rich redraws it a few times a second from its own thread.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from enum import Enum

from rich.console import Console
from rich.live import Live
from rich.table import Table

from pld_cli.core.decode import Pass
from pld_cli.core.stats import Stats, ratio
from pld_cli.tasks.fragments import Fragment
from pld_cli.tasks.pipeline import Observer


class State(str, Enum):
    WAITING = "waiting"
    DECODING = "decoding"
    DONE = "done"
    FAILED = "failed"

    def __str__(self) -> str:
        return self.value


@dataclass
class Row:
    state: State = State.WAITING
    calls: dict[int, Stats] = field(default_factory=dict)  # each call's latest stats

    def total(self, what: str) -> float:
        return sum(getattr(stats, what) for stats in self.calls.values())


class Board:
    """Rows for `labels`, in order; `observer(label)` for each call, `finished` for each file."""

    def __init__(self, console: Console, labels: list[str]) -> None:
        self.rows = {label: Row() for label in labels}
        self.lock = threading.Lock()
        self.start: float | None = None
        # stdout is data (a pipe, a file): only the console's own lines go above the view
        self.live = Live(
            self, console=console, transient=True, refresh_per_second=4, redirect_stdout=False
        )

    def __enter__(self) -> Board:
        self.live.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self.live.stop()

    def observer(self, label: str) -> Observer:
        """The observer of one call of `label`'s document."""
        row, call = self.rows[label], object()
        with self.lock:
            row.state = State.DECODING
            self.start = self.start or time.perf_counter()

        def observe(step: Pass, spans: list[Fragment], stats: Stats) -> None:
            with self.lock:
                row.calls[id(call)] = stats

        return observe

    def finished(self, label: str, ok: bool) -> None:
        with self.lock:
            self.rows[label].state = State.DONE if ok else State.FAILED

    def __rich__(self) -> Table:
        table = Table(title_justify="left", box=None)
        for head in ("file", "", "tokens", "passes", "tok/pass", "tok/s"):
            table.add_column(head, justify="left" if head in ("file", "") else "right")
        with self.lock:
            for label, row in self.rows.items():
                tokens, passes = row.total("new_tokens"), row.total("passes")
                seconds = row.total("decode_s")
                table.add_row(
                    label,
                    str(row.state),
                    f"{tokens:.0f}",
                    f"{passes:.0f}",
                    f"{ratio(tokens, passes):.2f}",
                    f"{ratio(tokens, seconds):.1f}",
                )
            tokens = sum(row.total("new_tokens") for row in self.rows.values())
            wall = time.perf_counter() - self.start if self.start else 0.0
        table.title = f"{tokens:.0f} new tokens · {ratio(tokens, wall):.1f} tok/s in all"
        return table
