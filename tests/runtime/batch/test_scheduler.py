"""Documents decoded together: each document's tokens and cache bits equal its alone run's, its
prompt sliced among the others' rows; a slot freed by a finished or failed document is taken by
the next; closing the batch cancels the documents waiting."""

import threading

import pytest
import torch
from native_families import FAMILIES

from pld_cli.core.config import DecodeConfig
from pld_cli.core.decode import Pass, generate
from pld_cli.runtime.batch import scheduler
from pld_cli.runtime.batch.scheduler import Batch, Cancelled, Rows, assemble
from pld_cli.runtime.clib import library
from pld_cli.runtime.native.quantized.quantize import quantize_model
from pld_cli.runtime.native.runtime import NativeRuntime

needs_kernel = pytest.mark.skipif(
    library.kernel("decode_rows") is None, reason=f"no C kernel: {library.unavailable()}"
)
CONFIG = DecodeConfig(max_new_tokens=40, stop_loops=False)


@pytest.fixture(scope="module")
def model() -> torch.nn.Module:
    torch.manual_seed(0)
    model = FAMILIES["qwen3"]().eval()  # q/k norms and biases: every step of the C decoder
    quantize_model(model, "int8")
    return model


def prompt(length: int, seed: int) -> list[int]:
    """Random ids whose tail repeats an earlier span, so drafts are offered and verified."""
    ids = torch.randint(3, 96, (length,), generator=torch.Generator().manual_seed(seed)).tolist()
    return ids[: length - 12] + ids[4:16]


def decode(runtime, ids: list[int]) -> list[int]:
    events = generate(runtime, ids, frozenset(), CONFIG)
    return [token for event in events if isinstance(event, Pass) for token in event.emitted]


def cache_of(runtime: NativeRuntime, region: int, length: int) -> tuple[torch.Tensor, ...]:
    start = region * runtime.span
    slots = slice(start, start + length)
    return runtime.keys[:, :, slots].clone(), runtime.values[:, :, slots].clone()


@needs_kernel
def test_three_documents_together_are_each_bit_for_bit_as_alone(model, monkeypatch):
    monkeypatch.setattr(scheduler, "PREFILL_SLICE", 64)  # prompts in slices beside the others
    prompts = [prompt(30, 1), prompt(150, 2), prompt(400, 3)]
    alone = NativeRuntime(model, 512)
    expected = []
    for ids in prompts:
        tokens = decode(alone, ids)
        expected.append((tokens, cache_of(alone, 0, alone.length)))
    batch = Batch(NativeRuntime(model, 512, regions=3), 3)
    got = [None] * 3

    def run(i: int) -> None:
        with batch.slot() as slot:
            tokens = decode(slot, prompts[i])
            got[i] = tokens, cache_of(batch.runtime, slot.region, slot.length)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for (tokens, cache), (want_tokens, want_cache) in zip(got, expected, strict=True):
        assert tokens == want_tokens
        assert all(torch.equal(a, b) for a, b in zip(cache, want_cache, strict=True))


def test_a_pass_takes_forwards_whole_and_prompts_up_to_the_slice(monkeypatch):
    monkeypatch.setattr(scheduler, "PREFILL_SLICE", 10)
    waiting = {
        0: Rows(list(range(8)), 0, logits_wanted=False),
        1: Rows([1, 2, 3], 50, logits_wanted=True),
        2: Rows(list(range(30)), 0, logits_wanted=False),
        3: Rows(list(range(5)), 0, logits_wanted=False),
    }
    taken = [(region, n) for region, _, n in assemble(waiting)]
    assert taken == [(0, 8), (1, 3), (2, 2)]


class Recorded:
    """A runtime stand-in that records each pass's pieces (the batch's logic, no model)."""

    context_limit, span = 100, 100

    def __init__(self) -> None:
        self.passes: list[list] = []

    def run_pieces(self, pieces):
        self.passes.append([(p.region, len(p.ids)) for p in pieces])
        return [torch.zeros(p.keep, 4) for p in pieces]

    @property
    def name(self) -> str:
        return "recorded"


def test_a_finished_document_frees_its_slot_for_the_next():
    batch = Batch(Recorded(), 1)
    order = []

    def run(name: str) -> None:
        with batch.slot() as slot:
            order.append((name, slot.region))
            slot.prefill([1, 2, 3])
            slot.forward([4])

    threads = [threading.Thread(target=run, args=(name,)) for name in "ab"]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(order) == [("a", 0), ("b", 0)]
    assert batch.runtime.passes == [[(0, 3)], [(0, 1)]] * 2


def test_every_pass_runs_on_the_batchs_one_thread_and_documents_open_no_team():
    recorded, runners, teams = Recorded(), [], []
    run_pieces = recorded.run_pieces
    recorded.run_pieces = lambda pieces: (
        runners.append(threading.current_thread()) or run_pieces(pieces)
    )
    batch = Batch(recorded, 3)

    def run(n: int) -> None:
        with batch.slot() as slot:
            slot.prefill(list(range(n)))
            slot.forward([1, 2])
            if library.loaded() is not None:
                teams.append(max_threads())

    threads = [threading.Thread(target=run, args=(n,)) for n in (2, 5, 9)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(runners) >= 2 and {thread.name for thread in runners} == {"pld-passes"}
    assert len(set(runners)) == 1 and runners[0] not in threads
    assert teams in ([], [1, 1, 1])  # each document's OpenMP regions run on its thread alone
    runners[0].join(timeout=5)
    assert not runners[0].is_alive() and batch.passes is None  # no slot held: the thread ends


def max_threads() -> int:
    return library.kernel("omp_get_max_threads")()


def test_a_failed_document_does_not_hold_the_others():
    batch = Batch(Recorded(), 2)
    with pytest.raises(ValueError), batch.slot() as slot:
        raise ValueError("this document failed before its first pass")
    with batch.slot() as slot:
        slot.prefill([1, 2])  # alone again: runs at once
    assert batch.held == 0 and sorted(batch.free) == [0, 1]


def test_closing_the_batch_cancels_a_document_waiting_for_a_pass():
    batch = Batch(Recorded(), 2)
    errors = []
    entered = threading.Event()

    def waiting() -> None:
        with batch.slot() as slot:
            entered.set()
            try:
                slot.prefill([1, 2])  # waits: the other slot is held and has handed in nothing
            except Cancelled as exc:
                errors.append(exc)

    with batch.slot():
        thread = threading.Thread(target=waiting)
        thread.start()
        entered.wait()
        batch.close()
        thread.join(timeout=5)
    assert len(errors) == 1 and batch.runtime.passes == []
