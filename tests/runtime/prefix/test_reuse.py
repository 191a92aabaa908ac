"""A prefill from a kept prefix: every position's key and value bits, and the decoded tokens, are
those of a whole prefill on a fresh runtime (alone and in a batch's slots); a prefix is cut where
the prompts part; torch's float path never takes one."""

import threading

import pytest
import torch
from native_families import FAMILIES

from pld_cli.core.config import DecodeConfig
from pld_cli.core.decode import Pass, Prefill, generate
from pld_cli.runtime.batch import scheduler
from pld_cli.runtime.batch.scheduler import Batch
from pld_cli.runtime.clib import library
from pld_cli.runtime.native import runtime as native
from pld_cli.runtime.native.quantized.quantize import quantize_model
from pld_cli.runtime.native.runtime import NativeRuntime
from pld_cli.runtime.prefix.reuse import CachedPrefill, with_prefixes
from pld_cli.runtime.prefix.store import MIB, PrefixStore

needs_kernel = pytest.mark.skipif(
    library.kernel("decode_rows") is None, reason=f"no C kernel: {library.unavailable()}"
)
CONFIG = DecodeConfig(max_new_tokens=30, stop_loops=False)


@pytest.fixture(scope="module")
def model() -> torch.nn.Module:
    torch.manual_seed(0)
    model = FAMILIES["qwen3"]().eval()  # q/k norms and biases: every step of the C decoder
    quantize_model(model, "int8")
    return model


def ids_of(length: int, seed: int) -> list[int]:
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(3, 96, (length,), generator=generator).tolist()


def decode(runtime, ids: list[int]) -> tuple[list[int], int]:
    tokens, cached = [], None
    for event in generate(runtime, ids, frozenset(), CONFIG):
        if isinstance(event, Prefill):
            cached = event.cached
        elif isinstance(event, Pass):
            tokens.extend(event.emitted)
    return tokens, cached


def cache_of(runtime: NativeRuntime, region: int, length: int) -> tuple[torch.Tensor, ...]:
    return runtime.snapshot(length, region)


def same(a: tuple[torch.Tensor, ...], b: tuple[torch.Tensor, ...]) -> bool:
    return all(torch.equal(x, y) for x, y in zip(a, b, strict=True))


@needs_kernel
@pytest.mark.parametrize("split", [1, 63, 64, 65, 200])
def test_a_prefill_split_anywhere_writes_the_bits_of_a_whole_one(model, monkeypatch, split):
    monkeypatch.setattr(native, "PREFILL_SLICE", 64)
    ids = ids_of(300, 1)
    whole = NativeRuntime(model, 512)
    whole.prefill(ids)
    split_run = NativeRuntime(model, 512)
    split_run.prefill(ids[:split])
    keys, values = split_run.snapshot(split)
    fresh = NativeRuntime(model, 512)
    fresh.restore(keys, values, split)
    fresh.prefill(ids, start=split)
    assert same(cache_of(fresh, 0, 300), cache_of(whole, 0, 300))


@needs_kernel
def test_a_second_prompt_on_the_same_document_decodes_as_on_a_fresh_runtime(model):
    document = ids_of(250, 2)
    first, second = document + [1] + ids_of(12, 3), document + [2] + ids_of(9, 4)
    store = PrefixStore(64 * MIB)
    runtime = NativeRuntime(model, 512)
    assert decode(CachedPrefill(runtime, store), first)[1] == 0
    other = NativeRuntime(model, 512)  # its cache empty: every kept position is copied in
    tokens, cached = decode(CachedPrefill(other, store), second)
    assert cached == 250  # the document, not the instruction
    fresh = NativeRuntime(model, 512)
    assert (tokens, 0) == decode(fresh, second)
    assert same(cache_of(other, 0, fresh.length), cache_of(fresh, 0, fresh.length))
    again, cached = decode(CachedPrefill(runtime, store), second)
    assert again == tokens and cached == len(second) - 1  # the whole prompt, kept


@needs_kernel
def test_slots_sharing_a_store_decode_as_alone(model, monkeypatch):
    monkeypatch.setattr(scheduler, "PREFILL_SLICE", 64)
    document = ids_of(200, 5)
    prompts = [document + [i] + ids_of(10, 10 + i) for i in range(4)]
    alone = [decode(NativeRuntime(model, 512), ids)[0] for ids in prompts]
    store = PrefixStore(64 * MIB)
    batch = Batch(NativeRuntime(model, 512, regions=3), 3)
    got: list = [None] * 8

    def run(i: int) -> None:
        with batch.slot() as slot:
            got[i] = decode(with_prefixes(slot, store), prompts[i % 4])

    for wave in (range(4), range(4, 8)):  # the second wave finds the first's prompts kept
        threads = [threading.Thread(target=run, args=(i,)) for i in wave]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert [tokens for tokens, _ in got] == alone + alone
    assert all(cached == len(prompts[0]) - 1 for _, cached in got[4:])


def test_torch_float_path_prefills_whole():
    torch.manual_seed(0)
    float_model = FAMILIES["smollm2"]().eval()
    runtime = NativeRuntime(float_model, 128)
    assert runtime.decoder is None
    assert with_prefixes(runtime, PrefixStore(MIB)) is runtime
    with pytest.raises(ValueError):
        runtime.prefill([1, 2, 3], start=2)
