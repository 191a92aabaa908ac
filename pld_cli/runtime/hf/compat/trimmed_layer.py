"""A static cache layer whose attention reads only the positions written so far (CPU passes)."""

from __future__ import annotations

import torch
from transformers import StaticCache
from transformers.cache_utils import StaticLayer

from pld_cli.runtime.hf.compat.caches import write_position


class TrimmedStaticLayer(StaticLayer):
    """A static layer whose attention reads only the positions written so far.

    Without CUDA graphs nothing needs fixed shapes, and on a CPU attending over the whole capacity
    costs more than DynamicCache's copy; a view of the written part costs neither. Its shapes
    change every pass, so it is not compileable, which also lets transformers skip the attention
    mask of a one-position pass, as it does for the dynamic cache. 5.10 on (`cumulative_length`,
    `get_mask_sizes(query_length)`; 4.56 to 5.0 take `get_mask_sizes(cache_position)`).
    """

    is_compileable = False

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs):
        keys, values = super().update(key_states, value_states, *args, **kwargs)
        end = int(self.cumulative_length)  # a CPU tensor: no device sync
        return keys[:, :, :end], values[:, :, :end]  # [1, heads, end, head_dim] views

    def get_mask_sizes(self, query_length: int) -> tuple[int, int]:
        return int(self.cumulative_length) + query_length, 0


def trim_attention(cache: StaticCache) -> None:
    """Swap plain static layers for trimmed ones where this transformers keeps the write position
    in the layer (4.56 to 5.0 take explicit cache positions and stay untrimmed)."""
    for i, layer in enumerate(cache.layers):
        if type(layer) is StaticLayer and write_position(layer) is not None:
            cache.layers[i] = TrimmedStaticLayer(layer.max_cache_len)
