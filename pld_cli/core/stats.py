"""Decode statistics as data, accumulated from the loop's events, and every formula over them.

The one home of pld's metrics (the CLI's `--compare` and `pld bench` both use these):
- copy rate f = accepted draft tokens / new tokens;
- mean accepted run L = accepted draft tokens / passes that accepted at least one;
- the PLD speedup formula 1 / (f/L + (1 - f)): passes saved, an estimate, not a measurement;
- the measured speedup of A over B = A's tok/s / B's tok/s, both decoded in the same process.
  A ratio of rates: with the same tokens it equals B's decode time over A's, and it stays fair
  when sampling (or a diverging dtype) makes the lengths differ.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from pld_cli.core.decode import Event, Prefill, Stop


@dataclass
class Stats:
    prompt_tokens: int = 0
    cached_tokens: int = 0  # prompt positions copied from a kept prompt (runtime/prefix/)
    new_tokens: int = 0
    passes: int = 0
    drafted_tokens: int = 0
    accepted_tokens: int = 0
    passes_accepting: int = 0
    prefill_s: float = 0.0
    decode_s: float = 0.0
    stop: Stop | None = None
    removed_tokens: int = 0  # generated, then cut from the delivered text (a loop's repeats)
    # Draft tokens copied from a caller's prediction (core/drafter.py): kept in the output, and
    # verified but not kept. Prediction tokens never drafted count in neither.
    prediction_accepted: int = 0
    prediction_rejected: int = 0
    # False where the engine does not say how many tokens it drafted (a server without per-request
    # metrics): drafted_tokens is then unknown (null in JSON), never a guess.
    drafts_known: bool = True
    costs: Sequence[float] | None = None  # measured t(q), for the estimated speedup
    runtime: str | None = None  # what ran the passes (native-int8+avx2: the C kernels' variant)
    pass_sizes: Counter[int] = field(default_factory=Counter)  # positions per pass -> passes
    # per draft position i (0-based): passes that verified it, and passes that accepted it
    position_tried: list[int] = field(default_factory=list)
    position_accepted: list[int] = field(default_factory=list)

    def add(self, event: Event) -> None:
        if isinstance(event, Prefill):
            self.prompt_tokens = event.prompt_tokens
            self.cached_tokens = event.cached
            self.prefill_s += event.seconds
            return
        self.passes += 1
        self.new_tokens += len(event.emitted)
        self.drafted_tokens += len(event.drafted)
        self.accepted_tokens += event.accepted
        self.passes_accepting += event.accepted > 0
        self.decode_s += event.seconds
        self.stop = event.stop or self.stop
        self.pass_sizes[len(event.drafted) + 1] += 1
        if event.predicted:
            self.prediction_accepted += event.accepted
            self.prediction_rejected += len(event.drafted) - event.accepted
        for i in range(min(len(event.drafted), event.accepted + 1)):
            self.count_position(i, 1, i < event.accepted)

    COUNTS = (
        "prompt_tokens",
        "cached_tokens",
        "new_tokens",
        "passes",
        "drafted_tokens",
        "accepted_tokens",
        "passes_accepting",
        "prefill_s",
        "decode_s",
        "removed_tokens",
        "prediction_accepted",
        "prediction_rejected",
    )

    @classmethod
    def merged(cls, runs: Sequence[Stats]) -> Stats:
        """The stats of several decodes as one (a long document's calls, a run's files): counts
        and times summed, the first one's costs and runtime; a call cut short makes the whole
        incomplete, so the stop is the first that is not EOS, else the last one's."""
        stop = next((s.stop for s in runs if s.stop != Stop.EOS), runs[-1].stop) if runs else None
        first = runs[0] if runs else cls()
        out = cls(costs=first.costs, runtime=first.runtime, stop=stop)
        out.drafts_known = all(stats.drafts_known for stats in runs)
        for stats in runs:
            for name in cls.COUNTS:
                setattr(out, name, getattr(out, name) + getattr(stats, name))
            out.pass_sizes.update(stats.pass_sizes)
            for i, (tried, accepted) in enumerate(
                zip(stats.position_tried, stats.position_accepted, strict=True)
            ):
                out.count_position(i, tried, accepted)
        return out

    def count_position(self, i: int, tried: int, accepted: int) -> None:
        """Draft position i was verified `tried` times and accepted `accepted` times more."""
        if i == len(self.position_tried):
            self.position_tried.append(0)
            self.position_accepted.append(0)
        self.position_tried[i] += tried
        self.position_accepted[i] += accepted

    @property
    def tokens_per_pass(self) -> float:
        return ratio(self.new_tokens, self.passes)

    @property
    def copy_rate(self) -> float:
        return copy_rate(self.accepted_tokens, self.new_tokens)

    @property
    def mean_accepted(self) -> float:
        return mean_accepted(self.accepted_tokens, self.passes_accepting)

    @property
    def tokens_per_s(self) -> float:
        return ratio(self.new_tokens, self.decode_s)

    @property
    def predicted_speedup(self) -> float:
        """The PLD speedup formula from this run's f and L (an estimate, not a measurement)."""
        return predicted_speedup(self.copy_rate, self.mean_accepted)

    @property
    def estimated_speedup(self) -> float | None:
        """Plain decoding's modeled time (new tokens × t(1)) over this run's modeled pass time."""
        if not self.costs or not self.passes:
            return None
        spent = sum(
            count * self.costs[min(q, len(self.costs) - 1)] for q, count in self.pass_sizes.items()
        )
        return self.new_tokens * self.costs[1] / spent

    def acceptance_histogram(self) -> list[dict[str, float]]:
        """Per draft position: how often it was verified and the share of those accepted."""
        return [
            {"position": i + 1, "tried": tried, "accepted": acc, "rate": round(acc / tried, 3)}
            for i, (tried, acc) in enumerate(
                zip(self.position_tried, self.position_accepted, strict=True)
            )
        ]

    def as_dict(self) -> dict[str, float | int]:
        """The `--json` stats object; these names are an interface."""
        return {
            "prompt_tokens": self.prompt_tokens,
            "cached_tokens": self.cached_tokens,
            "new_tokens": self.new_tokens,
            "passes": self.passes,
            "drafted_tokens": self.drafted_tokens if self.drafts_known else None,
            "accepted_tokens": self.accepted_tokens,
            "prefill_s": round(self.prefill_s, 4),
            "decode_s": round(self.decode_s, 4),
            "tokens_per_s": round(self.tokens_per_s, 2),
            "tokens_per_pass": round(self.tokens_per_pass, 3),
            "copy_rate": round(self.copy_rate, 4),
            "mean_accepted": round(self.mean_accepted, 3),
            "removed_tokens": self.removed_tokens,
            "runtime": self.runtime,
        }


def ratio(part: float, whole: float) -> float:
    """part / whole, 0 when there is no whole (no tokens, no passes, no time yet)."""
    return part / whole if whole else 0.0


def copy_rate(accepted_tokens: int, new_tokens: int) -> float:
    """f: the share of new tokens that came from accepted drafts."""
    return ratio(accepted_tokens, new_tokens)


def mean_accepted(accepted_tokens: int, passes_accepting: int) -> float:
    """L: accepted draft tokens per pass that accepted any."""
    return ratio(accepted_tokens, passes_accepting)


def measured_speedup(rate: float, baseline_rate: float) -> float | None:
    """How many times faster than the baseline, as a ratio of tok/s measured in one process."""
    return rate / baseline_rate if baseline_rate else None


def predicted_speedup(copy_rate: float, mean_accepted: float) -> float:
    """1 / (f/L + (1 - f)): passes saved when a share f of tokens came in accepted runs of L."""
    f, run = copy_rate, mean_accepted
    return 1.0 / (f / run + (1.0 - f)) if run else 1.0
