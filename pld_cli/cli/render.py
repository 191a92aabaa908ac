"""Everything pld shows on stderr: load progress, the live view, stats and comparisons (rich)."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from pld_cli.cli.board import Board
from pld_cli.core.decode import Pass
from pld_cli.core.stats import Stats
from pld_cli.tasks.fragments import Fragment
from pld_cli.tasks.longdoc import Part
from pld_cli.tasks.pipeline import Observer
from pld_cli.tasks.result import Result

COPIED_STYLE = "bold green"
DIFF_STYLES = {"+++": "bold", "---": "bold", "@@": "cyan", "+": "green", "-": "red"}


def status_line(stats: Stats) -> str:
    """Passes (a server's steps: its streamed chunks), tokens per pass, drafts accepted where
    the engine tells, tok/s, and the estimate where pass costs were measured."""
    accepted = ""
    if stats.drafts_known:
        share = stats.accepted_tokens / stats.drafted_tokens if stats.drafted_tokens else 0.0
        accepted = f"{share:.0%} of drafts accepted · "
    speedup = stats.estimated_speedup
    estimate = "" if speedup is None else f" · ≈{speedup:.2f}× plain decoding (estimate)"
    return (
        f"{stats.passes} passes · {stats.new_tokens} tokens · "
        f"{stats.tokens_per_pass:.2f} tokens/pass ({stats.tokens_per_pass:.1f}× fewer passes) · "
        f"{accepted}{stats.tokens_per_s:.1f} tok/s" + estimate
    )


class LiveView:
    """The output as it is produced, copied spans highlighted, with a status line under it."""

    def __init__(self, console: Console, label: str | None = None) -> None:
        self.console = console
        self.label = label  # which part of a long document this is
        self.text = Text()
        self.live = Live(console=console, transient=True, auto_refresh=False)

    def __enter__(self) -> LiveView:
        self.live.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self.live.stop()

    def update(self, step: Pass, spans: list[Fragment], stats: Stats) -> None:
        for span in spans:
            self.text.append(span.text, style=COPIED_STYLE if span.copied else None)
        # Show only the tail that fits the terminal, so long outputs scroll instead of cropping.
        height = max(self.console.size.height - 3, 1)
        lines = self.text.split("\n", allow_blank=True)[-height:]
        legend = Text.assemble(("copied", COPIED_STYLE), " / model · ", status_line(stats))
        if self.label:
            legend = Text.assemble((self.label, "bold"), " · ", legend)
        self.live.update(Group(Text("\n").join(lines), legend), refresh=True)


class Ui:
    """What goes to stderr, given whether stderr is a terminal and the user's -q/--no-live."""

    def __init__(self, quiet: bool = False, live: bool = True, verbose: bool = False) -> None:
        self.console = Console(stderr=True, highlight=False)
        if not self.console.is_terminal:  # a log file: tables whole, lines unwrapped
            self.console.width = max(self.console.width, 160)
        self.quiet = quiet
        self.verbose = verbose
        self.show_live = live and not quiet and self.console.is_terminal

    def quiet_libraries(self) -> None:
        """transformers' own progress bars and warnings would interleave with ours on stderr."""
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
        if not self.verbose:
            hf_logging.set_verbosity_error()

    def note(self, message: str) -> None:
        if not self.quiet:
            self.console.print(f"pld: {message}", markup=False, soft_wrap=True)

    def error(self, message: str) -> None:
        """A failure the run goes on after (one of several files): shown even under -q."""
        self.console.print(f"pld: error: {message}", markup=False, soft_wrap=True)

    def warning(self, message: str) -> None:
        """A result shown but not whole (cut short): shown even under -q."""
        self.console.print(f"pld: warning: {message}", markup=False, soft_wrap=True)

    def detail(self, message: str) -> None:
        """A note shown only under --verbose."""
        if self.verbose:
            self.note(message)

    @contextlib.contextmanager
    def progress(
        self, message: str, quiet: bool = False, announce: bool = True
    ) -> Iterator[Callable[[str], None]]:
        """A spinner on a terminal (or one line elsewhere, unless quiet) whose text the callee
        may update; elsewhere, without `announce`, only the callee's lines (which say more)."""
        if self.quiet or (quiet and not self.console.is_terminal):
            yield lambda _: None
        elif self.console.is_terminal:
            with self.console.status(message) as status:
                yield lambda text: status.update(text)
        else:
            if announce:
                self.note(message)
            yield self.note

    @contextlib.contextmanager
    def live(self, label: str | None = None, off: bool = False) -> Iterator[Observer | None]:
        """The observer of a decode: the live view and, under --verbose, one line per pass;
        `off` for a decode among several at once, which would share one view."""
        observers = [self.pass_line] if self.verbose and not off else []
        with contextlib.ExitStack() as stack:
            if self.show_live and not off:
                observers.append(stack.enter_context(LiveView(self.console, label)).update)
            yield fan_out(observers) if observers else None

    @contextlib.contextmanager
    def board(self, labels: list[str], on: bool) -> Iterator[Board | None]:
        """The live view of documents decoded at once (board.py), where `on` and live."""
        if not (on and self.show_live):
            yield None
            return
        with Board(self.console, labels) as board:
            yield board

    def pass_line(self, step: Pass, spans: list[Fragment], stats: Stats) -> None:
        origin = "prompt" if step.from_prompt else "output"
        where = "" if step.source is None else f", copied from {origin} position {step.source}"
        self.console.print(
            f"pass {stats.passes}: verified {len(step.drafted)} of {step.candidates} draft tokens "
            f"({step.reason}), accepted {step.accepted}{where}",
            markup=False,
        )

    def stats_table(self, runs: dict[str, Stats]) -> None:
        table = Table(title="pld stats", title_justify="left")
        table.add_column("")
        for name in runs:
            table.add_column(name, justify="right")
        rows = [
            ("prompt tokens", lambda s: f"{s.prompt_tokens}"),
            ("new tokens", lambda s: f"{s.new_tokens}"),
            ("passes", lambda s: f"{s.passes}"),
            ("tokens / pass", lambda s: f"{s.tokens_per_pass:.2f}"),
            ("drafted / accepted", lambda s: f"{drafted(s)} / {s.accepted_tokens}"),
            ("copy rate f", lambda s: f"{s.copy_rate:.1%}"),
            ("mean accepted run L", lambda s: f"{s.mean_accepted:.2f}"),
            ("prefill", lambda s: f"{s.prefill_s:.2f} s"),
            ("decode", lambda s: f"{s.decode_s:.2f} s"),
            ("tok/s", lambda s: f"{s.tokens_per_s:.1f}"),
            ("stopped at", lambda s: f"{s.stop or '-'}"),
            ("cut (loop repeats)", lambda s: f"{s.removed_tokens} tokens"),
        ]
        for label, cell in rows:
            table.add_row(label, *(cell(stats) for stats in runs.values()))
        self.console.print(table)

    def parts_table(self, parts: list[Part]) -> None:
        """One row per call of a long document."""
        compare = parts[0].plain is not None
        table = Table(title="pld calls", title_justify="left")
        columns = [
            "#",
            "round",
            "part",
            "chars",
            "prompt tok",
            "new tok",
            "tok/s",
            "copy rate",
            "stop",
        ] + (["plain tok/s", "identical"] if compare else [])
        for column in columns:
            table.add_column(column, justify="left" if column == "part" else "right")
        for part in parts:
            stats = part.result.stats
            row = [
                f"{part.index}",
                f"{part.round}",
                part.where,
                f"{part.chars}",
                f"{stats.prompt_tokens}",
                f"{stats.new_tokens}",
                f"{stats.tokens_per_s:.1f}",
                f"{stats.copy_rate:.1%}",
                f"{stats.stop or '-'}",
            ]
            if part.plain is not None:
                same = part.plain.token_ids == part.result.token_ids
                row += [f"{part.plain.stats.tokens_per_s:.1f}", "yes" if same else "NO"]
            table.add_row(*row)
        self.console.print(table)

    def diff(self, patch: str, to_stderr: bool) -> None:
        """A unified diff, coloured on a terminal; elsewhere the exact bytes (tabs kept)."""
        console = self.console if to_stderr else Console(highlight=False, soft_wrap=True)
        if not console.is_terminal:
            stream = sys.stderr if to_stderr else sys.stdout
            stream.write(patch)
            return
        for line in patch.splitlines():
            style = next((s for prefix, s in DIFF_STYLES.items() if line.startswith(prefix)), None)
            console.print(Text(line, style=style or ""), soft_wrap=True)

    def comparison(self, pld: Result, plain: Result) -> None:
        speedup = pld.speedup_over(plain)
        same = "identical" if pld.token_ids == plain.token_ids else "DIFFERENT"
        self.console.print(
            f"pld: measured {speedup:.2f}× the speed of plain decoding "
            f"({pld.stats.tokens_per_s:.1f} vs {plain.stats.tokens_per_s:.1f} tok/s, "
            f"{pld.stats.passes} vs {plain.stats.passes} passes); outputs {same}",
            markup=False,
        )


def drafted(stats: Stats) -> str:
    return f"{stats.drafted_tokens}" if stats.drafts_known else "unknown"


def fan_out(observers: list[Observer]) -> Observer:
    def observe(step: Pass, spans: list[Fragment], stats: Stats) -> None:
        for observer in observers:
            observer(step, spans, stats)

    return observe
