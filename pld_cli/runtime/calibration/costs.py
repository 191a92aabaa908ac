"""The per-pass cost model t(q): seconds for one pass over q positions, measured, not assumed.

On a GPU extra positions are nearly free; on a CPU they are not. A short calibration times passes
of a few sizes on the loaded model, on top of a cached context as a verify pass runs, and caches
the table per model, device, dtype, runtime and thread count. On a CPU it keeps the machine's copy
speed (`copy_speed`, what a decode pass is bound by); a later run that finds it moved by more than
SPEED_TOLERANCE measures again, since a table from another machine or a busy moment chose kernel
paths from noise (docs/design-measurements.md).
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import torch

from pld_cli.core.runtime import Runtime
from pld_cli.files import atomic_write

MEASURED_SIZES = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32)
# Documents pld works on run to about a thousand tokens; on a CPU the attention part of a pass
# grows with the context, so the calibration runs on top of that many (or the model's limit).
CONTEXT = 1024
REPEATS = 5
CALIBRATION_POSITIONS = CONTEXT + max(MEASURED_SIZES) + 1  # the room a calibration needs
# A ratio of copy speeds: above the spread of a quiet process's (a virtual machine's neighbours),
# below the drop of a busy machine's (docs/design-measurements.md).
SPEED_TOLERANCE = 1.5
SPEED_COPIES = 8
SPEED_BUFFER_MB = 64  # past the last-level caches: the copy reads and writes memory
# How pld's runtimes compute a pass, in the cache key: raised when a change to them makes cached
# costs and path choices wrong (2: a one-row padded linear layer runs two rows, ../kernels.py; 3:
# the quantized head recomputes the logits near the top one, and passes run over a repeated
# pattern; 4: quantized decode and verify passes attend through the C row kernel,
# ../native/attention.py; 5: they run all their layers in one C call, ../native/decoder.py, and
# the int8 head in groups; 6: the C kernels come in variants per instruction set, named in the
# runtime's name; 7: the grouped kernel takes four layouts, a GGUF's own blocks; 8: row attention
# runs chunk by chunk; 9: it takes rows in blocks sharing each slot's loads, and a prompt slice's
# input split runs on every core: the same bits, other pass costs; 10: a K-quant's scales in the
# file's form, a fused matrix of several layouts in parts, AVX-512's digit split in intrinsics;
# 11: the grouped product's inputs as one signed byte per input, AVX2's nibbles on vpmaddubsw, four
# rows a tile on every variant: other bits, other pass costs).
KERNEL_REVISION = 11
# The calibration's tokens: a random pattern of this many, repeated, as text and copied spans are
# (a head that recomputed the logits near the top one, as torch's int8 head did, cost twice the
# kernel's time over random tokens: docs/design-measurements.md).
PATTERN = 100


def copy_speed() -> float:
    """Bytes per second of the best of SPEED_COPIES copies of a buffer larger than the caches
    (a short probe: docs/design-measurements.md)."""
    source = torch.empty(SPEED_BUFFER_MB * 2**20 // 4)
    target = torch.empty_like(source)
    best = float("inf")
    for _ in range(SPEED_COPIES):
        start = time.perf_counter()
        target.copy_(source)
        best = min(best, time.perf_counter() - start)
    return 2 * source.nbytes / best


def measure(runtime: Runtime, vocab_size: int) -> tuple[dict[int, float], dict[int, str]]:
    """Median seconds of a pass over q positions for each measured q, sizes interleaved.

    A runtime with several kernel paths (`paths`, `choose(choice)`) has each path timed per q, side
    by side in one process, and runs the fastest from then on: returns the costs of the chosen
    paths and the choice {q: path} ({} for a runtime with one path)."""
    paths = runtime.paths or (None,)
    context = min(CONTEXT, runtime.context_limit - max(MEASURED_SIZES) - 1)
    tokens = calibration_tokens(vocab_size, context + max(MEASURED_SIZES))
    runtime.prefill(tokens[:context])
    samples: dict[tuple[int, str | None], list[float]] = {
        (q, path): [] for q in MEASURED_SIZES for path in paths
    }
    for _ in range(REPEATS + 1):  # the first round warms up
        for q in MEASURED_SIZES:
            ids = tokens[context : context + q]  # the pattern goes on, as a copied span does
            for path in paths:
                if path is not None:
                    runtime.choose({q: path})
                start = time.perf_counter()
                runtime.forward(ids).argmax(-1).tolist()  # the read-back syncs, as in a real pass
                samples[q, path].append(time.perf_counter() - start)
                runtime.rollback(context)
    medians = {size: statistics.median(times[1:]) for size, times in samples.items()}
    best = {q: min(paths, key=lambda path: medians[q, path]) for q in MEASURED_SIZES}
    choice = {q: path for q, path in best.items() if path is not None}
    if choice:
        runtime.choose(choice)
    return {q: medians[q, path] for q, path in best.items()}, choice


def calibration_tokens(vocab_size: int, count: int) -> list[int]:
    """`count` token ids: a random PATTERN repeated (the same on every run)."""
    generator = torch.Generator().manual_seed(0)
    pattern = torch.randint(0, vocab_size, (PATTERN,), generator=generator)
    return pattern.repeat(count // PATTERN + 1)[:count].tolist()


def interpolate(measured: dict[int, float], max_q: int) -> list[float]:
    """costs[q] for q = 0..max_q: piecewise linear through the measurements (extended along the
    last segment past the largest), never decreasing.

    A pass over q positions never costs more than one over a larger measured size (it could be
    padded to it), so a size measured slower than a larger one (a noisy sample on a busy machine)
    counts at the larger one's cost."""
    sizes = sorted(measured)
    measured = {s: min(measured[t] for t in sizes if t >= s) for s in sizes}
    costs = [measured[sizes[0]]]
    for q in range(1, max_q + 1):
        lo = max((s for s in sizes if s <= q), default=sizes[0])
        hi = min((s for s in sizes if s >= q), default=sizes[-1])
        if q > sizes[-1] and len(sizes) > 1:
            lo, hi = sizes[-2], sizes[-1]
        if lo == hi:
            value = measured[lo]
        else:
            value = measured[lo] + (measured[hi] - measured[lo]) * (q - lo) / (hi - lo)
        costs.append(max(value, costs[-1]))
    return costs


def pass_costs(
    runtime: Runtime,
    vocab_size: int,
    key: str,
    cache_file: Path,
    max_q: int,
    report: Callable[[str], None] = lambda _: None,
    speed: float | None = None,
) -> list[float]:
    """costs[q] = t(q) for q up to max_q, from the cache file or a fresh calibration. `speed`:
    this machine's copy_speed() now (None where passes do not run on the CPU)."""
    table = load_table(cache_file)
    if key not in table or stale(table[key], speed):
        why = moved(table[key], speed) if key in table else "once for this model, device and dtype"
        report(f"measuring pass costs ({why})")
        costs, choice = measure(runtime, vocab_size)
        table[key] = {str(q): seconds for q, seconds in costs.items()}
        if choice:  # kept with the costs it produced
            table[key]["paths"] = {str(q): path for q, path in choice.items()}
        if speed is not None:
            table[key]["speed"] = speed
        cache_file.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(cache_file, json.dumps(table, indent=1, sort_keys=True))
    entry = dict(table[key])
    choice = entry.pop("paths", None)
    entry.pop("speed", None)
    if choice:
        runtime.choose({int(q): path for q, path in choice.items()})
    return interpolate({int(q): s for q, s in entry.items()}, max_q)


def stale(entry: dict, speed: float | None) -> bool:
    """Whether a cached table was measured at another copy speed than `speed` (or at one not
    recorded: tables from before the speed was kept)."""
    if speed is None:
        return False
    then = entry.get("speed")
    return then is None or not 1 / SPEED_TOLERANCE <= speed / then <= SPEED_TOLERANCE


def moved(entry: dict, speed: float) -> str:
    """Why a stale table is measured again."""
    then = entry.get("speed")
    if then is None:
        return "the cached ones did not record the machine's speed"
    return f"this machine copies memory at {speed / 1e9:.0f} GB/s, {then / 1e9:.0f} when they were"


def load_table(cache_file: Path) -> dict[str, dict[str, float]]:
    try:
        return json.loads(cache_file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def cost_key(model: str, device: str, dtype: str, runtime: str) -> str:
    return (
        f"{model}|{device}|{dtype}|{runtime}|threads={torch.get_num_threads()}|{torch.__version__}"
        f"|context={CONTEXT}|q<={max(MEASURED_SIZES)}|kernels={KERNEL_REVISION}"
    )
