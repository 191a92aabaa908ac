"""What a quantization is to the rest of pld: a scheme by name, and a matrix that runs it.

A model's weights carry their scheme (`NativeWeights.scheme`; None for float weights), so whoever
needs to know asks the weights. A layer matrix is either a float tensor or a `QuantizedMatrix`:
the forward calls the latter with its input rows and whether each row must be computed as if it
were the pass's only one (`rowwise`, what exact verification needs).
"""

from __future__ import annotations

from enum import Enum
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import torch


class Scheme(str, Enum):
    """A quantization of pld's own forward's weights, as --quantize names it."""

    INT8 = "int8"  # int8 in groups of 32 through pld's C kernels
    INT4 = "int4"  # int4 in groups of 32 through torch's kernel
    GGUF = "gguf"  # a GGUF's own blocks, each type in its exact layout, through pld's C kernels

    def __str__(self) -> str:
        return self.value


class QuantizedMatrix(Protocol):
    """A quantized [out, in] matrix: its product, its size, and whether its rows stand alone."""

    rows_checked: int  # verify passes up to this many rows may run batched

    def __call__(self, x: torch.Tensor, rowwise: bool = False) -> torch.Tensor: ...

    @property
    def shape(self) -> tuple[int, int]: ...

    @property
    def nbytes(self) -> int: ...

    def computes_rowwise(self) -> bool: ...
