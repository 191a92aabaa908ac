"""Which modules compute a plain linear product, whatever class transformers gave them."""

from __future__ import annotations

import torch
from transformers.pytorch_utils import Conv1D


def linear_weight(module: torch.nn.Module) -> torch.Tensor | None:
    """The [out, in] weight of a module that computes x @ W.T + b and nothing else, or None.

    nn.Linear and subclasses that keep its forward; Falcon's FalconLinear (same product, written
    as `input @ weight.T`); GPT-2's Conv1D (weight stored [in, out]: its transposed view).
    Other subclasses (quantized, LoRA, ...) may compute something else and are left alone.
    """
    kind = type(module)
    if isinstance(module, torch.nn.Linear):
        same = kind.forward is torch.nn.Linear.forward or kind.__name__ == "FalconLinear"
        return module.weight if same else None
    if kind is Conv1D:
        return module.weight.t()
    return None
