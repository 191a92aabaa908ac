"""A run over several files: how many were done, failed or cut short, and its closing line."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from pld_cli.cli.render import Ui
from pld_cli.core.stats import Stats
from pld_cli.errors import ExitStatus, PldError


@dataclass
class Tally:
    """Files done and failed, and their stats together, for the closing line."""

    done: int = 0
    failed: int = 0
    cut: int = 0  # stopped at --max-new-tokens: shown with a warning, or refused
    codes: list[ExitStatus] = field(default_factory=list)  # of each failed or cut-short file
    runs: list[Stats] = field(default_factory=list)
    start: float = field(default_factory=time.perf_counter)

    def failure(self, code: ExitStatus) -> None:
        self.failed += 1
        self.cut += code == ExitStatus.INCOMPLETE
        self.codes.append(code)

    def finished(self, stats: Stats, cut: bool) -> None:
        self.done += 1
        self.cut += cut
        self.codes += [ExitStatus.INCOMPLETE] if cut else []
        self.runs.append(stats)

    @property
    def status(self) -> ExitStatus:
        if ExitStatus.ERROR in self.codes:
            return ExitStatus.ERROR
        return ExitStatus.INCOMPLETE if self.codes else ExitStatus.OK


def plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def close(ui: Ui, tally: Tally) -> None:
    runs = Stats.merged(tally.runs)
    wall = time.perf_counter() - tally.start
    cut = f" ({tally.cut} cut short at --max-new-tokens)" if tally.cut else ""
    ui.note(
        f"{plural(tally.done, 'file')} done, {tally.failed} failed{cut} · "
        f"{runs.new_tokens} new tokens · {runs.tokens_per_s:.1f} tok/s decoding · "
        f"{wall:.1f} s in all"
    )
    if tally.failed:
        total = tally.done + tally.failed
        raise PldError(f"{tally.failed} of {plural(total, 'file')} failed", code=tally.status)
