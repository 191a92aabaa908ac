"""CUDA-graph replay of native passes: one graph per padded pass length, no host sync but the read.

A pass of q positions replays the graph of the smallest captured size s >= q (../graphs.py). Its
inputs are three device buffers of s entries each, copied in with one host-to-device copy: the
token ids (padded with the last one), the cache slots start..start+s-1 and the position ids (padded
by repeating the last real one, so they never pass the rope tables). The padded positions are
written to cache slots past the real ones; the runtime's length moves by q only, so they are never
read (every row's mask ends at its own slot) and the next pass overwrites them.
`NativeRuntime.run_fixed` has the fixed shapes a capture needs: attention spans the whole cache
under a mask built on the device.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from pld_cli.runtime.graphs import SIZES, Graphs, capture_all, check_agrees, probe_lengths
from pld_cli.runtime.native.runtime import NativeRuntime


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


class NativeGraphs(Graphs[CapturedPass]):
    @torch.inference_mode()  # the buffers were made in inference mode
    def replay(self, ids: Sequence[int], start: int) -> torch.Tensor:
        """Logits [len(ids), vocab]: a view of the graph's output, valid until the next replay."""
        size = self.size_for(len(ids))
        captured = self.passes[size]
        captured.inputs.copy_(padded_inputs(ids, start, size))
        captured.graph.replay()
        return captured.logits[: len(ids)]


def capture(
    runtime: NativeRuntime, sizes: Sequence[int] = SIZES, record: Callable | None = None
) -> NativeGraphs:
    """One graph per size (../graphs.py), each checked against eager passes; raises RuntimeError
    when a replay disagrees. Leaves the runtime's cache contents undefined past its length (as
    any pass does). `record` (default `capture_size`) records one graph."""
    graphs = NativeGraphs(capture_all(runtime, sizes, record or capture_size))
    for q in probe_lengths(sizes):
        check_against_eager(runtime, graphs, q)
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
    replayed = graphs.replay(probe, runtime.length).clone()  # [q, vocab]
    check_agrees(replayed, runtime.run(probe, keep=q), q)
