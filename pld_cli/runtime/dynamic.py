"""The dynamic runtime: transformers' own forward over a DynamicCache; rollback crops the cache."""

from __future__ import annotations

import inspect
from collections.abc import Sequence

import torch
from transformers import DynamicCache, PreTrainedModel

from pld_cli.runtime.base import context_limit
from pld_cli.runtime.cpu_kernels import cpu_kernels, kernels_suffix


class DynamicRuntime:
    """transformers' own forward with a DynamicCache; rollback crops the cache."""

    def __init__(self, model: PreTrainedModel) -> None:
        self.model = model
        self.device = model.get_input_embeddings().weight.device
        self.kernels = cpu_kernels(model, self.device)
        self.name = "dynamic" + kernels_suffix(self.device)
        self.context_limit = context_limit(model)
        self.cache = DynamicCache(config=model.config)
        # transformers renamed `past_key_values` to `cache` (5.2x); accept either.
        params = inspect.signature(model.forward).parameters
        self.cache_arg = "cache" if "cache" in params else "past_key_values"

    @property
    def length(self) -> int:
        return self.cache.get_seq_length()

    @torch.inference_mode()
    def prefill(self, ids: Sequence[int]) -> None:
        self.cache = DynamicCache(config=self.model.config)
        if ids:
            x = torch.tensor([list(ids)], device=self.device)  # [1, P]
            # The loop never reads prefill logits: keep one row instead of [P, vocab].
            with self.kernels:
                self.model(
                    input_ids=x, use_cache=True, logits_to_keep=1, **{self.cache_arg: self.cache}
                )
            if self.device.type == "cuda":
                torch.cuda.synchronize(self.device)  # so the caller's timer sees the whole prefill

    @torch.inference_mode()
    def forward(self, ids: Sequence[int]) -> torch.Tensor:
        x = torch.tensor([list(ids)], device=self.device)  # [1, q]
        with self.kernels:
            out = self.model(input_ids=x, use_cache=True, **{self.cache_arg: self.cache})
        return out.logits[0]  # [q, vocab]

    def rollback(self, length: int) -> None:
        if length < self.length:
            # A negative count removes that many positions in every transformers version.
            self.cache.crop(length - self.length)
