"""Sampling with speculative acceptance keeps the model's distribution (and stays reproducible)."""

import dataclasses
import math
import random
from collections import Counter
from collections.abc import Sequence

import pytest
import torch
from conftest import tiny_llama

from pld_cli.core.config import DecodeConfig, SamplingConfig
from pld_cli.core.decode import Pass, generate
from pld_cli.core.sampling import Sampler, inverse_cdf, probabilities, uniform, verify_sampled
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


def test_each_position_has_splitmix64s_number_of_the_seed():
    # splitmix64 from state 0 (the mixed seed 0) outputs 0xE220A8397B1DCDAF, 0x6E789E6AA1B965F4.
    assert uniform(0, 0) == (0xE220A8397B1DCDAF >> 11) * 2.0**-53
    assert uniform(0, 1) == (0x6E789E6AA1B965F4 >> 11) * 2.0**-53
    numbers = [uniform(seed, position) for seed in range(20) for position in range(50)]
    assert all(0 <= u < 1 for u in numbers) and len(set(numbers)) == len(numbers)
    assert abs(sum(numbers) / len(numbers) - 0.5) < 0.03  # 1000 numbers: sd 0.009


def test_inverse_cdf_takes_the_first_token_whose_mass_passes_u():
    probs = torch.tensor([0.25, 0.0, 0.5, 0.25])
    draws = {u: inverse_cdf(probs, u) for u in (0.0, 0.2499, 0.25, 0.7499, 0.75, 1 - 2**-53)}
    assert draws == {0.0: 0, 0.2499: 0, 0.25: 2, 0.7499: 2, 0.75: 3, 1 - 2**-53: 3}
    assert inverse_cdf(torch.tensor([0.0, 1.0, 0.0]), 1 - 2**-53) == 1  # never a token of mass 0


class Bigrams:
    """A runtime whose logits at a position depend on the token there only: token t is followed
    by t + 1 (mod vocab) with probability about 0.85 at temperature 1, so a draft copied from a
    cycle is often kept and often not. Logits are the same bits in a pass of any size."""

    context_limit, refusal, paths = 1000, None, ()
    name = "bigrams"

    def __init__(self, vocab: int = 16, seed: int = 0) -> None:
        generator = torch.Generator().manual_seed(seed)
        self.table = torch.randn(vocab, vocab, generator=generator)  # [vocab, vocab]
        self.table[torch.arange(vocab), (torch.arange(vocab) + 1) % vocab] += 5.0  # about 0.85
        self.length = 0

    def prefill(self, ids) -> None:
        self.length = len(ids)

    def forward(self, ids):
        self.length += len(ids)
        return self.table[torch.tensor(list(ids))]  # [q, vocab]

    def rollback(self, length: int) -> None:
        self.length = min(self.length, length)

    def choose(self, choice) -> None:
        pass

    def notes(self) -> list[str]:
        return []


class NoisyCosts(Sequence):
    """Pass costs that change on every read, as measured ones on a busy machine: adaptive
    drafting then verifies drafts of lengths that vary from run to run."""

    def __init__(self, seed: int, size: int = 26) -> None:
        self.random, self.size = random.Random(seed), size

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, q):
        return 1.0 + q * self.random.uniform(0.0, 0.3)


BIGRAM_PROMPT = list(range(16)) * 2 + [0, 1, 2]
SAMPLED = [
    SamplingConfig(1.0),
    SamplingConfig(0.8, top_p=0.9),
    SamplingConfig(1.3, top_k=5),
]


def bigram_tokens(config: DecodeConfig, costs=None) -> tuple[list[int], int, int]:
    tokens, drafted, accepted = [], 0, 0
    for event in generate(Bigrams(), BIGRAM_PROMPT, {15}, config, costs):
        if isinstance(event, Pass):
            tokens.extend(event.emitted)
            drafted, accepted = drafted + len(event.drafted), accepted + event.accepted
    return tokens, drafted, accepted


@pytest.mark.parametrize("settings", SAMPLED, ids=["t1", "top-p", "top-k"])
@pytest.mark.parametrize("penalty", [1.0, 1.3], ids=["", "penalty"])
def test_pld_samples_plain_samplings_tokens_whatever_the_drafts(settings, penalty):
    drafted = accepted = 0
    for seed in range(12):
        sampling = dataclasses.replace(settings, seed=seed)
        base = DecodeConfig(max_new_tokens=60, sampling=sampling, repetition_penalty=penalty)
        plain, _, _ = bigram_tokens(dataclasses.replace(base, use_pld=False))
        runs = [
            bigram_tokens(dataclasses.replace(base, draft="fixed")),
            bigram_tokens(dataclasses.replace(base, draft="fixed", num_draft=3)),
            bigram_tokens(base),  # adaptive, every pass size taken to cost the same
            bigram_tokens(base, NoisyCosts(seed)),  # adaptive, lengths from noisy "timings"
        ]
        for tokens, d, a in runs:
            assert tokens == plain, seed
            drafted, accepted = drafted + d, accepted + a
        lengths = {len(tokens) for tokens, _, _ in runs}
        assert lengths == {len(plain)}
    print(f"accepted {accepted} of {drafted} draft tokens")
    assert 0.1 * drafted < accepted < 0.9 * drafted  # drafts both kept and rejected, often


def test_a_seed_draws_the_same_tokens_with_drafts_and_without_but_seeds_differ():
    config = DecodeConfig(max_new_tokens=40, sampling=SamplingConfig(1.0, seed=5))
    text = bigram_tokens(config)[0]
    assert text == bigram_tokens(config)[0]
    others = {tuple(bigram_tokens(dataclasses.replace(config, sampling=s))[0]) for s in SAMPLED}
    assert len(others | {tuple(text)}) > 1


def test_without_a_seed_each_run_draws_its_own():
    config = DecodeConfig(max_new_tokens=40, sampling=SamplingConfig(1.0))
    assert len({tuple(bigram_tokens(config)[0]) for _ in range(4)}) > 1
