"""Attention row by row, as exact verification needs it: the C kernel
(runtime/clib/csrc/row_attention.c) where it is built, else one sdpa call per row.

Row i of a pass over q positions ending at slot `end` sees slots [0, end - q + 1 + i): what a pass
over that row alone sees. Either path gives each row what a one-position pass gives it; the C
kernel does all rows (and chunks of slots) in one call, where sdpa costs a call per row per layer,
several times the kernel's time on a verify pass (docs/design-measurements.md).
"""

from __future__ import annotations

import torch

from pld_cli.runtime.clib import library
from pld_cli.runtime.kernels import folded_sdpa

MAX_HEAD_DIM = 256  # the C kernel's bound (its head_dim must also be a multiple of 16)


def kernel_fits(head_dim: int, dtype: torch.dtype) -> bool:
    """Whether the C kernel takes this cache: float32, head_dim a multiple of 16 up to 256."""
    return dtype == torch.float32 and head_dim % 16 == 0 and head_dim <= MAX_HEAD_DIM


def attend_rows(
    query: torch.Tensor,
    keys: torch.Tensor,
    values: torch.Tensor,
    end: int,
    scale: float,
    use_kernel: bool,
) -> torch.Tensor:
    """query [heads, q, d] over one layer's cache keys/values [kv_heads, slots, d] (contiguous),
    row i over slots [0, end - q + 1 + i) -> [heads, q, d]."""
    heads, q, d = query.shape
    first = end - q + 1
    kernel = library.kernel("attend_rows") if use_kernel else None
    if kernel is None:
        rows = [row_sdpa(query[:, i : i + 1], keys, values, first + i, scale) for i in range(q)]
        return torch.cat(rows, 1)
    query = query.contiguous()
    out = torch.empty_like(query)
    kv_heads, slots = keys.shape[0], keys.shape[1]
    code = kernel(
        query.data_ptr(),
        keys.data_ptr(),
        values.data_ptr(),
        heads,
        kv_heads,
        q,
        d,
        slots,
        first,
        scale,
        out.data_ptr(),
    )
    if code != 0:
        raise MemoryError("row attention: no memory for its partial sums")
    return out


def row_sdpa(
    row: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, seen: int, scale: float
) -> torch.Tensor:
    """One row [heads, 1, d] over the first `seen` slots, the call a one-position pass makes."""
    return folded_sdpa(row, keys[None, :, :seen], values[None, :, :seen], None, scale)
