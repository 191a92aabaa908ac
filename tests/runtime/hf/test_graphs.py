"""The padding and positions of a CUDA-graph replay, run on a CPU against a stand-in for the graph
that runs the same eager pass on the graph's buffers."""

import pytest
import torch
from conftest import tiny_llama

from pld_cli.runtime.graphs import SIZES
from pld_cli.runtime.hf import compat
from pld_cli.runtime.hf.graphs import CapturedPass, CudaGraphs, capture
from pld_cli.runtime.hf.static import StaticRuntime


class EagerGraph:
    """Stands in for torch.cuda.CUDAGraph: `replay` runs the captured pass eagerly, reading the
    ids, start and positions buffers and writing the logits buffer, as a replay does."""

    def __init__(self, runtime: StaticRuntime, captured: CapturedPass, broken: bool) -> None:
        self.runtime, self.captured, self.broken = runtime, captured, broken

    @torch.inference_mode()
    def replay(self) -> None:
        c = self.captured
        inputs = self.runtime.model_inputs(c.ids, c.start, c.positions)
        c.logits.copy_(self.runtime.model(**inputs, use_cache=True).logits[0])
        if self.broken:  # as a bad capture would: another greedy token in a row
            c.logits[0] = c.logits[0].roll(1)


def stand_in_record(broken_size=None):
    """cuda_graphs.capture_size for a CPU: the graph is an EagerGraph on the same buffers."""

    def record(runtime: StaticRuntime, size: int, pool) -> CapturedPass:
        captured = CapturedPass(
            None,
            torch.zeros((1, size), dtype=torch.long),
            torch.zeros((), dtype=torch.long),
            torch.zeros(size, dtype=torch.long),
            torch.zeros(size, runtime.model.config.vocab_size),
        )
        captured.graph = EagerGraph(runtime, captured, broken=size == broken_size)
        return captured

    return record


def stand_in_graphs(runtime: StaticRuntime, sizes=(1, 4, 8)) -> CudaGraphs:
    return CudaGraphs({size: stand_in_record()(runtime, size, None) for size in sizes}, runtime)


def test_capture_checks_every_graph_against_eager_passes():
    runtime = StaticRuntime(tiny_llama(0), 128)
    runtime.prefill([0])
    graphs = capture(runtime, record=stand_in_record())
    assert set(graphs.passes) == set(SIZES) and runtime.length == 1
    for size in SIZES:  # a graph that disagrees with eager is never kept
        with pytest.raises(RuntimeError, match="disagrees with the eager pass"):
            capture(runtime, record=stand_in_record(broken_size=size))


def test_a_padded_replay_equals_an_eager_pass_and_forgets_its_padding():
    model = tiny_llama(0)
    ids = torch.randint(3, 64, (40,), generator=torch.Generator().manual_seed(0)).tolist()
    replayed, eager = StaticRuntime(model, 128), StaticRuntime(model, 128)
    for runtime in (replayed, eager):
        runtime.prefill(ids[:20])
    replayed.graphs = stand_in_graphs(replayed)
    for chunk, keep in [(ids[20:23], 22), (ids[22:27], 26), (ids[26:27], 27)]:  # pads 3->4, 5->8
        logits = replayed.forward(chunk).clone()
        torch.testing.assert_close(logits, eager.forward(chunk), rtol=1e-4, atol=1e-5)
        size = min(s for s in replayed.graphs.passes if s >= len(chunk))
        positions = replayed.graphs.passes[size].positions.tolist()
        start = replayed.length - len(chunk)
        real = list(range(start, start + len(chunk)))
        assert positions == real + [real[-1]] * (size - len(chunk))  # padding repeats the last
        for layer in replayed.cache.layers:  # the padded writes were forgotten at once
            assert compat.write_position(layer) in (replayed.length, None)
        replayed.rollback(keep)
        eager.rollback(keep)
    torch.testing.assert_close(replayed.forward(ids[27:30]), eager.forward(ids[27:30]))
