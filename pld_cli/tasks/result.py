"""What one call (or a whole long document's calls together) produced: text, tokens, stats."""

from __future__ import annotations

from dataclasses import dataclass

from pld_cli.core.decode import Stop
from pld_cli.core.stats import Stats, measured_speedup


@dataclass
class Result:
    text: str
    token_ids: list[int]
    stats: Stats

    def speedup_over(self, plain: Result) -> float:
        """Measured in this process against plain decoding of the same input (stats.py)."""
        return measured_speedup(self.stats.tokens_per_s, plain.stats.tokens_per_s) or 0.0

    @property
    def complete(self) -> bool:
        """The text ended (EOS, or a summary's loop stop), rather than running out of tokens."""
        return self.stats.stop in (Stop.EOS, Stop.REPETITION)
