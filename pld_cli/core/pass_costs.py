"""The pass costs t(q) one decode drafts by: the calibrated table, corrected by the passes it runs.

The calibration (runtime/calibration/) times passes once per machine, at one context, passes of
every size interleaved. A decode runs at its own context, with its own drafting work between
passes, perhaps beside other programs. Where the two disagree, as on a CPU whose verify rows each
cost their own arithmetic while the table says extra rows are nearly free, a policy that trusts
the table verifies long drafts that do not pay, and pld decodes slower than plain decoding. So
every pass the loop runs is also a measurement, and the draft-length policy (policy.py) asks this
table, not the calibrated one:

- each pass size q that has run has a ratio, observed / calibrated: the least over its latest
  WINDOW passes, since what else runs on the machine only ever slows a pass (a preempted pass
  moves nothing where a pass of its size ran undisturbed);
- a size run fewer than SETTLED times counts only for the next FRESH passes after its latest:
  one preempted pass of a size rarely run can set the line's slope alone and switch drafting
  off, and a size no longer drafted would never be run again to correct it; so it leaves the
  line, drafting is tried again, and its next pass counts beside the first (a machine where long
  passes do cost their rows learns so in SETTLED of them, spread FRESH passes apart);
- the ratio at any size is the straight line through those, each weighted by its count (least
  squares over q), so the shape the passes show carries to the sizes not yet run; with one size
  run, the line is flat;
- t(q) = calibrated t(q) * ratio(q), never decreasing with q (as the calibrated table).

Worked example: calibrated t = [10, 10, 10.5, 11, 11.5] ms (index q: extra rows nearly free).
One-row passes run at 10 ms (ratio 1.0) and three-row passes at 16 ms (16 / 11 = 1.45), as often:
the line gives 1.23 at q = 2 and 1.68 at q = 4, so t(2) = 12.9 ms and t(4) = 19.3 ms. A two-token
draft now has to pay for 60% more time than a plain pass, not 10%, and the policy verifies one
only where it expects that many tokens from it.

Observing changes which drafts are verified, never what is emitted: greedy output stays that of
plain decoding.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence

WINDOW = 9  # latest passes per size, the least of which gives its ratio
SETTLED = 3  # passes of a size after which its ratio counts for good
FRESH = 32  # passes a size run fewer times counts for after its latest


class ObservedCosts(Sequence[float]):
    """costs[q] for q = 0..len - 1: the calibrated t(q) corrected by observe(q, seconds)."""

    def __init__(self, calibrated: Sequence[float]) -> None:
        self.calibrated = list(calibrated)
        self.ratios: dict[int, deque[float]] = {}
        self.seen: dict[int, int] = {}  # size: the pass count at its latest pass
        self.passes = 0
        self.table = list(self.calibrated)

    def __len__(self) -> int:
        return len(self.calibrated)

    def __getitem__(self, q: int) -> float:  # type: ignore[override]
        return self.table[q]

    def observe(self, q: int, seconds: float) -> None:
        """One pass over q positions took `seconds` (drafting and acceptance included)."""
        if not 0 < q < len(self.calibrated) or self.calibrated[q] <= 0:
            return
        self.passes += 1
        self.seen[q] = self.passes
        self.ratios.setdefault(q, deque(maxlen=WINDOW)).append(seconds / self.calibrated[q])
        counted = {
            size: (min(ratios), len(ratios))
            for size, ratios in self.ratios.items()
            if len(ratios) >= SETTLED or self.passes - self.seen[size] < FRESH
        }
        self.table = corrected(self.calibrated, fitted_line(counted))


def fitted_line(medians: dict[int, tuple[float, int]]) -> tuple[float, float]:
    """(a, b) of the line a + b q through {q: (ratio, count)}, least squares weighted by count;
    flat (b = 0) through their weighted mean where one size has run."""
    total = sum(count for _, count in medians.values())
    mean_q = sum(q * count for q, (_, count) in medians.items()) / total
    mean_r = sum(r * count for r, count in medians.values()) / total
    spread = sum(count * (q - mean_q) ** 2 for q, (_, count) in medians.items())
    if spread == 0:
        return mean_r, 0.0
    slope = sum(count * (q - mean_q) * (r - mean_r) for q, (r, count) in medians.items()) / spread
    return mean_r - slope * mean_q, slope


def corrected(calibrated: Sequence[float], line: tuple[float, float]) -> list[float]:
    """calibrated[q] * (a + b q), never decreasing with q, never below a tenth of calibrated
    (a line fitted to noise may dip)."""
    a, b = line
    table: list[float] = []
    for q, seconds in enumerate(calibrated):
        value = seconds * max(a + b * max(q, 1), 0.1)
        table.append(max(value, table[-1]) if table else value)
    return table
