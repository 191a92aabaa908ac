"""The static-cache runtime: the KV cache is allocated once; a rollback moves the write position.

transformers' `StaticCache` holds [batch, heads, capacity, head_dim] tensors per layer. Positions
are passed explicitly, so the causal mask hides every cached entry past a query's own position: the
entries a rejected draft left behind are never read, and the next pass overwrites them. Nothing is
copied or cropped. On CUDA the passes can be replayed as CUDA graphs (`graphs.py`).
Sliding-window layers are kept as full ones (the model's masks still apply the window); models
with conv or recurrent state, which a moved position cannot restore, are refused
(`compat.plain_static_cache`).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from transformers import PreTrainedModel

from pld_cli.runtime.context import context_limit
from pld_cli.runtime.hf import compat
from pld_cli.runtime.hf.cpu_kernels import KernelPaths
from pld_cli.runtime.kernels import CACHE_PADDING


class StaticRuntime:
    def __init__(self, model: PreTrainedModel, capacity: int) -> None:
        self.model = model
        self.device = model.get_input_embeddings().weight.device
        self.context_limit = min(context_limit(model), capacity)
        # Room past the context limit for the padded positions of a graph replay.
        self.cache = compat.plain_static_cache(model, self.context_limit + CACHE_PADDING)
        if self.device.type == "cpu":
            compat.trim_attention(self.cache)
        self.kernels = KernelPaths(model, self.device)
        self.paths = self.kernels.paths  # timed per pass size by the calibration (../calibration/)
        self.choose, self.notes = self.kernels.choose, self.kernels.notes
        self.refusal = None  # a rollback moves the write position back: always exact
        self.cache_arg = compat.cache_argument(model)
        # Older transformers place writes at an explicit `cache_position`; newer ones keep the
        # write position in each layer (a device tensor), which a rollback moves back.
        self.explicit_cache_position = compat.takes_cache_position(model)
        self._length = 0
        self.graphs = None  # CudaGraphs, once captured

    @property
    def length(self) -> int:
        return self._length

    @property
    def name(self) -> str:
        return "static+cuda-graphs" if self.graphs else "static"

    def model_inputs(
        self, ids: torch.Tensor, start: int | torch.Tensor, positions: torch.Tensor | None = None
    ) -> dict:
        """Keyword arguments for a pass over ids [1, q] written from cache slot `start` on;
        `positions` [q] (the model's position ids) default to the slots themselves."""
        slots = torch.arange(ids.shape[1], device=self.device) + start  # [q]
        positions = slots if positions is None else positions
        inputs = {"input_ids": ids, "position_ids": positions[None], self.cache_arg: self.cache}
        if self.explicit_cache_position:
            inputs["cache_position"] = slots
        return inputs

    @torch.inference_mode()
    def prefill(self, ids: Sequence[int]) -> None:
        self.cache.reset()  # zeroes the tensors in place (graphs keep their addresses)
        self._length = 0
        if ids:
            x = torch.tensor([list(ids)], device=self.device)  # [1, P]
            self.model(**self.model_inputs(x, 0), use_cache=True, logits_to_keep=1)
            self._length = len(ids)
            if self.device.type == "cuda":
                torch.cuda.synchronize(self.device)

    @torch.inference_mode()
    def forward(self, ids: Sequence[int]) -> torch.Tensor:
        """Logits [q, vocab]; after a graph replay, a view valid until the next pass."""
        if self._length + len(ids) > self.context_limit:
            raise ValueError("static KV cache is full")
        if self.graphs is not None and self.graphs.fits(len(ids)):
            logits = self.graphs.replay(ids, self._length)
        else:
            x = torch.tensor([list(ids)], device=self.device)  # [1, q]
            with self.kernels.for_pass(len(ids)):
                inputs = self.model_inputs(x, self._length)
                logits = self.model(**inputs, use_cache=True).logits[0]
        self._length += len(ids)
        return logits

    def rollback(self, length: int) -> None:
        if length < self._length:
            self.move_write_position(length - self._length)
            self._length = length

    @torch.inference_mode()  # the position tensors were made in inference mode (prefill)
    def move_write_position(self, delta: int) -> None:
        if not self.explicit_cache_position and delta:
            compat.crop(self.cache, -delta)  # static layers: cumulative_length -= |delta|
