"""A batch for -j N on this machine: how many documents at once, from the runtime and the memory.

Only pld's C decoder computes each row from its own row alone, so only it batches documents:
float weights run through MKL's products, whose rounding depends on how many rows a product has,
so they decode one document at a time (and say so). The KV caches of all slots are sized before
the run, from the machine's physical memory (never the memory free now, so a command runs the
same way every time): at most CACHE_SHARE of what the weights leave; fewer slots where N do not
fit, and the note says so.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from pld_cli.core.runtime import Runtime
from pld_cli.runtime.batch.scheduler import Batch
from pld_cli.runtime.clib.threads import release_team
from pld_cli.runtime.native.quantized.quantize import weight_bytes
from pld_cli.runtime.native.runtime import NativeRuntime

CACHE_SHARE = 0.5  # of the physical memory the weights leave, for the slots' KV caches
GIB = 2**30
CAPACITY_STEP = 512

Note = Callable[[str], None]


def open_batch(
    runtime: Runtime, jobs: int, positions: int, note: Note, memory: int | None = None
) -> tuple[Batch | None, str]:
    """A batch of up to `jobs` slots of `positions` each over the runtime's weights, and why it
    holds fewer than `jobs` ('' where it holds them all); None where documents go one at a time."""
    if not isinstance(runtime, NativeRuntime) or runtime.decoder is None:
        return None, (
            "this model's weights decode one document at a time: float products (MKL) are not "
            "batch-invariant (a GGUF or --quantize int8 decodes several at once)"
        )
    capacity = min(-(-positions // CAPACITY_STEP) * CAPACITY_STEP, runtime.context_limit)
    region = cache_bytes(runtime, capacity)
    memory = memory if memory is not None else physical_memory()
    room = CACHE_SHARE * (memory - weight_bytes(runtime.weights))
    regions = max(1, min(jobs, int(room // region)))
    why = ""
    if regions < jobs:
        why = (
            f"{regions} at once: KV caches of {capacity} positions take {region / GIB:.2f} GiB "
            f"each, and {CACHE_SHARE:.0%} of the memory the weights leave holds {regions}"
        )
    batch = Batch(NativeRuntime(runtime.model, capacity, regions), regions)
    release_team()  # the batch's thread runs the passes, its team the only one (clib/threads.py)
    note(f"batch: {regions} documents at once, each its own KV cache of {capacity} positions")
    return batch, why


def cache_bytes(runtime: NativeRuntime, capacity: int) -> int:
    """Bytes of one slot's keys and values for `capacity` positions."""
    layers, kv_heads, _, head_dim = runtime.keys.shape
    return 2 * layers * kv_heads * capacity * head_dim * runtime.keys.element_size()


def physical_memory() -> int:
    return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
