"""transformers' attention and mask registries, and a way to swap their sdpa entries for a while."""

from __future__ import annotations

from collections.abc import Callable

import torch
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, sdpa_mask
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

AttentionFunction = Callable[..., tuple[torch.Tensor, torch.Tensor | None]]
stock_sdpa_attention = sdpa_attention_forward
stock_sdpa_mask = sdpa_mask


class SdpaReplaced:
    """Inside `with`, models whose `_attn_implementation` is "sdpa" call `attention` and `mask`
    instead of transformers' sdpa ones, while still seeing "sdpa" (model code that tests for it,
    as Falcon's and Gemma 4's does, keeps its sdpa path). Overrides the local mappings of the
    shared interface objects (`GeneralInterface`, 4.56 to 5.24 at least), restoring after."""

    def __init__(self, attention: AttentionFunction, mask: Callable) -> None:
        self.replacements = (
            (ALL_ATTENTION_FUNCTIONS, attention),
            (ALL_MASK_ATTENTION_FUNCTIONS, mask),
        )
        self.saved: list = []

    def __enter__(self) -> None:
        self.saved = [table._local_mapping.get("sdpa") for table, _ in self.replacements]
        for table, function in self.replacements:
            table["sdpa"] = function

    def __exit__(self, *exc) -> None:
        for (table, _), before in zip(self.replacements, self.saved, strict=True):
            if before is None:
                del table["sdpa"]
            else:
                table["sdpa"] = before
