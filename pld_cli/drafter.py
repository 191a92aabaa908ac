"""The prompt-lookup drafter: copy what followed the last n tokens where they occurred before.

The index covers the whole sequence (prompt plus output so far) and grows by O(ngram_max) work per
appended token, so drafting never rescans the sequence.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Draft:
    """Tokens proposed for verification and where in the sequence they were copied from."""

    tokens: tuple[int, ...] = ()
    source: int | None = None  # sequence position of tokens[0]
    ngram: int = 0  # length of the suffix that matched


NO_DRAFT = Draft()


class NgramIndex:
    """Where each n-gram of a sequence (ngram_min <= n <= ngram_max) last occurred."""

    def __init__(self, tokens: Iterable[int] = (), ngram_max: int = 3, ngram_min: int = 1) -> None:
        if not 1 <= ngram_min <= ngram_max:
            raise ValueError("need 1 <= ngram_min <= ngram_max")
        self.ngram_max = ngram_max
        self.ngram_min = ngram_min
        self.tokens: list[int] = []
        # n-gram -> position of the token that followed its most recent occurrence
        self._follower: dict[tuple[int, ...], int] = {}
        self.extend(tokens)

    def __len__(self) -> int:
        return len(self.tokens)

    def append(self, token: int) -> None:
        # The n-grams ending at the current last token gain a follower now; index only those, so
        # that a lookup of the sequence's own suffix finds an earlier occurrence, never itself.
        toks = self.tokens
        follower = len(toks)
        for n in range(self.ngram_min, min(self.ngram_max, follower) + 1):
            self._follower[tuple(toks[follower - n :])] = follower
        toks.append(token)

    def extend(self, tokens: Iterable[int]) -> None:
        for token in tokens:
            self.append(token)

    def draft(self, k: int) -> Draft:
        """Up to k tokens that followed the most recent earlier occurrence of the longest suffix."""
        if k <= 0:
            return NO_DRAFT
        toks = self.tokens
        for n in range(min(self.ngram_max, len(toks)), self.ngram_min - 1, -1):
            start = self._follower.get(tuple(toks[len(toks) - n :]))
            if start is not None:
                return Draft(tuple(toks[start : start + k]), start, n)
        return NO_DRAFT
