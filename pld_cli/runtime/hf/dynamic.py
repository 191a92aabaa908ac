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

from pld_cli.errors import Unsupported
from pld_cli.runtime.context import context_limit
from pld_cli.runtime.hf import compat
from pld_cli.runtime.hf.cpu_kernels import KernelPaths


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
        self.kernels = KernelPaths(model, self.device)
        self.paths = self.kernels.paths  # timed per pass size by the calibration (../calibration/)
        self.choose, self.notes = self.kernels.choose, self.kernels.notes
        self.name = "dynamic"
        self.context_limit = context_limit(model)
        self.cache_arg = compat.cache_argument(model)
        self.refusal: str | None = None  # why drafting cannot be exact, if it cannot
        self.cache = self.new_cache()
        stateful = any(compat.is_linear_attention(layer) for layer in self.cache.layers)
        why = state_refusal(model, self.cache_arg) if self.refusal is None and stateful else None
        if why:
            self.refusal = f"pld cannot draft for this model: {why}"
        self._length = 0
        self.snapshot: Snapshot | None = None

    def new_cache(self) -> DynamicCache:
        compat.check_runs(self.model)  # a model no cache of this transformers holds: refused
        try:
            return compat.rollback_cache(self.model)
        except Unsupported as why:
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
        with self.kernels.for_pass(len(ids)):
            out = self.model(input_ids=x, use_cache=True, **{self.cache_arg: self.cache}, **kwargs)
        self._length += len(ids)
        return out

    @torch.inference_mode()
    def rollback(self, length: int) -> None:
        if length >= self._length:
            return
        if self.refusal:
            raise Unsupported(self.refusal)
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
def state_refusal(model: PreTrainedModel, cache_arg: str) -> str | None:
    """Why drafting cannot be exact for a model with conv or recurrent state, or None.

    A verify pass must continue the cached state: the states after one pass over 12 positions and
    after 8 then 4 agree (Mamba's multi-position path in transformers 5.24 starts from a zero
    state; conv layers without a recurrent state pass). And a rejected draft must be cut back:
    `crop` of the last positions works (5.17's conv layers fail at it on Mamba)."""
    ids = torch.arange(3, 15, device=model.device)[None] % model.config.vocab_size  # [1, 12]
    whole = compat.rollback_cache(model)
    model(input_ids=ids, use_cache=True, logits_to_keep=1, **{cache_arg: whole})
    split = compat.rollback_cache(model)
    for part in (ids[:, :8], ids[:, 8:]):
        model(input_ids=part, use_cache=True, logits_to_keep=1, **{cache_arg: split})
    pairs = zip(compat.recurrent_states(whole), compat.recurrent_states(split), strict=True)
    # Float error between a chunked and a split pass stays far below 5% even in bfloat16; a state
    # that restarted from zero is off by about its own size.
    if not all((a - b).abs().max() <= 0.05 * a.abs().max() for a, b in pairs):
        return "a pass over several positions restarts its recurrent state instead of continuing it"
    try:
        compat.crop(split, 4)
    except Exception as error:  # noqa: BLE001 - any failure means: no rollback on this version
        return f"transformers {compat.transformers_version} cannot cut its cache back ({error})"
    return None
