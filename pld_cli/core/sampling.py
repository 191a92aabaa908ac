"""Sampling keyed by (seed, position): plain sampling's tokens, whatever the drafts.

Each output position i (the index of the generated token: 0 for the first) has its own uniform
number u_i = uniform(seed, i), from a counter-based generator (splitmix64 of the seed and i, on
Python's integers: the same on every machine). The token at i is the inverse CDF of the model's
distribution p_i (after temperature, top-k and top-p, over the vocabulary in id order, summed in
float64) at u_i. That is plain sampling: each token is distributed as p_i.

A draft is copied tokens, a point mass, so its speculative acceptance can draw those very tokens:
draft token d at position i is accepted exactly when the inverse-CDF draw at i is d; at the first
rejection the token emitted is that draw (the residual of a point-mass draft, sampled with the same
u_i, is the draw itself); after a fully accepted draft the bonus token is the draw at the next
position. Each position's draw depends only on its logits, its seed and its index, never on how
many positions a pass verified, so pld with drafts of any length, -j, and --no-pld emit the same
tokens for the same seed, as long as a position's logits are the same bits in any pass (pld's C
decoder computes each row from that row alone; tests/core/test_seeded.py).

Each row's probabilities are computed from that row alone ([1, vocab]), so the draw at a position
does not depend on the rows beside it in a pass either.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

from pld_cli.core.config import SamplingConfig
from pld_cli.core.runtime import Runtime

MASK = (1 << 64) - 1
GAMMA = 0x9E3779B97F4A7C15  # splitmix64's increment: 2^64 / the golden ratio, odd


def mix64(z: int) -> int:
    """splitmix64's output function (Stafford's Mix13): a bijection on 64-bit integers."""
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return z ^ (z >> 31)


def uniform(seed: int, position: int) -> float:
    """The uniform number in [0, 1) of output position `position` under `seed`: the position-th
    output of splitmix64 started from the mixed seed, 53 bits as a float64."""
    state = (mix64(seed & MASK) + (position + 1) * GAMMA) & MASK
    return (mix64(state) >> 11) * 2.0**-53


def fresh_seed() -> int:
    """A seed for a run that was given none: 31 bits, so a server that reads it as a signed or
    unsigned 32-bit number (llama.cpp takes 2^32 - 1 as 'random') keeps it as it is."""
    return secrets.randbits(31)


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


def inverse_cdf(probs: torch.Tensor, u: float) -> int:
    """The token whose cumulative mass (float64, ids in order) first exceeds u times the total:
    token t with probability probs[t] for u uniform in [0, 1); never one of mass 0."""
    cdf = probs.double().cumsum(0)  # [vocab]
    target = torch.tensor([u], dtype=torch.float64, device=cdf.device) * cdf[-1:]  # [1]
    token = int(torch.searchsorted(cdf, target, right=True))  # the host read-back
    if token >= cdf.shape[0]:  # u * total rounded up to the total: the last token of mass > 0
        token = int(torch.nonzero(probs > 0)[-1])
    return token


@dataclass
class Sampler:
    """The sampling settings, the seed, and the next output position to draw."""

    config: SamplingConfig
    seed: int = field(init=False)
    position: int = 0  # the index of the next generated token

    def __post_init__(self) -> None:
        self.seed = fresh_seed() if self.config.seed is None else self.config.seed

    def draw(self, logits: torch.Tensor) -> int:
        """The token at the next output position from its [vocab] logits (and advance)."""
        probs = probabilities(logits.reshape(1, -1), self.config)[0]  # [vocab]
        token = inverse_cdf(probs, uniform(self.seed, self.position))
        self.position += 1
        return token


def verify_sampled(
    runtime: Runtime, pending: int, draft: Sequence[int], sampler: Sampler
) -> tuple[int, list[int]]:
    """One pass; a draft token is kept while plain sampling's draw at its position is that
    token. Returns (accepted, emitted) and trims the cache."""
    logits = runtime.forward([pending, *draft])  # [1 + k, vocab]
    k, accepted = len(draft), 0
    token = sampler.draw(logits[0])  # row by row: the rows after a rejection are never drawn
    while accepted < k and token == draft[accepted]:
        accepted += 1
        token = sampler.draw(logits[accepted])
    runtime.rollback(runtime.length - (k - accepted))
    return accepted, [*draft[:accepted], token]
