"""Prompts' keys and values in RAM, bounded and freed least recently used first.

Why a kept prefix is exact: pld's C decoder computes every row of a pass from that row alone, at
its own position, over the slots before it (runtime/batch/scheduler.py); a prefill in slices gives
each row the bits a whole one gives. So the keys and values of a prompt's first n positions depend
on its first n tokens only: another prompt that begins with those tokens gets the very same bits
by copying them instead of computing them, and the rest of its prefill is one more slice.

An entry is one prompt's tokens and its keys and values [layers, kv_heads, positions, head_dim].
A lookup takes the entry sharing the longest prefix with the prompt (any prefix of an entry is
usable, a position's bits depending only on the tokens up to it). Keeping a prompt drops the
entries it extends (their tokens are its prefix) and adds nothing where an entry extends it.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

MIB = 2**20


@dataclass(frozen=True)
class Prefix:
    """One prompt's tokens and the keys and values of its positions."""

    tokens: np.ndarray  # int64 [positions]
    keys: torch.Tensor  # [layers, kv_heads, positions, head_dim]
    values: torch.Tensor

    @property
    def nbytes(self) -> int:
        return self.keys.nbytes + self.values.nbytes


def common_length(a: np.ndarray, b: np.ndarray) -> int:
    """How many tokens a and b share from the start."""
    n = min(len(a), len(b))
    differ = np.flatnonzero(a[:n] != b[:n])
    return int(differ[0]) if len(differ) else n


def as_tokens(ids: Sequence[int]) -> np.ndarray:
    return np.asarray(ids, dtype=np.int64)


class PrefixStore:
    """Prefixes in RAM, at most `budget` bytes of keys and values; thread-safe (the slots of a
    batch share one store). Entries are never changed once kept, so a caller copies from one
    outside the lock while another thread may drop it."""

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self.entries: OrderedDict[bytes, Prefix] = OrderedDict()  # least recently used first
        self.used = 0  # bytes held
        self.lock = threading.Lock()

    def match(self, ids: Sequence[int]) -> tuple[int, Prefix | None]:
        """The entry sharing the longest prefix with ids, and how many positions it gives."""
        tokens = as_tokens(ids)
        with self.lock:
            best, length = None, 0
            for key, entry in self.entries.items():
                shared = common_length(entry.tokens, tokens)
                if shared > length:
                    best, length = key, shared
            if best is None:
                return 0, None
            self.entries.move_to_end(best)
            return length, self.entries[best]

    def wants(self, ids: Sequence[int]) -> bool:
        """Whether keeping ids would add anything: no entry begins with all of them."""
        tokens = as_tokens(ids)
        with self.lock:
            return not any(
                common_length(e.tokens, tokens) == len(tokens) for e in self.entries.values()
            )

    def keep(self, prefix: Prefix) -> None:
        if prefix.nbytes > self.budget or not len(prefix.tokens):
            return
        with self.lock:
            for key, entry in list(self.entries.items()):
                shared = common_length(entry.tokens, prefix.tokens)
                if shared == len(prefix.tokens):
                    self.entries.move_to_end(key)  # it holds this prompt already
                    return
                if shared == len(entry.tokens):
                    self.drop(key)  # this prompt extends it
            self.entries[prefix.tokens.tobytes()] = prefix
            self.used += prefix.nbytes
            while self.used > self.budget:
                self.drop(next(iter(self.entries)))

    def drop(self, key: bytes) -> None:
        self.used -= self.entries.pop(key).nbytes

    def __len__(self) -> int:
        return len(self.entries)
