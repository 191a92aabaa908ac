"""Cost-aware draft length: verify as many draft tokens as maximise expected tokens per second.

A pass over q positions costs t(q) (measured: runtime/calibration/costs.py). A draft whose i-th
token survives with probability p_i (given the i-1 before it survived) yields E(k) = 1 +
sum_{i<=k} prod_{j<=i} p_j tokens from a pass over k + 1 positions; the policy picks k in [0, cap]
maximising E(k) / t(k+1). p_i is learned online per "run so far" (how many tokens in a row the
current copy has matched, the n-gram match included), since a copy that has held tends to keep
holding; the first token of an ambiguous fresh match (its n-gram was followed by different tokens
before) has its own estimate, as it holds far less often. The priors are worth 3-5 observations;
those of long runs are the sample corpora's rates, since lower guesses made pld verify too few
tokens of a long copy (docs/design-measurements.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

# Runs of these lengths share an acceptance estimate: 1, 2, 3, 4-7, 8-15, 16+.
RUN_BUCKETS = (1, 2, 3, 4, 8, 16)
AMBIGUOUS = len(RUN_BUCKETS)  # the estimate for the first token of an ambiguous fresh match


def run_bucket(run: int, ambiguous: bool = False) -> int:
    if ambiguous:
        return AMBIGUOUS
    bucket = 0
    for i, start in enumerate(RUN_BUCKETS):
        if run >= start:
            bucket = i
    return bucket


@dataclass
class AcceptanceModel:
    """Beta-smoothed P(next draft token accepted | run so far), updated after every pass."""

    accepted: list[float] = field(default_factory=lambda: [1.0, 1.5, 2.0, 3.16, 4.7, 4.9, 0.5])
    trials: list[float] = field(default_factory=lambda: [3.0, 3.0, 3.0, 4.0, 5.0, 5.0, 3.0])

    def p(self, run: int, ambiguous: bool = False) -> float:
        bucket = run_bucket(run, ambiguous)
        return self.accepted[bucket] / self.trials[bucket]

    def update(self, run: int, drafted: int, accepted: int, ambiguous: bool = False) -> None:
        """Draft token i was tried at run + i; the first `accepted` held, the next one failed."""
        for i in range(min(drafted, accepted + 1)):
            bucket = run_bucket(run + i, ambiguous and i == 0)
            self.trials[bucket] += 1
            self.accepted[bucket] += i < accepted


@dataclass(frozen=True)
class DraftLength:
    k: int  # draft tokens to verify
    expected_tokens: float  # E(k)
    seconds: float  # t(k + 1)

    @property
    def reason(self) -> str:
        return f"E={self.expected_tokens:.2f} tok in t({self.k + 1})={self.seconds * 1e3:.1f} ms"


def choose_length(
    available: int,
    run: int,
    model: AcceptanceModel,
    costs: Sequence[float],
    ambiguous: bool = False,
) -> DraftLength:
    """The k <= available maximising expected tokens per second; costs[q] = t(q)."""
    best = DraftLength(0, 1.0, costs[1])
    expected, survive = 1.0, 1.0
    for k in range(1, min(available, len(costs) - 2) + 1):
        survive *= model.p(run + k - 1, ambiguous and k == 1)
        expected += survive
        if expected / costs[k + 1] > best.expected_tokens / best.seconds:
            best = DraftLength(k, expected, costs[k + 1])
    return best
