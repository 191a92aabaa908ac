"""Prefill rate beside the machine's peak: how near the arithmetic a prompt's pass runs.

A prompt of PROMPT_TOKENS tokens (the corpus's prompts one after another, cut there) enters the
cache REPEAT times; its rate is tokens per second (median), its work the multiply-accumulates of
the layers' matrices and of causal attention. The peak is measured in the same run by pld's C
library (csrc/peak.c), on every core: the widest int8 instruction this CPU has, and the one the
kernel's exact products run on; the fractions are of both.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass

from pld_cli.core.config import DecodeConfig
from pld_cli.loading.models import LoadedModel
from pld_cli.loading.ready import ready
from pld_cli.runtime.clib import library
from pld_cli.runtime.native.runtime import NativeRuntime

PROMPT_TOKENS = 1000
REPEAT = 3
PEAK_SECONDS = 0.3


@dataclass(frozen=True)
class PrefillRate:
    prompt_tokens: int
    seconds: float  # median of REPEAT
    macs: float  # multiply-accumulates of one prefill
    peak_widest: float | None  # MAC/s of the widest int8 instruction (None: no C library)
    peak_kernel: float | None  # MAC/s of the instruction the kernel's products run on
    variant: str | None  # which build of the C library measured it

    @property
    def tokens_per_s(self) -> float:
        return self.prompt_tokens / self.seconds

    def fraction(self, peak: float | None) -> float | None:
        return None if not peak else self.macs / self.seconds / peak

    def as_dict(self) -> dict:
        rate = self.macs / self.seconds
        return {
            "prompt_tokens": self.prompt_tokens,
            "seconds": round(self.seconds, 3),
            "tokens_per_s": round(self.tokens_per_s, 1),
            "gmac_per_s": round(rate / 1e9, 2),
            "peak_widest_gmac_per_s": self.peak_widest and round(self.peak_widest / 1e9, 1),
            "peak_kernel_gmac_per_s": self.peak_kernel and round(self.peak_kernel / 1e9, 1),
            "fraction_of_widest": rounded(self.fraction(self.peak_widest)),
            "fraction_of_kernel": rounded(self.fraction(self.peak_kernel)),
            "variant": self.variant,
        }


def measure(
    loaded: LoadedModel, prompts: Sequence[list[int]], config: DecodeConfig
) -> PrefillRate | None:
    """The prefill rate of pld's runtime on a PROMPT_TOKENS prompt; None where the model's
    runtime is not pld's own (its work is not counted)."""
    ids = [token for prompt in prompts for token in prompt][:PROMPT_TOKENS]
    runtime, _ = ready(loaded, len(ids) + 1, config)
    if not isinstance(runtime, NativeRuntime):
        return None
    runtime.prefill(ids[:16])  # warm
    times = []
    for _ in range(REPEAT):
        start = time.perf_counter()
        runtime.prefill(ids)
        times.append(time.perf_counter() - start)
    runtime.prefill([])
    widest, kernel = peak(widest=True), peak(widest=False)
    work = prefill_macs(runtime, len(ids))
    return PrefillRate(len(ids), statistics.median(times), work, widest, kernel, library.variant())


def prefill_macs(runtime: NativeRuntime, tokens: int) -> float:
    """Multiply-accumulates of a prefill of `tokens`: every layer matrix once per token, and
    causal attention (scores and values: 2 head_dim per head and visible position)."""
    w = runtime.weights
    matrices = sum(
        rows * cols
        for layer in w.layers
        for rows, cols in (m.shape for m in (layer.qkv, layer.out, layer.gate_up, layer.down))
    )
    seen = tokens * (tokens + 1) / 2  # visible positions, summed over the prompt's rows
    attention = len(w.layers) * w.heads * 2 * w.head_dim * seen
    return matrices * tokens + attention


def peak(widest: bool) -> float | None:
    """MAC/s of csrc/peak.c's loop on every core, or None without the C library."""
    kernel = library.kernel("pld_peak")
    if kernel is None:
        return None
    kernel(1000, widest)
    rounds, seconds = 1_000_000, 0.0
    while seconds < PEAK_SECONDS:
        rounds *= 4
        start = time.perf_counter()
        macs = kernel(rounds, widest)
        seconds = time.perf_counter() - start
    return macs / seconds


def rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 3)
