"""The dynamic runtime: transformers' own forward over a DynamicCache that a rollback restores.

Attention layers roll back by cropping: sliding-window layers are kept as full ones so that a
rollback past the window still has the positions it needs (`compat.rollback_cache`), and conv
states record their past so a crop cuts them back too. A recurrent state is folded in place, so
it cannot be cropped: before each pass the runtime keeps a copy, and a rollback inside the pass
restores that copy and re-runs the accepted positions from it, the state plain decoding reaches.
A model whose state pld cannot restore still decodes without drafting; a rollback is refused.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from transformers import DynamicCache, PreTrainedModel

from pld_cli.errors import PldError
from pld_cli.runtime import compat
from pld_cli.runtime.base import context_limit
from pld_cli.runtime.cpu_kernels import cpu_kernels, kernels_suffix


@dataclass
class Snapshot:
    """The recurrent states before the last pass, and that pass's start and ids."""

    start: int
    ids: list[int]
    states: list[torch.Tensor]


class DynamicRuntime:
    def __init__(self, model: PreTrainedModel) -> None:
        self.model = model
        self.device = model.get_input_embeddings().weight.device
        self.kernels = cpu_kernels(model, self.device)
        self.name = "dynamic" + kernels_suffix(self.device)
        self.context_limit = context_limit(model)
        self.cache_arg = compat.cache_argument(model)
        self.refusal: str | None = None  # why drafting cannot be exact, if it cannot
        self.cache = self.new_cache()
        stateful = any(compat.is_linear(layer) for layer in self.cache.layers)
        if self.refusal is None and stateful and not continues_state(model, self.cache_arg):
            self.refusal = (
                "pld cannot draft for this model: a pass over several positions restarts its "
                "recurrent state instead of continuing it"
            )
        self._length = 0
        self.snapshot: Snapshot | None = None

    def new_cache(self) -> DynamicCache:
        try:
            return compat.rollback_cache(self.model)
        except compat.Unsupported as why:
            self.refusal = f"pld cannot draft for this model: {why}"
            return compat.plain_cache(self.model)

    @property
    def length(self) -> int:
        return self._length

    @torch.inference_mode()
    def prefill(self, ids: Sequence[int]) -> None:
        self.cache, self._length, self.snapshot = self.new_cache(), 0, None
        if ids:
            # The loop never reads prefill logits: keep one row instead of [P, vocab].
            self.run(ids, logits_to_keep=1)
            if self.device.type == "cuda":
                torch.cuda.synchronize(self.device)  # so the caller's timer sees the whole prefill

    @torch.inference_mode()
    def forward(self, ids: Sequence[int]) -> torch.Tensor:
        compat.forget_recorded_past(self.cache)  # the last pass can no longer be rolled back
        states = compat.recurrent_states(self.cache)
        if states:
            self.snapshot = Snapshot(self._length, list(ids), [s.clone() for s in states])
        return self.run(ids).logits[0]  # [q, vocab]

    def run(self, ids: Sequence[int], **kwargs):
        x = torch.tensor([list(ids)], device=self.device)  # [1, q]
        with self.kernels:
            out = self.model(input_ids=x, use_cache=True, **{self.cache_arg: self.cache}, **kwargs)
        self._length += len(ids)
        return out

    @torch.inference_mode()
    def rollback(self, length: int) -> None:
        if length >= self._length:
            return
        if self.refusal:
            raise PldError(self.refusal)
        if self.snapshot is None:
            compat.crop(self.cache, self._length - length)
            self._length = length
            return
        start, ids, saved = self.snapshot.start, self.snapshot.ids, self.snapshot.states
        if length < start:
            raise ValueError("a recurrent state rolls back only within the last pass")
        compat.crop(self.cache, self._length - start)
        for state, before in zip(compat.recurrent_states(self.cache), saved, strict=True):
            state.copy_(before)
        self._length, self.snapshot = start, None
        if length > start:
            self.run(ids[: length - start], logits_to_keep=1)


@torch.inference_mode()
def continues_state(model: PreTrainedModel, cache_arg: str) -> bool:
    """Whether a pass over a few positions on top of a cached recurrent state continues from it,
    as a verify pass must: the states after one pass over 12 positions and after 8 then 4 agree.
    (Mamba's multi-position path in transformers 5.24 starts from a zero state.) True for conv
    layers without one."""
    ids = torch.arange(3, 15, device=model.device)[None] % model.config.vocab_size  # [1, 12]
    whole = compat.rollback_cache(model)
    model(input_ids=ids, use_cache=True, logits_to_keep=1, **{cache_arg: whole})
    split = compat.rollback_cache(model)
    for part in (ids[:, :8], ids[:, 8:]):
        model(input_ids=part, use_cache=True, logits_to_keep=1, **{cache_arg: split})
    pairs = zip(compat.recurrent_states(whole), compat.recurrent_states(split), strict=True)
    # Float error between a chunked and a split pass stays far below 5% even in bfloat16; a state
    # that restarted from zero is off by about its own size.
    return all((a - b).abs().max() <= 0.05 * a.abs().max() for a, b in pairs)
