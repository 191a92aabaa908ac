"""Decode statistics as data, accumulated from the loop's events.

copy rate f = accepted draft tokens / new tokens; mean accepted run L = accepted draft tokens over
the passes that accepted at least one. The seed's estimate of the speedup is 1 / (f/L + (1 - f)).
"""

from __future__ import annotations

from dataclasses import dataclass

from .decode import Event, Prefill


@dataclass
class Stats:
    prompt_tokens: int = 0
    new_tokens: int = 0
    passes: int = 0
    drafted_tokens: int = 0
    accepted_tokens: int = 0
    passes_accepting: int = 0
    prefill_s: float = 0.0
    decode_s: float = 0.0
    stop: str | None = None

    def add(self, event: Event) -> None:
        if isinstance(event, Prefill):
            self.prompt_tokens = event.prompt_tokens
            self.prefill_s += event.seconds
            return
        self.passes += 1
        self.new_tokens += len(event.emitted)
        self.drafted_tokens += len(event.drafted)
        self.accepted_tokens += event.accepted
        self.passes_accepting += event.accepted > 0
        self.decode_s += event.seconds
        self.stop = event.stop or self.stop

    @property
    def tokens_per_pass(self) -> float:
        return self.new_tokens / self.passes if self.passes else 0.0

    @property
    def copy_rate(self) -> float:
        return self.accepted_tokens / self.new_tokens if self.new_tokens else 0.0

    @property
    def mean_accepted(self) -> float:
        return self.accepted_tokens / self.passes_accepting if self.passes_accepting else 0.0

    @property
    def tokens_per_s(self) -> float:
        return self.new_tokens / self.decode_s if self.decode_s else 0.0

    @property
    def predicted_speedup(self) -> float:
        """The seed's formula from this run's f and L (an estimate, not a measurement)."""
        f, run = self.copy_rate, self.mean_accepted
        return 1.0 / (f / run + (1.0 - f)) if run else 1.0

    def as_dict(self) -> dict[str, float | int]:
        """The `--json` stats object; these names are an interface."""
        return {
            "prompt_tokens": self.prompt_tokens,
            "new_tokens": self.new_tokens,
            "passes": self.passes,
            "drafted_tokens": self.drafted_tokens,
            "accepted_tokens": self.accepted_tokens,
            "prefill_s": round(self.prefill_s, 4),
            "decode_s": round(self.decode_s, 4),
            "tokens_per_s": round(self.tokens_per_s, 2),
            "tokens_per_pass": round(self.tokens_per_pass, 3),
            "copy_rate": round(self.copy_rate, 4),
            "mean_accepted": round(self.mean_accepted, 3),
        }
