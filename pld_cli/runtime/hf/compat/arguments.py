"""Forward arguments whose names changed between transformers releases."""

from __future__ import annotations

import inspect

from transformers import PreTrainedModel
from transformers import __version__ as transformers_version

__all__ = [
    "attention_implementation",
    "cache_argument",
    "takes_cache_position",
    "transformers_version",
]


def cache_argument(model: PreTrainedModel) -> str:
    """The name of forward's cache argument: `cache` (after 5.20; 5.24), `past_key_values`
    (4.56 to 5.20)."""
    params = inspect.signature(model.forward).parameters
    return "cache" if "cache" in params else "past_key_values"


def takes_cache_position(model: PreTrainedModel) -> bool:
    """Whether forward places cache writes at an explicit `cache_position` (4.56 to 5.0); later
    releases (5.10 on) keep the write position in each static layer (`cumulative_length`)."""
    return "cache_position" in inspect.signature(model.forward).parameters


def attention_implementation(model: PreTrainedModel) -> str:
    """`config._attn_implementation` (private, 4.56 to 5.24): "sdpa", "eager", ..."""
    return model.config._attn_implementation
