"""A runtime whose prefill starts from the longest prefix a store keeps (store.py, disk.py).

Only where that is exact: pld's C decoder (a NativeRuntime with its decoder, or a slot of a batch
over one), whose rows are each computed alone, so a prefix copied in and the rest prefilled after
it give every position the bits a whole prefill gives. Torch's float path is not batch-invariant
(its products round by the number of rows, runtime/batch/opening.py): it prefills whole, uncached.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

import torch

from pld_cli.core.runtime import Runtime
from pld_cli.runtime.batch.scheduler import Slot
from pld_cli.runtime.native.runtime import NativeRuntime
from pld_cli.runtime.prefix.store import Prefix, as_tokens


class Prefixes(Protocol):
    """A store of prefixes: in RAM (store.PrefixStore) or on disk (disk.DiskPrefixes)."""

    def match(self, ids: Sequence[int]) -> tuple[int, Prefix | None]: ...

    def wants(self, ids: Sequence[int]) -> bool: ...

    def keep(self, prefix: Prefix) -> None: ...


def exact(runtime: Runtime) -> bool:
    """Whether a prefill split anywhere gives this runtime's positions the bits of a whole one."""
    if isinstance(runtime, Slot):
        return True  # a batch runs on the C decoder only (batch/opening.py)
    return isinstance(runtime, NativeRuntime) and runtime.decoder is not None


def with_prefixes(runtime: Runtime, store: Prefixes | None) -> Runtime:
    """The runtime, its prefills served from `store` where that is exact."""
    return CachedPrefill(runtime, store) if store is not None and exact(runtime) else runtime


class CachedPrefill:
    """A `Runtime` over a NativeRuntime or a Slot: a prefill copies the longest kept prefix into
    the cache, prefills the rest, and keeps the prompt for the next one. Returns the positions
    copied (pld serve's cached_tokens)."""

    def __init__(self, runtime: NativeRuntime | Slot, store: Prefixes) -> None:
        self.runtime, self.store = runtime, store
        self.context_limit, self.refusal = runtime.context_limit, runtime.refusal
        self.paths = runtime.paths

    @property
    def name(self) -> str:
        return self.runtime.name

    @property
    def length(self) -> int:
        return self.runtime.length

    def prefill(self, ids: Sequence[int]) -> int:
        count, prefix = self.store.match(ids) if ids else (0, None)
        if prefix is not None:
            self.runtime.restore(prefix.keys, prefix.values, count)
        self.runtime.prefill(ids, start=count)
        if count < len(ids) and self.store.wants(ids):
            keys, values = self.runtime.snapshot(len(ids))
            self.store.keep(Prefix(as_tokens(ids), keys, values))
        return count

    def forward(self, ids: Sequence[int]) -> torch.Tensor:
        return self.runtime.forward(ids)

    def rollback(self, length: int) -> None:
        self.runtime.rollback(length)

    def choose(self, choice: Mapping[int, str]) -> None:
        self.runtime.choose(choice)

    def notes(self) -> list[str]:
        return self.runtime.notes()
