"""CUDA-graph replay of verify passes on the static runtime, so a pass costs kernels, not launches.

A transformers forward launches hundreds of small kernels; on a GPU the launches, not the weights,
decide the pass time. Each pass length in `sizes` is captured once as a graph over fixed buffers
(token ids, first position) and the cache's fixed tensors; a pass of q positions replays the
smallest graph of at least q, its padded positions written past the real ones and then forgotten
(their position ids repeat the last real one, so they never reach past the model's limit). Per pass
the host copies the padded ids and positions in; the caller reads back what it needs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from pld_cli.runtime.static import StaticRuntime

SIZES = (1, 2, 4, 8, 16, 32)


@dataclass
class CapturedPass:
    graph: torch.cuda.CUDAGraph
    ids: torch.Tensor  # [1, size] device buffer the graph reads
    start: torch.Tensor  # [] device buffer: cache slot of ids[0]
    positions: torch.Tensor  # [size] device buffer: position ids
    logits: torch.Tensor  # [size, vocab] the graph's output


class CudaGraphs:
    def __init__(self, passes: dict[int, CapturedPass], runtime: StaticRuntime) -> None:
        self.passes = passes
        self.runtime = runtime

    def fits(self, q: int) -> bool:
        return q <= max(self.passes)

    def replay(self, ids: Sequence[int], start: int) -> torch.Tensor:
        """Logits [len(ids), vocab]: a view of the graph's output, valid until the next replay."""
        q = len(ids)
        size = min(s for s in self.passes if s >= q)
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


def capture(runtime: StaticRuntime, sizes: Sequence[int] = SIZES) -> CudaGraphs:
    """Capture one graph per pass size (largest first, one memory pool), each checked against an
    eager pass on the same input; raises RuntimeError when a capture fails or disagrees."""
    if runtime.length == 0:
        raise RuntimeError("capture needs an initialized cache: prefill first")
    pool = torch.cuda.graph_pool_handle()
    passes = {size: capture_size(runtime, size, pool) for size in sorted(sizes, reverse=True)}
    graphs = CudaGraphs(passes, runtime)
    captured_at = runtime.length
    runtime.forward([0, 0, 0])  # eager (no graphs attached yet): check at another start
    for size in sizes:
        check_against_eager(runtime, graphs, max(size - 1, 1))  # padded where it can be
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
    replayed = graphs.replay(probe, start).float().clone()  # [q, vocab]
    runtime.move_write_position(-q)
    x = torch.tensor([probe], device=runtime.device)
    eager = runtime.model(**runtime.model_inputs(x, start), use_cache=True).logits[0].float()
    runtime.move_write_position(-q)
    scale = eager.abs().max().item()
    close = torch.allclose(replayed, eager, rtol=0.02, atol=0.02 * scale)
    if not close or not torch.equal(replayed.argmax(-1), eager.argmax(-1)):
        raise RuntimeError(f"graph replay of {q} positions disagrees with the eager pass")
