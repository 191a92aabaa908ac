"""Sampling with speculative acceptance keeps the model's distribution (and stays reproducible)."""

import math
from collections import Counter

import pytest
import torch
from conftest import tiny_llama

from pld_cli.core.config import DecodeConfig, SamplingConfig
from pld_cli.core.decode import Pass, generate
from pld_cli.core.sampling import Sampler, probabilities, verify_sampled
from pld_cli.runtime.hf.dynamic import DynamicRuntime

VOCAB = 8
# The peaked model's own greedy continuation of 3 4 5 6 (which is 6 4 2), then 3 4 5 6 again: the
# lookup drafts 6 4 2 ..., which sampling accepts about a quarter of the time.
PROMPT = [3, 4, 5, 6, 6, 4, 2, 3, 4, 5, 6]
SETTINGS = SamplingConfig(temperature=1.0, top_k=6, top_p=0.95)


def peaked_model():
    """A tiny Llama whose output distribution is far from uniform, so acceptance varies."""
    model = tiny_llama(5, vocab_size=VOCAB)
    with torch.no_grad():
        model.lm_head.weight.mul_(12.0)
    return model


def first_tokens(model, config: DecodeConfig, n: int = 3) -> tuple[list[int], int, int]:
    tokens, drafted, accepted = [], 0, 0
    for event in generate(DynamicRuntime(model), PROMPT, set(), config):
        if isinstance(event, Pass):
            tokens.extend(event.emitted)
            drafted += len(event.drafted)
            accepted += event.accepted
    return tokens[:n], drafted, accepted


def exact_distribution(model, settings: SamplingConfig) -> dict[tuple[int, ...], float]:
    """P(t1, t2, t3) by enumeration, each step from a full forward pass."""
    dist = {(): 1.0}
    for _ in range(3):
        grown = {}
        for prefix, mass in dist.items():
            with torch.no_grad():
                logits = model(torch.tensor([PROMPT + list(prefix)])).logits[0, -1:]
            probs = probabilities(logits, settings)[0]
            for token in range(VOCAB):
                if probs[token] > 0:
                    grown[prefix + (token,)] = mass * float(probs[token])
        dist = grown
    return dist


def chi_square(counts: Counter, dist: dict, draws: int) -> tuple[float, int]:
    """Pearson's statistic, cells with expected count below 5 pooled; (statistic, dof)."""
    statistic, pooled_obs, pooled_exp, cells = 0.0, 0, 0.0, 0
    for cell, p in dist.items():
        expected = draws * p
        if expected < 5:
            pooled_obs, pooled_exp = pooled_obs + counts[cell], pooled_exp + expected
            continue
        statistic += (counts[cell] - expected) ** 2 / expected
        cells += 1
    unexpected = draws - sum(counts[cell] for cell in dist)  # draws outside the support
    pooled_obs += unexpected
    if pooled_exp > 0:
        statistic += (pooled_obs - pooled_exp) ** 2 / pooled_exp
        cells += 1
    elif unexpected:
        statistic = math.inf
    return statistic, cells - 1


def chi_square_threshold(dof: int, z: float = 4.753) -> float:
    """Wilson-Hilferty quantile of chi-square at 1 - 1e-6 (z = 4.753): false alarms negligible."""
    return dof * (1 - 2 / (9 * dof) + z * math.sqrt(2 / (9 * dof))) ** 3


DRAWS = 2000


@pytest.fixture(scope="module")
def samples():
    model = peaked_model()
    out = {}
    for use_pld in (False, True):
        counts, drafted, accepted = Counter(), 0, 0
        for seed in range(DRAWS):
            sampling = SamplingConfig(SETTINGS.temperature, SETTINGS.top_p, SETTINGS.top_k, seed)
            config = DecodeConfig(max_new_tokens=3, use_pld=use_pld, sampling=sampling)
            tokens, d, a = first_tokens(model, config)
            counts[tuple(tokens)] += 1
            drafted, accepted = drafted + d, accepted + a
        out[use_pld] = (counts, drafted, accepted)
    return model, out


@pytest.mark.parametrize("use_pld", [False, True], ids=["plain", "pld"])
def test_first_three_tokens_follow_the_model_distribution(samples, use_pld):
    model, out = samples
    counts, drafted, accepted = out[use_pld]
    statistic, dof = chi_square(counts, exact_distribution(model, SETTINGS), DRAWS)
    print(
        f"{'pld' if use_pld else 'plain'}: chi2={statistic:.1f} dof={dof} "
        f"threshold={chi_square_threshold(dof):.1f} draws={DRAWS} drafted={drafted} "
        f"accepted={accepted}"
    )
    assert statistic < chi_square_threshold(dof)
    if use_pld:  # drafts were verified, and both accepted and rejected
        assert 0 < accepted < drafted


def test_temperature_zero_is_greedy():
    model = tiny_llama(3, vocab_size=64)
    prompt = PROMPT * 3
    greedy = DecodeConfig(max_new_tokens=30)
    zero = DecodeConfig(max_new_tokens=30, sampling=SamplingConfig(temperature=0.0, seed=1))

    def run(config):
        events = generate(DynamicRuntime(model), prompt, set(), config)
        return [t for e in events if isinstance(e, Pass) for t in e.emitted]

    assert run(zero) == run(greedy) == run(DecodeConfig(max_new_tokens=30, use_pld=False))


def test_same_seed_same_text():
    model = peaked_model()
    config = DecodeConfig(max_new_tokens=20, sampling=SamplingConfig(0.9, 0.95, 0, seed=7))
    assert first_tokens(model, config, 20)[0] == first_tokens(model, config, 20)[0]


def test_top_p_so_small_that_one_token_remains():
    probs = probabilities(torch.tensor([[1.0, 3.0, 2.0]]), SamplingConfig(1.0, top_p=1e-6))
    assert probs.tolist() == [[0.0, 1.0, 0.0]]


def test_tiny_temperature_is_nearly_greedy():
    probs = probabilities(torch.tensor([[1.0, 1.001, 0.5]]), SamplingConfig(temperature=1e-5))
    assert probs.argmax().item() == 1 and probs[0, 1] > 0.999
    assert torch.isfinite(probs).all()


class FixedLogits:
    """A runtime whose every position has the same logits; counts cached positions."""

    context_limit = 100

    def __init__(self, logits: list[float]) -> None:
        self.logits = torch.tensor(logits)
        self.length = 0

    def forward(self, ids):
        self.length += len(ids)
        return self.logits.repeat(len(ids), 1)

    def rollback(self, length: int) -> None:
        self.length = length


def test_draft_token_with_zero_probability_after_top_k_is_rejected():
    runtime = FixedLogits([5.0, 4.0, 0.0, -1.0])  # top_k=2 keeps tokens 0 and 1 only
    sampler = Sampler(SamplingConfig(temperature=1.0, top_k=2, seed=0))
    for _ in range(50):
        runtime.length = 0
        accepted, emitted = verify_sampled(runtime, 0, [3, 3], sampler)
        assert accepted == 0 and emitted[0] in (0, 1)
        assert runtime.length == 1  # both draft positions rolled back


def test_certain_draft_tokens_are_all_accepted_plus_a_bonus():
    runtime = FixedLogits([0.0, 9.0, 0.0])
    sampler = Sampler(SamplingConfig(temperature=1.0, top_p=0.5, seed=0))
    assert verify_sampled(runtime, 0, [1, 1, 1], sampler) == (3, [1, 1, 1, 1])
