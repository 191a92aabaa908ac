"""Sampling that keeps the model's distribution: speculative acceptance of a copied draft.

The draft puts all its probability on one token, so with p the model's distribution at a position
(after temperature, top-k and top-p), draft token d is accepted with probability p(d); at the first
rejection the emitted token is drawn from p with d removed and renormalised; after a fully accepted
draft the bonus token is drawn from p at the next position. Each emitted token is then distributed
exactly as in plain sampling, so only the number of passes changes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

from pld_cli.core.config import SamplingConfig
from pld_cli.core.runtime import Runtime


def probabilities(logits: torch.Tensor, config: SamplingConfig) -> torch.Tensor:
    """[q, vocab] logits -> [q, vocab] float32 probabilities after temperature, top-k, top-p."""
    scores = logits.float() / config.temperature
    if 0 < config.top_k < scores.shape[-1]:
        kth = torch.topk(scores, config.top_k, dim=-1).values[..., -1:]  # [q, 1]
        scores = scores.masked_fill(scores < kth, float("-inf"))
    probs = torch.softmax(scores, dim=-1)
    if config.top_p < 1.0:
        sorted_probs, order = torch.sort(probs, dim=-1, descending=True)
        # Keep the smallest prefix whose mass reaches top_p: drop a token once the mass before it
        # already does (the most likely token is always kept).
        drop_sorted = sorted_probs.cumsum(dim=-1) - sorted_probs >= config.top_p
        drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
        probs = probs.masked_fill(drop, 0.0)
        probs = probs / probs.sum(dim=-1, keepdim=True)
    return probs


@dataclass
class Sampler:
    """The sampling settings plus the random stream, created on the device of the first logits."""

    config: SamplingConfig
    generator: torch.Generator | None = field(default=None, repr=False)

    def stream(self, device: torch.device) -> torch.Generator:
        if self.generator is None:
            self.generator = torch.Generator(device=device)
            if self.config.seed is None:
                self.generator.seed()
            else:
                self.generator.manual_seed(self.config.seed)
        return self.generator


def verify_sampled(
    runtime: Runtime, pending: int, draft: Sequence[int], sampler: Sampler
) -> tuple[int, list[int]]:
    """One pass with speculative acceptance; returns (accepted, emitted) and trims the cache."""
    logits = runtime.forward([pending, *draft])  # [1 + k, vocab]
    probs = probabilities(logits, sampler.config)  # [1 + k, vocab]
    generator = sampler.stream(probs.device)
    k = len(draft)
    drafted = torch.tensor(list(draft), device=probs.device, dtype=torch.long)  # [k]
    uniform = torch.rand(k, generator=generator, device=probs.device)  # [k]
    held = uniform < probs[torch.arange(k, device=probs.device), drafted]  # [k]
    accepted = int(held.long().cumprod(0).sum()) if k else 0  # host read-back 1 of 2
    final = probs[accepted].clone()  # [vocab]
    if accepted < k:
        final[drafted[accepted]] = 0.0  # the rejected token: sample from the rest
        if final.sum() <= 0:  # p(d) was 1 up to rounding: nothing else to draw
            final = probs[accepted]
    token = int(torch.multinomial(final, 1, generator=generator))  # read-back 2 of 2
    runtime.rollback(runtime.length - (k - accepted))
    return accepted, [*draft[:accepted], token]
