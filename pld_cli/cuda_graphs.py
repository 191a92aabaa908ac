"""CUDA-graph replay of verify passes on the static runtime, so a pass costs kernels, not launches.

A transformers forward launches hundreds of small kernels; on a GPU the launches, not the weights,
decide the pass time. Each pass length in `sizes` is captured once as a graph over fixed buffers
(token ids, first position) and the cache's fixed tensors; a pass of q positions replays the
smallest graph of at least q, its padded positions written past the real ones and then forgotten.
Per pass the host copies q token ids in and nothing else; the caller reads back what it needs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from .static_runtime import StaticRuntime

SIZES = (1, 2, 4, 8, 16, 32)


@dataclass
class CapturedPass:
    graph: torch.cuda.CUDAGraph
    ids: torch.Tensor  # [1, size] device buffer the graph reads
    start: torch.Tensor  # [] device buffer: position of ids[0]
    host_ids: torch.Tensor  # [1, size] pinned staging buffer
    logits: torch.Tensor  # [size, vocab] the graph's output


class CudaGraphs:
    def __init__(self, passes: dict[int, CapturedPass], runtime: StaticRuntime) -> None:
        self.passes = passes
        self.runtime = runtime

    def fits(self, q: int) -> bool:
        return q <= max(self.passes)

    def replay(self, ids: Sequence[int], start: int) -> torch.Tensor:
        """Logits [len(ids), vocab]: a view of the graph's output, valid until the next replay."""
        size = min(s for s in self.passes if s >= len(ids))
        captured = self.passes[size]
        padded = [*ids, *[ids[-1]] * (size - len(ids))]
        captured.host_ids[0] = torch.tensor(padded)
        captured.ids.copy_(captured.host_ids, non_blocking=True)
        captured.start.fill_(start)
        captured.graph.replay()
        # The graph wrote `size` positions; the padded ones are forgotten at once.
        self.runtime.move_write_position(len(ids) - size)
        return captured.logits[: len(ids)]


def capture(runtime: StaticRuntime, sizes: Sequence[int] = SIZES) -> CudaGraphs:
    """Capture one graph per pass size (largest first, one memory pool), each checked against an
    eager pass on the same input; raises RuntimeError when a capture fails or disagrees."""
    if runtime.length == 0:
        raise RuntimeError("capture needs an initialized cache: prefill first")
    pool = torch.cuda.graph_pool_handle()
    passes = {size: capture_size(runtime, size, pool) for size in sorted(sizes, reverse=True)}
    graphs = CudaGraphs(passes, runtime)
    for size in sizes:
        check_against_eager(runtime, graphs, size)
    return graphs


@torch.inference_mode()
def capture_size(runtime: StaticRuntime, size: int, pool) -> CapturedPass:
    device = runtime.device
    ids = torch.zeros((1, size), dtype=torch.long, device=device)
    start = torch.full((), runtime.length, dtype=torch.long, device=device)
    side = torch.cuda.Stream(device)
    side.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(side):  # warm-up passes run for real: undo their cache writes
        for _ in range(2):
            runtime.model(**runtime.model_inputs(ids, start), use_cache=True)
            runtime.move_write_position(-size)
    torch.cuda.current_stream(device).wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, pool=pool):  # recorded, not run: the cache is unchanged
        # Positions are computed inside the graph, from the `start` buffer.
        logits = runtime.model(**runtime.model_inputs(ids, start), use_cache=True).logits[0]
    host_ids = torch.zeros((1, size), dtype=torch.long, pin_memory=True)
    return CapturedPass(graph, ids, start, host_ids, logits)


@torch.inference_mode()
def check_against_eager(runtime: StaticRuntime, graphs: CudaGraphs, size: int) -> None:
    start = runtime.length
    probe = torch.arange(size).tolist()
    replayed = graphs.replay(probe, start).float().clone()
    runtime.move_write_position(-size)
    x = torch.tensor([probe], device=runtime.device)
    eager = runtime.model(**runtime.model_inputs(x, start), use_cache=True).logits[0].float()
    runtime.move_write_position(-size)
    scale = eager.abs().max().item()
    if not torch.allclose(replayed, eager, rtol=0.02, atol=0.02 * scale):
        raise RuntimeError(f"graph replay of {size} positions disagrees with the eager pass")
