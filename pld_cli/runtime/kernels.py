"""The two kernels pld's forwards share: a padded linear layout and sdpa over folded query heads.

- A linear layer over a few rows as `W @ x.T` over rows padded to a size of `PADDED_SIZES`: on
  some CPUs MKL's `x @ W.T` streams the weights once per row, this layout once for all rows. One
  row is padded to two, since MKL ran the matrix-vector product at about half the speed of two
  columns (docs/design-measurements.md).
- Attention with grouped KV heads folded into extra query rows: keys and values are never repeated
  per query head, and sdpa stays on its fused kernel even with a mask.
The native runtime (native/runtime.py) runs them; hf/cpu_kernels.py swaps them into transformers'.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

# The pass sizes padded passes round up to: linear rows here, CUDA graphs (graphs.py) alike.
PADDED_SIZES = (1, 2, 4, 8, 16, 32)
# Cache slots past the context limit, for the padded positions of the largest padded pass.
CACHE_PADDING = PADDED_SIZES[-1]
MIN_PADDED_ROWS = 2  # a padded linear layer's fewest rows (see above)


def padded_size(q: int) -> int | None:
    """The padded size a pass of q positions rounds up to; None past the largest."""
    return next((size for size in PADDED_SIZES if size >= q), None)


def padded_rows(m: int) -> int | None:
    """The rows a padded linear layer runs for m: the padded size of m, at least MIN_PADDED_ROWS;
    None past the largest padded size."""
    return padded_size(max(m, MIN_PADDED_ROWS))


def padded_linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """x [m, in] @ weight.T (+ bias) -> [m, out], as W @ x.T with x's rows padded up to
    padded_rows(m) (F.linear past the largest padded size)."""
    m = x.shape[0]
    size = padded_rows(m)
    if size is None:
        return F.linear(x, weight, bias)
    if size > m:
        x = torch.cat([x, x.new_zeros(size - m, x.shape[1])])  # [size, in]
    # x.t() must stay a transposed view of contiguous rows: a contiguous [in, m] takes MKL's slow
    # path again (the input of a layer fed by this one's transposed output is such a view).
    out = (weight @ x.contiguous().t()).t()[:m]  # [out, size] -> [m, out]
    return out if bias is None else out + bias


def additive(mask: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """A boolean mask (True: attend) as 0 / -inf in dtype; a float mask as it is."""
    if mask.dtype != torch.bool:
        return mask
    return torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill_(~mask, -torch.inf)


def folded_mask(mask: torch.Tensor, groups: int, dtype: torch.dtype) -> torch.Tensor:
    """A mask [q, kv] (boolean or additive) for folded queries: additive [groups * q, kv]."""
    return additive(mask, dtype).reshape(-1, mask.shape[-1]).repeat(groups, 1)


def folded_sdpa(
    query: torch.Tensor,
    keys: torch.Tensor,
    values: torch.Tensor,
    mask: torch.Tensor | None,
    scale: float | None,
) -> torch.Tensor:
    """Attention of query [heads, q, d] over keys/values [1, kv_heads, kv, d] -> [heads, q, d].

    Query head h belongs to KV head h // groups: a group's heads become rows (g, position), so the
    mask (from `folded_mask`, or None) is [groups * q, kv]. sdpa takes its fused CPU kernel for
    4-d inputs only (3-d ones run the math path)."""
    heads, q, d = query.shape
    kv_heads = keys.shape[1]
    rows = query.reshape(1, kv_heads, heads // kv_heads * q, d)
    out = F.scaled_dot_product_attention(rows, keys, values, attn_mask=mask, scale=scale)
    return out.reshape(heads, q, d)
