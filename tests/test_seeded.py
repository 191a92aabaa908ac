"""Sampled with a seed, pld's tokens are plain sampling's (--no-pld), token for token: on every
runtime, with fixed and adaptive drafting, documents decoded together (-j) as alone, and on every
variant of the C library this CPU runs (core/sampling.py).

The model is a real decoder whose weights make it continue a cycle of tokens (token t is mostly
followed by t + 1), so drafts copied from a prompt that holds the cycle are often kept and often
rejected: every layer of the decoder still shapes each position's distribution."""

import dataclasses
import threading

import pytest
import torch
from native_families import FAMILIES

from pld_cli.core.config import DecodeConfig, SamplingConfig
from pld_cli.core.decode import Pass, generate
from pld_cli.runtime.batch.scheduler import Batch
from pld_cli.runtime.clib import library
from pld_cli.runtime.hf.dynamic import DynamicRuntime
from pld_cli.runtime.hf.static import StaticRuntime
from pld_cli.runtime.native.quantized.quantize import quantize_model
from pld_cli.runtime.native.runtime import NativeRuntime

needs_kernel = pytest.mark.skipif(
    library.kernel("decode_rows") is None, reason=f"no C kernel: {library.unavailable()}"
)
RUNTIMES = {
    "dynamic": DynamicRuntime,
    "static": lambda model: StaticRuntime(model, 512),
    "native": lambda model: NativeRuntime(model, 512),
}
CPU_COSTS = [0.0] + [1.0 + 0.1 * (q - 1) for q in range(1, 26)]  # t(11) = 2 t(1)
PROMPT = list(range(3, 96)) + list(range(3, 40))  # the cycle, then its start again
SEEDS = range(4)


def cycling_model(quantized: bool = False) -> torch.nn.Module:
    """Qwen3's tiny shape (q/k norms: every step of the C decoder) whose embeddings are
    orthonormal rows and whose output layer maps token t's row to t + 1."""
    torch.manual_seed(0)
    model = FAMILIES["qwen3"]().eval()
    vocab = model.config.vocab_size
    assert model.config.hidden_size == vocab  # one orthonormal row per token
    rows, _ = torch.linalg.qr(torch.randn(vocab, vocab, generator=torch.Generator().manual_seed(5)))
    with torch.no_grad():
        model.get_input_embeddings().weight.copy_(rows)
        model.get_output_embeddings().weight.copy_(0.5 * torch.roll(rows, 1, dims=0))
    if quantized:
        quantize_model(model, "int8")  # the C decoder's own products
    return model


@pytest.fixture(scope="module")
def model() -> torch.nn.Module:
    return cycling_model()


@pytest.fixture(scope="module")
def int8_model() -> torch.nn.Module:
    return cycling_model(quantized=True)


def sampled(seed: int, **changes) -> DecodeConfig:
    sampling = SamplingConfig(temperature=0.8, top_p=0.95, seed=seed)
    return DecodeConfig(max_new_tokens=64, sampling=sampling, stop_loops=False, **changes)


def decode(runtime, config: DecodeConfig, costs=None, prompt=PROMPT) -> tuple[list[int], int, int]:
    """(tokens, draft tokens verified, draft tokens kept)."""
    tokens, drafted, accepted = [], 0, 0
    for event in generate(runtime, prompt, frozenset(), config, costs):
        if isinstance(event, Pass):
            tokens += event.emitted
            drafted, accepted = drafted + len(event.drafted), accepted + event.accepted
    return tokens, drafted, accepted


def assert_drafts_kept_and_rejected(drafted: int, accepted: int) -> None:
    assert 0.05 * drafted < accepted < 0.95 * drafted, (drafted, accepted)


@pytest.fixture(scope="module")
def plain(model) -> dict[int, list[int]]:
    """Plain sampling's tokens (--no-pld, the dynamic runtime), by seed."""
    return {seed: decode(DynamicRuntime(model), sampled(seed, use_pld=False))[0] for seed in SEEDS}


@pytest.mark.parametrize("runtime", list(RUNTIMES))
@pytest.mark.parametrize("draft,costs", [("fixed", None), ("adaptive", CPU_COSTS)])
def test_pld_samples_plain_samplings_tokens_on_every_runtime(model, plain, runtime, draft, costs):
    drafted = accepted = 0
    for seed in SEEDS:
        tokens, d, a = decode(RUNTIMES[runtime](model), sampled(seed, draft=draft), costs)
        assert tokens == plain[seed], seed
        drafted, accepted = drafted + d, accepted + a
    assert_drafts_kept_and_rejected(drafted, accepted)
    assert len({tuple(tokens) for tokens in plain.values()}) == len(SEEDS)  # seeds differ


@needs_kernel
def test_documents_together_sample_each_ones_plain_tokens(int8_model):
    """Three documents in shared passes (-j 3), each its own seed and prompt length, drafting:
    each one's tokens are those it samples alone without drafting."""
    prompts = [PROMPT, PROMPT[20:], PROMPT + PROMPT[:50]]
    configs = [sampled(seed) for seed in (11, 12, 13)]
    alone = [
        decode(
            NativeRuntime(int8_model, 512), dataclasses.replace(config, use_pld=False), None, ids
        )
        for ids, config in zip(prompts, configs, strict=True)
    ]
    batch = Batch(NativeRuntime(int8_model, 512, regions=3), 3)
    got: list = [None] * 3

    def run(i: int) -> None:
        with batch.slot() as slot:
            got[i] = decode(slot, configs[i], CPU_COSTS, prompts[i])

    threads = [threading.Thread(target=run, args=(i,)) for i in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    batch.close()
    assert [tokens for tokens, _, _ in got] == [tokens for tokens, _, _ in alone]
    assert_drafts_kept_and_rejected(sum(d for _, d, _ in got), sum(a for _, _, a in got))


RUNNABLE = library.runnable()


@needs_kernel
@pytest.mark.skipif(len(RUNNABLE) < 2, reason=f"variants run here: {RUNNABLE}")
def test_every_kernel_variant_samples_the_same_tokens(int8_model, monkeypatch):
    runs = {}
    for variant in RUNNABLE:
        monkeypatch.setenv("PLD_KERNELS", variant.value)
        library._load.cache_clear()
        assert library.variant() is variant
        runs[variant] = [
            decode(NativeRuntime(int8_model, 512), sampled(seed, **changes), costs)
            for seed in (21, 22)
            for changes, costs in (
                ({"use_pld": False}, None),
                ({"draft": "fixed"}, None),
                ({}, CPU_COSTS),
            )
        ]
    library._load.cache_clear()
    first = [tokens for tokens, _, _ in runs[RUNNABLE[0]]]
    for variant, results in runs.items():
        tokens = [t for t, _, _ in results]
        assert tokens == first, variant
        assert tokens[0] == tokens[1] == tokens[2] and tokens[3] == tokens[4] == tokens[5]
    results = runs[RUNNABLE[0]]
    assert_drafts_kept_and_rejected(sum(d for _, d, _ in results), sum(a for _, _, a in results))
