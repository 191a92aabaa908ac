"""A model's context limit, read from whichever config field its family uses."""

from __future__ import annotations

from transformers import PreTrainedModel

FIELDS = ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length")
UNKNOWN = 2048  # a config that names no limit: a conservative guess


def context_limit(model: PreTrainedModel) -> int:
    for name in FIELDS:
        value = getattr(model.config, name, None)
        if isinstance(value, int) and value > 0:
            return value
    return UNKNOWN
