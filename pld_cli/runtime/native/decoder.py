"""The decoder layers of decode and verify passes in one C call (runtime/clib/csrc/decoder.c), for
int8 weights in groups on a CPU.

A one-position pass of the default model at int8 spent more in torch's dispatch around the
kernels (norms, rotations, cache writes: a hundred small operations per layer) than in the kernels
themselves, so `CDecoder` hands the C library a table of every layer's tensors, built once, and
runs all layers of a pass in one call, and the final norm after them: the rows come back as the
LM head's input, every float step before the head done in C in a fixed order (torch's norm sums
in whatever order its kernels choose for the version and instruction set). Each row is computed
from that row alone, so a verify row gets what a one-position pass gives it, and a prompt's rows
what they get in any slicing of its prefill: prefills run here too, and a pass may hold several
documents' rows (../batch/).
"""

from __future__ import annotations

import ctypes
from collections.abc import Sequence

import torch

from pld_cli.runtime.clib import library
from pld_cli.runtime.clib.tables import MATRICES, Block, Decoder, Matrix, Segment
from pld_cli.runtime.native.attention import kernel_fits
from pld_cli.runtime.native.model import Layer, NativeWeights
from pld_cli.runtime.native.quantized.grouped import GroupedMatrix
from pld_cli.runtime.native.quantized.parts import GroupedParts

KERNEL = "decode_rows"


def fits(weights: NativeWeights, dtype: torch.dtype) -> bool:
    """Whether the C decoder takes these weights: every layer matrix int8 in groups, its rows
    checked to stand alone on this machine, a float32 cache the C attention takes, and the
    library built."""
    grouped = all(
        isinstance(matrix, GroupedMatrix | GroupedParts) and matrix.rows_checked > 0
        for layer in weights.layers
        for matrix in (getattr(layer, name) for name in MATRICES)
    )
    fitting = grouped and kernel_fits(weights.head_dim, dtype)
    return fitting and library.kernel(KERNEL) is not None


class CDecoder:
    """Runs all decoder layers of a pass, and the final norm, over the runtime's cache
    keys/values [layers, kv_heads, slots, head_dim] and rotary tables cos/sin [positions, 1,
    head_dim]."""

    def __init__(
        self,
        weights: NativeWeights,
        keys: torch.Tensor,
        values: torch.Tensor,
        cos: torch.Tensor,
        sin: torch.Tensor,
    ) -> None:
        if not all(t.dtype == torch.float32 and t.is_contiguous() for t in (keys, values)):
            raise ValueError("the C decoder writes the cache in place: float32, contiguous")
        self.kept: list[torch.Tensor | Matrix] = []  # all the table points into, kept alive
        blocks = [self.block(layer) for layer in weights.layers]
        self.blocks = (Block * len(blocks))(*blocks)
        self.table = Decoder(
            layers=len(blocks),
            hidden=weights.norm.shape[0],
            heads=weights.heads,
            kv_heads=weights.kv_heads,
            head_dim=weights.head_dim,
            slots=keys.shape[2],
            eps=weights.eps,
            scaling=weights.scaling,
            blocks=self.blocks,
            norm=self.pointer(weights.norm),
            keys=self.pointer(keys),
            values=self.pointer(values),
            cos=self.pointer(cos),
            sin=self.pointer(sin),
        )

    def __call__(self, x: torch.Tensor, segments: Sequence[Segment]) -> torch.Tensor:
        """x [rows, hidden] through every layer and the final norm, the rows of each segment in
        turn (one document's rows at its positions, in its cache region: tables.Segment); writes
        their keys and values into the cache. Returns the LM head's input [rows, hidden]."""
        x = x.to(torch.float32).contiguous().clone()
        table = (Segment * len(segments))(*segments)
        code = library.kernel(KERNEL)(ctypes.byref(self.table), x.data_ptr(), table, len(table))
        if code == library.WRONG_SIZES:
            raise ValueError("C decoder: the model's sizes do not agree with its tables")
        if code != 0:
            raise MemoryError("C decoder: no memory for a pass's activations")
        return x

    def block(self, layer: Layer) -> Block:
        norms = ("attention_norm", "q_norm", "k_norm", "mlp_norm")
        fields = {name: self.pointer(getattr(layer, name)) for name in norms}
        for name in MATRICES:
            fields[name] = self.matrix(getattr(layer, name), getattr(layer, f"{name}_bias"))
        return Block(**fields)

    def matrix(self, matrix: GroupedMatrix | GroupedParts, bias: torch.Tensor | None) -> Matrix:
        if not all(array.is_contiguous() for array in matrix.arrays()):
            raise ValueError("the C decoder reads a matrix's arrays in place: contiguous")
        table = matrix.table(self.pointer(bias))
        self.kept += [*matrix.arrays(), table]  # the table: its parts' tables hang from it
        return table

    def pointer(self, tensor: torch.Tensor | None) -> int | None:
        """The address of a contiguous float32 (or byte) copy of tensor, kept alive; None: NULL."""
        if tensor is None:
            return None
        if tensor.dtype != torch.uint8:
            tensor = tensor.to(torch.float32)
        tensor = tensor.contiguous()
        self.kept.append(tensor)
        return tensor.data_ptr()
