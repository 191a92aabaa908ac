"""CUDA-graph replay of native passes: one graph per padded pass length, no host sync but the read.

A pass of q positions replays the graph of the smallest captured size s >= q. Its inputs are three
device buffers of s entries each, copied in with one host-to-device copy: the token ids (padded
with the last one), the cache slots start..start+s-1 and the position ids (padded by repeating the
last real one, so they never pass the rope tables). The padded positions are written to cache
slots past the real ones; the runtime's length moves by q only, so they are never read (every
row's mask ends at its own slot) and the next pass overwrites them. `NativeRuntime.run_fixed` has
the fixed shapes a capture needs: attention spans the whole cache under a mask built on the device.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from pld_cli.runtime.native import NativeRuntime

SIZES = (1, 2, 4, 8, 16, 32)


def padded_inputs(ids: Sequence[int], start: int, size: int) -> torch.Tensor:
    """[3, size] int64 on the host: ids, cache slots and position ids of a pass padded to size."""
    q, padding = len(ids), size - len(ids)
    return torch.tensor(
        [
            [*ids, *[ids[-1]] * padding],
            list(range(start, start + size)),
            [*range(start, start + q), *[start + q - 1] * padding],
        ]
    )


@dataclass
class CapturedPass:
    graph: torch.cuda.CUDAGraph
    inputs: torch.Tensor  # [3, size] device buffer: ids, slots, positions
    logits: torch.Tensor  # [size, vocab] the graph's output


class NativeGraphs:
    def __init__(self, passes: dict[int, CapturedPass]) -> None:
        self.passes = passes

    def fits(self, q: int) -> bool:
        return q <= max(self.passes)

    @torch.inference_mode()  # the buffers were made in inference mode
    def replay(self, ids: Sequence[int], start: int) -> torch.Tensor:
        """Logits [len(ids), vocab]: a view of the graph's output, valid until the next replay."""
        size = min(s for s in self.passes if s >= len(ids))
        captured = self.passes[size]
        captured.inputs.copy_(padded_inputs(ids, start, size))
        captured.graph.replay()
        return captured.logits[: len(ids)]


def capture(runtime: NativeRuntime, sizes: Sequence[int] = SIZES) -> NativeGraphs:
    """One graph per size (largest first, one memory pool), each checked against an eager pass;
    raises RuntimeError when a replay disagrees. Leaves the runtime's cache contents undefined
    past its length (as any pass does)."""
    pool = torch.cuda.graph_pool_handle()
    passes = {size: capture_size(runtime, size, pool) for size in sorted(sizes, reverse=True)}
    graphs = NativeGraphs(passes)
    for size in sizes:
        check_against_eager(runtime, graphs, max(size - 1, 1))  # padded where it can be
    return graphs


@torch.inference_mode()
def capture_size(runtime: NativeRuntime, size: int, pool) -> CapturedPass:
    device = runtime.device
    inputs = padded_inputs([0] * size, runtime.length, size).to(device)
    side = torch.cuda.Stream(device)
    side.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(side):  # warm-up passes: their cache writes are past the length
        for _ in range(2):
            runtime.run_fixed(*inputs)
    torch.cuda.current_stream(device).wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, pool=pool):
        logits = runtime.run_fixed(*inputs)  # [size, vocab]
    return CapturedPass(graph, inputs, logits)


@torch.inference_mode()
def check_against_eager(runtime: NativeRuntime, graphs: NativeGraphs, q: int) -> None:
    """A replay of q positions (padded up to its graph) against an eager pass on the same input."""
    probe = list(range(1, q + 1))
    replayed = graphs.replay(probe, runtime.length).float().clone()  # [q, vocab]
    eager = runtime.run(probe, keep=q).float()
    scale = eager.abs().max().item()
    close = torch.allclose(replayed, eager, rtol=0.02, atol=0.02 * scale)
    if not close or not torch.equal(replayed.argmax(-1), eager.argmax(-1)):
        raise RuntimeError(f"graph replay of {q} positions disagrees with the eager pass")
