"""The prompt-lookup drafter: copy what followed the last n tokens where they occurred before.

The index covers the whole sequence (prompt plus output so far) and grows by O(ngram_max) work per
appended token, so drafting never rescans the sequence. With `follow_copies`, a copy that the model
keeps agreeing with is continued from where it left off (in an edit, the rest of the unchanged text
follows), and a fresh search breaks ties between equally long matches by nearness to where the last
copy ended; without it, the most recent occurrence of the longest matching suffix is used.

A prediction (a caller's guess of the output, such as the file an edit will mostly reprint) is a
second source beside the sequence: its own n-gram index, looked up with the sequence's suffix. It is
never part of the sequence, so the model never sees it; it only offers drafts, which verification
keeps or rejects as any other, so the output is the one decoding gives without it. On a match as
long in both, the prediction is copied: the caller named it as this very output. And with
`follow_copies` the output's first draft is the prediction's beginning, as if the two had matched
there: a prediction is a guess of the output from its first token on.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence
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
    predicted: bool = False  # copied from the prediction (source is a position in it)


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
        return self.match(self.tokens)

    def match(self, sequence: Sequence[int]) -> tuple[int, list[int]]:
        """(n, follower positions here) for the longest suffix of `sequence` indexed here; a
        prediction's index is asked with the decoded sequence's suffix."""
        for n in range(min(self.ngram_max, len(sequence)), self.ngram_min - 1, -1):
            followers = self._followers.get(tuple(sequence[len(sequence) - n :]))
            if followers:
                return n, followers
        return 0, []

    def draft(self, k: int) -> Draft:
        """Up to k tokens that followed the most recent earlier occurrence of the longest suffix."""
        n, followers = self.longest_match()
        if k <= 0 or not n:
            return NO_DRAFT
        return self.copy(followers[-1], k, n)

    def copy(
        self, start: int, k: int, run: int, ambiguous: bool = False, predicted: bool = False
    ) -> Draft:
        return Draft(tuple(self.tokens[start : start + k]), start, run, ambiguous, predicted)

    def followers_disagree(self, followers: list[int], recent: int = 8) -> bool:
        """Whether the last `recent` occurrences of a match were followed by different tokens."""
        toks = self.tokens
        return len({toks[f] for f in followers[-recent:] if f < len(toks)}) > 1


@dataclass
class Source:
    """Where drafts are copied from: the sequence's own index, or a prediction's (fixed)."""

    index: NgramIndex
    predicted: bool = False
    last_copy_end: int | None = None  # where the latest copy from here broke off


class Drafter:
    """The sequence's NgramIndex, a prediction's if given, and the state of the copy in progress."""

    def __init__(
        self, index: NgramIndex, follow_copies: bool = True, prediction: Sequence[int] = ()
    ) -> None:
        self.index = index
        self.follow_copies = follow_copies
        self.sequence = Source(index)
        self.sources = [self.sequence]
        self.copying = self.sequence  # the source of the copy in progress
        self.copy_next: int | None = None  # source position the next token should match
        self.run = 0
        if prediction:
            predicted = Source(NgramIndex(prediction, index.ngram_max, index.ngram_min), True)
            self.sources.insert(0, predicted)  # first: on a tie it wins (the module docstring)
            # The output's start matches the prediction's, as a 1-gram match would.
            self.copying, self.copy_next, self.run = predicted, 0, 1

    @property
    def last_copy_end(self) -> int | None:
        """Where the latest copy from the sequence itself broke off."""
        return self.sequence.last_copy_end

    def draft(self, k: int) -> Draft:
        if self.follow_copies and self.copy_next is not None:
            source = self.copying
            if self.copy_next < len(source.index):
                return source.index.copy(self.copy_next, k, self.run, predicted=source.predicted)
        source, n, followers = self.longest_match()
        if not n or (k <= 0 and not self.follow_copies):
            return NO_DRAFT
        if not self.follow_copies:  # the most recent occurrence, as NgramIndex.draft
            return source.index.copy(followers[-1], k, n, predicted=source.predicted)
        last = source.last_copy_end
        start = followers[-1] if last is None else nearest(followers, last)
        self.copying, self.copy_next, self.run = source, start, n
        ambiguous = source.index.followers_disagree(followers)
        return source.index.copy(start, max(k, 0), n, ambiguous, source.predicted)

    def longest_match(self) -> tuple[Source, int, list[int]]:
        """The source holding the longest suffix of the sequence (the first on a tie), n, and
        where that suffix was followed there."""
        best: tuple[Source, int, list[int]] = (self.sequence, 0, [])
        for source in self.sources:
            n, followers = source.index.match(self.index.tokens)
            if n > best[1]:
                best = (source, n, followers)
        return best

    def extend(self, tokens: list[int]) -> None:
        """Append emitted tokens; the copy goes on while they equal its source, token by token."""
        for token in tokens:
            if self.copy_next is not None:
                source = self.copying.index.tokens
                if self.copy_next < len(source) and source[self.copy_next] == token:
                    self.copy_next += 1
                    self.run += 1
                else:
                    self.copying.last_copy_end, self.copy_next, self.run = self.copy_next, None, 0
            self.index.append(token)


def nearest(positions: list[int], target: int) -> int:
    """The position closest to target (ascending list); on a tie the later, i.e. more recent."""
    i = bisect.bisect_left(positions, target)
    candidates = positions[max(i - 1, 0) : i + 1]
    return min(reversed(candidates), key=lambda p: abs(p - target))
