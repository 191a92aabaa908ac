"""CUDA-graph replay of verify passes on the static runtime, so a pass costs kernels, not launches.

A transformers forward launches hundreds of small kernels; on a GPU the launches, not the weights,
decide the pass time. Each pass length in `sizes` is captured once as a graph over fixed buffers
(token ids, first position) and the cache's fixed tensors; a pass of q positions replays the
smallest graph of at least q (../graphs.py), its padded positions written past the real ones and
then forgotten (their position ids repeat the last real one, so they never reach past the model's
limit). Per pass the host copies the padded ids and positions in; the caller reads back what it
needs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from pld_cli.runtime.graphs import SIZES, Graphs, capture_all, check_agrees, probe_lengths
from pld_cli.runtime.hf.static import StaticRuntime


@dataclass
class CapturedPass:
    graph: torch.cuda.CUDAGraph
    ids: torch.Tensor  # [1, size] device buffer the graph reads
    start: torch.Tensor  # [] device buffer: cache slot of ids[0]
    positions: torch.Tensor  # [size] device buffer: position ids
    logits: torch.Tensor  # [size, vocab] the graph's output


class CudaGraphs(Graphs[CapturedPass]):
    def __init__(self, passes: dict[int, CapturedPass], runtime: StaticRuntime) -> None:
        super().__init__(passes)
        self.runtime = runtime

    def replay(self, ids: Sequence[int], start: int) -> torch.Tensor:
        """Logits [len(ids), vocab]: a view of the graph's output, valid until the next replay."""
        q = len(ids)
        size = self.size_for(q)
        captured = self.passes[size]
        padding = size - q
        # Blocking copies of a few int64s: cheaper than reasoning about a reused staging buffer.
        captured.ids.copy_(torch.tensor([[*ids, *[ids[-1]] * padding]]))
        captured.positions.copy_(
            torch.tensor([*range(start, start + q), *[start + q - 1] * padding])
        )
        captured.start.fill_(start)
        captured.graph.replay()
        # The graph wrote `size` positions; the padded ones are forgotten at once.
        self.runtime.move_write_position(-padding)
        return captured.logits[:q]


def capture(
    runtime: StaticRuntime, sizes: Sequence[int] = SIZES, record: Callable | None = None
) -> CudaGraphs:
    """Capture one graph per pass size (../graphs.py), each checked against eager passes on the same
    input; raises RuntimeError when a capture fails or disagrees. `record` (default
    `capture_size`) records one graph."""
    if runtime.length == 0:
        raise RuntimeError("capture needs an initialized cache: prefill first")
    graphs = CudaGraphs(capture_all(runtime, sizes, record or capture_size), runtime)
    captured_at = runtime.length
    runtime.forward([0, 0, 0])  # eager (no graphs attached yet): check at another start
    for q in probe_lengths(sizes):
        check_against_eager(runtime, graphs, q)
    runtime.rollback(captured_at)
    return graphs


@torch.inference_mode()
def capture_size(runtime: StaticRuntime, size: int, pool) -> CapturedPass:
    device = runtime.device
    ids = torch.zeros((1, size), dtype=torch.long, device=device)
    start = torch.full((), runtime.length, dtype=torch.long, device=device)
    positions = torch.arange(size, device=device) + runtime.length
    side = torch.cuda.Stream(device)
    side.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(side):  # warm-up passes run for real: undo their cache writes
        for _ in range(2):
            runtime.model(**runtime.model_inputs(ids, start, positions), use_cache=True)
            runtime.move_write_position(-size)
    torch.cuda.current_stream(device).wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, pool=pool):  # recorded, not run: the cache is unchanged
        # The graph reads ids, positions and the first cache slot from these buffers, which
        # replay() refills before each replay.
        inputs = runtime.model_inputs(ids, start, positions)
        logits = runtime.model(**inputs, use_cache=True).logits[0]  # [size, vocab]
    return CapturedPass(graph, ids, start, positions, logits)


@torch.inference_mode()
def check_against_eager(runtime: StaticRuntime, graphs: CudaGraphs, q: int) -> None:
    """A replay of q positions (padded up to its graph) against an eager pass on the same input."""
    start = runtime.length
    probe = torch.arange(1, q + 1).tolist()
    replayed = graphs.replay(probe, start).clone()  # [q, vocab]
    runtime.move_write_position(-q)
    x = torch.tensor([probe], device=runtime.device)
    eager = runtime.model(**runtime.model_inputs(x, start), use_cache=True).logits[0]
    runtime.move_write_position(-q)
    check_agrees(replayed, eager, q)
