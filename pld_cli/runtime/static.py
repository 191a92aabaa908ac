"""The static-cache runtime: the KV cache is allocated once; a rollback moves the write position.

transformers' `StaticCache` holds [batch, heads, capacity, head_dim] tensors per layer. Positions
are passed explicitly, so the causal mask hides every cached entry past a query's own position: the
entries a rejected draft left behind are never read, and the next pass overwrites them. Nothing is
copied or cropped. On CUDA the passes can be replayed as CUDA graphs (`cuda_graphs.py`).
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence

import torch
from transformers import PreTrainedModel, StaticCache
from transformers.cache_utils import StaticLayer

from pld_cli.runtime.base import context_limit
from pld_cli.runtime.cpu_kernels import cpu_kernels, kernels_suffix


class StaticUnsupported(Exception):
    """This model or setting cannot use the static runtime; the message says why."""


# Cache room past the context limit, for the padded positions of a graph replay.
PADDING = 32


class StaticRuntime:
    def __init__(self, model: PreTrainedModel, capacity: int) -> None:
        self.model = model
        self.device = model.get_input_embeddings().weight.device
        self.context_limit = min(context_limit(model), capacity)
        self.cache = static_cache(model, self.context_limit + PADDING)
        if self.device.type == "cpu":
            trim_attention(self.cache)
        self.kernels = cpu_kernels(model, self.device)
        params = inspect.signature(model.forward).parameters
        self.cache_arg = "cache" if "cache" in params else "past_key_values"
        # Older transformers place writes at an explicit `cache_position`; newer ones keep the
        # write position in each layer (a device tensor), which a rollback moves back.
        self.explicit_cache_position = "cache_position" in params
        self._length = 0
        self.graphs = None  # CudaGraphs, once captured

    @property
    def length(self) -> int:
        return self._length

    @property
    def name(self) -> str:
        return "static+cuda-graphs" if self.graphs else "static" + kernels_suffix(self.device)

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
            with self.kernels:
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
            with self.kernels:
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
            self.cache.crop(delta)  # static layers: cumulative_length -= |delta|, in place


def static_cache(model: PreTrainedModel, capacity: int) -> StaticCache:
    """A StaticCache of `capacity` positions, or StaticUnsupported (sliding windows, hybrids)."""
    try:
        cache = StaticCache(config=model.config, max_cache_len=capacity)
    except Exception as error:  # noqa: BLE001 - any refusal means: use the dynamic runtime
        raise StaticUnsupported(f"no static cache for this model ({error})") from error
    layers = getattr(cache, "layers", [])
    if not layers or any(type(layer) is not StaticLayer for layer in layers):
        # A sliding window overwrites old positions in a ring, a linear-attention state is folded
        # in place: a rollback can restore neither.
        raise StaticUnsupported("the model uses sliding-window, linear or other non-static layers")
    return cache


class TrimmedStaticLayer(StaticLayer):
    """A static layer whose attention reads only the positions written so far.

    Without CUDA graphs nothing needs fixed shapes, and on a CPU attending over the whole capacity
    costs more than DynamicCache's copy; a view of the written part costs neither. Its shapes
    change every pass, so it is not compileable, which also lets transformers skip the attention
    mask of a one-position pass, as it does for the dynamic cache.
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
    in the layer (older versions take explicit cache positions and stay untrimmed)."""
    for i, layer in enumerate(cache.layers):
        if type(layer) is StaticLayer and hasattr(layer, "cumulative_length"):
            cache.layers[i] = TrimmedStaticLayer(layer.max_cache_len)
