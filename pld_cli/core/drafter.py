"""The prompt-lookup drafter: copy what followed the last n tokens where they occurred before.

The index covers the whole sequence (prompt plus output so far) and grows by O(ngram_max) work per
appended token, so drafting never rescans the sequence. With `follow_copies`, a copy that the model
keeps agreeing with is continued from where it left off (in an edit, the rest of the unchanged text
follows), and a fresh search breaks ties between equally long matches by nearness to where the last
copy ended; without it, the most recent occurrence of the longest matching suffix is used.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Draft:
    """Tokens proposed for verification and where in the sequence they were copied from."""

    tokens: tuple[int, ...] = ()
    source: int | None = None  # sequence position of tokens[0]
    run: int = 0  # tokens in a row the copy has matched so far (n-gram length for a fresh match)
    # A fresh match whose earlier occurrences were followed by different tokens: its first token
    # is a guess among them, and is accepted far less often (see policy.py).
    ambiguous: bool = False


NO_DRAFT = Draft()


class NgramIndex:
    """Where each n-gram of a sequence (ngram_min <= n <= ngram_max) occurred, oldest first."""

    def __init__(self, tokens: Iterable[int] = (), ngram_max: int = 3, ngram_min: int = 1) -> None:
        if not 1 <= ngram_min <= ngram_max:
            raise ValueError("need 1 <= ngram_min <= ngram_max")
        self.ngram_max = ngram_max
        self.ngram_min = ngram_min
        self.tokens: list[int] = []
        # n-gram -> ascending positions of the tokens that followed its occurrences
        self._followers: dict[tuple[int, ...], list[int]] = {}
        self.extend(tokens)

    def __len__(self) -> int:
        return len(self.tokens)

    def append(self, token: int) -> None:
        # The n-grams ending at the current last token gain a follower now; index only those, so
        # that a lookup of the sequence's own suffix finds an earlier occurrence, never itself.
        toks = self.tokens
        follower = len(toks)
        for n in range(self.ngram_min, min(self.ngram_max, follower) + 1):
            self._followers.setdefault(tuple(toks[follower - n :]), []).append(follower)
        toks.append(token)

    def extend(self, tokens: Iterable[int]) -> None:
        for token in tokens:
            self.append(token)

    def longest_match(self) -> tuple[int, list[int]]:
        """(n, follower positions) for the longest suffix of the sequence seen before; (0, [])."""
        toks = self.tokens
        for n in range(min(self.ngram_max, len(toks)), self.ngram_min - 1, -1):
            followers = self._followers.get(tuple(toks[len(toks) - n :]))
            if followers:
                return n, followers
        return 0, []

    def draft(self, k: int) -> Draft:
        """Up to k tokens that followed the most recent earlier occurrence of the longest suffix."""
        n, followers = self.longest_match()
        if k <= 0 or not n:
            return NO_DRAFT
        return self.copy(followers[-1], k, n)

    def copy(self, start: int, k: int, run: int, ambiguous: bool = False) -> Draft:
        return Draft(tuple(self.tokens[start : start + k]), start, run, ambiguous)

    def followers_disagree(self, followers: list[int], recent: int = 8) -> bool:
        """Whether the last `recent` occurrences of a match were followed by different tokens."""
        toks = self.tokens
        return len({toks[f] for f in followers[-recent:] if f < len(toks)}) > 1


class Drafter:
    """An NgramIndex plus the state of the copy in progress."""

    def __init__(self, index: NgramIndex, follow_copies: bool = True) -> None:
        self.index = index
        self.follow_copies = follow_copies
        self.copy_next: int | None = None  # source position the next token should match
        self.run = 0
        self.last_copy_end: int | None = None

    def draft(self, k: int) -> Draft:
        if not self.follow_copies:
            return self.index.draft(k)
        if self.copy_next is not None and self.copy_next < len(self.index):
            return self.index.copy(self.copy_next, k, self.run)
        n, followers = self.index.longest_match()
        if not n:
            return NO_DRAFT
        start = (
            followers[-1] if self.last_copy_end is None else nearest(followers, self.last_copy_end)
        )
        self.copy_next, self.run = start, n
        ambiguous = self.index.followers_disagree(followers)
        return self.index.copy(start, max(k, 0), n, ambiguous)

    def extend(self, tokens: list[int]) -> None:
        """Append emitted tokens; the copy goes on while they equal its source, token by token."""
        for token in tokens:
            if self.copy_next is not None:
                source = self.index.tokens
                if self.copy_next < len(source) and source[self.copy_next] == token:
                    self.copy_next += 1
                    self.run += 1
                else:
                    self.last_copy_end, self.copy_next, self.run = self.copy_next, None, 0
            self.index.append(token)


def nearest(positions: list[int], target: int) -> int:
    """The position closest to target (ascending list); on a tie the later, i.e. more recent."""
    i = bisect.bisect_left(positions, target)
    candidates = positions[max(i - 1, 0) : i + 1]
    return min(reversed(candidates), key=lambda p: abs(p - target))
