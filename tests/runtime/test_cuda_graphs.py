"""The padding and positions of a CUDA-graph replay, run on a CPU against a stand-in for the graph
that runs the same eager pass on the graph's buffers."""

import torch
from conftest import tiny_llama

from pld_cli.runtime import compat
from pld_cli.runtime.cuda_graphs import CapturedPass, CudaGraphs
from pld_cli.runtime.static import StaticRuntime


class EagerGraph:
    """Stands in for torch.cuda.CUDAGraph: `replay` runs the captured pass eagerly, reading the
    ids, start and positions buffers and writing the logits buffer, as a replay does."""

    def __init__(self, runtime: StaticRuntime, captured: CapturedPass) -> None:
        self.runtime, self.captured = runtime, captured

    @torch.inference_mode()
    def replay(self) -> None:
        c = self.captured
        inputs = self.runtime.model_inputs(c.ids, c.start, c.positions)
        c.logits.copy_(self.runtime.model(**inputs, use_cache=True).logits[0])


def stand_in_graphs(runtime: StaticRuntime, sizes=(1, 4, 8)) -> CudaGraphs:
    passes = {}
    for size in sizes:
        captured = CapturedPass(
            None, torch.zeros((1, size), dtype=torch.long), torch.zeros((), dtype=torch.long),
            torch.zeros(size, dtype=torch.long), torch.zeros(size, runtime.model.config.vocab_size),
        )  # fmt: skip
        captured.graph = EagerGraph(runtime, captured)
        passes[size] = captured
    return CudaGraphs(passes, runtime)


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
