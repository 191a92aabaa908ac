"""The native runtime: pld's own Llama-family forward (`model.py`) over a KV cache it owns.

The cache is one [layers, kv_heads, capacity, head_dim] tensor each for keys and values, written at
explicit positions, so a rollback only moves the length back: what a rejected draft left is never
read, and the next pass overwrites it. Float linear layers run plain or padded (../kernels.py) per
pass size, as the calibration chose (../calibration/). Quantized weights (`quantized/`) run their
own kernels, and their decode and verify passes compute each row as a one-position pass would
(`attention.py`; all layers in one C call: `decoder.py`). On CUDA, passes replay CUDA graphs
(`graphs.py`) over `run_fixed`, a pass whose shapes depend on its length only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from transformers import PreTrainedModel

from pld_cli.errors import Unsupported
from pld_cli.runtime.calibration.paths import PathChoice
from pld_cli.runtime.clib import library
from pld_cli.runtime.context import context_limit
from pld_cli.runtime.kernels import CACHE_PADDING, folded_mask, folded_sdpa
from pld_cli.runtime.native import decoder
from pld_cli.runtime.native.attention import attend_rows, kernel_fits
from pld_cli.runtime.native.decoder import CDecoder
from pld_cli.runtime.native.model import (
    Layer,
    linear,
    native_weights,
    rms_norm,
    rotate,
    sliding_window,
)
from pld_cli.runtime.native.quantized.quantize import layouts

PATHS = ("plain", "padded")  # the linear layouts the calibration chooses between, per pass size


@dataclass(frozen=True)
class Placement:
    """Where a pass's rows sit: the cache slots their keys and values go to, the cache span
    attention reads (:end), their rotations [q, 1, head_dim], the additive mask [groups * q, end]
    (None: every slot), whether the linear layers take the padded layout, and whether attention
    runs one row at a time (`rowwise`: over slots :end - q + 1 + i for row i, no mask)."""

    slots: slice | torch.Tensor
    end: int
    cos: torch.Tensor
    sin: torch.Tensor
    mask: torch.Tensor | None
    padded: bool
    rowwise: bool = False


class NativeRuntime:
    def __init__(self, model: PreTrainedModel, capacity: int) -> None:
        self.weights = weights = native_weights(model)
        self.context_limit = min(context_limit(model), capacity)
        window = sliding_window(model.config)
        if window is not None and window < self.context_limit:
            raise Unsupported(
                f"a sliding window of {window} positions, under the {self.context_limit} used"
            )
        self.device, dtype = weights.embed.device, weights.embed.dtype
        self.scheme = weights.scheme
        # The padded layout is a CPU float matmul question; CUDA passes replay graphs of plain
        # ones, quantized matrices run their own kernel at every size.
        layouts = self.device.type == "cpu" and self.scheme is None
        self.layout = PathChoice(PATHS if layouts else (), "plain")
        self.paths, self.choose = self.layout.paths, self.layout.choose
        self.refusal = None  # a rollback only moves the length back: always exact
        # Room past the context limit for the padded positions of a graph replay.
        slots = self.context_limit + CACHE_PADDING
        shape = (len(weights.layers), weights.kv_heads, slots, weights.head_dim)
        self.keys = torch.zeros(shape, dtype=dtype, device=self.device)
        self.values = torch.zeros_like(self.keys)
        self.cos, self.sin = rope_tables(model, self.context_limit)  # [capacity, 1, head_dim]
        self.groups = weights.heads // weights.kv_heads
        # Decode and verify passes of quantized weights attend row by row (exactness, below):
        # through the C kernel where it is built and takes this cache.
        rows_by_kernel = self.scheme is not None and kernel_fits(weights.head_dim, dtype)
        self.row_kernel = rows_by_kernel and library.kernel("attend_rows") is not None
        # ... and, with int8 in groups, run all their layers in one C call (decoder.py).
        fused = self.device.type == "cpu" and decoder.fits(weights, dtype)
        self.decoder = (
            CDecoder(weights, self.keys, self.values, self.cos, self.sin) if fused else None
        )
        self._length = 0
        self.graphs = None  # NativeGraphs, once captured (CUDA)

    @property
    def length(self) -> int:
        return self._length

    @property
    def name(self) -> str:
        """native, with the quantization and the C library's variant (native-int8+avx2: pass
        costs are cached per name)."""
        name = "native" if self.scheme is None else f"native-{self.scheme}"
        name += f"+{library.variant()}" if self.row_kernel else ""
        return f"{name}+cuda-graphs" if self.graphs else name

    def notes(self) -> list[str]:
        """The kernel path, for --verbose: what runs the layers and the attention of a decode or
        verify pass, and why pld's C library does not where it does not."""
        if self.scheme is None:
            return [f"kernels: {self.keys.dtype} matmul ({' or '.join(self.paths) or 'plain'})"]
        layers, variant = f"layers {layouts(self.weights)}", library.variant()
        if self.decoder is not None:
            path = f"each decode or verify pass in one call of pld's C kernels ({variant})"
        elif self.row_kernel:
            path = f"attention row by row in pld's C kernels ({variant})"
        else:
            size = self.weights.head_dim
            why = library.unavailable() or f"its attention takes no head size {size}"
            path = f"attention row by row through sdpa (pld's C kernels: {why})"
        return [f"kernels: {layers}; {path}"]

    def prefill(self, ids: Sequence[int]) -> None:
        self._length = 0
        if ids:
            self.run(ids, keep=1)  # the loop never reads prefill logits: one row, not [P, vocab]
            self._length = len(ids)
            if self.device.type == "cuda":
                torch.cuda.synchronize(self.device)  # so the caller's timer sees the whole prefill

    def forward(self, ids: Sequence[int]) -> torch.Tensor:
        """Logits [len(ids), vocab] for the next token after each of ids."""
        if self._length + len(ids) > self.context_limit:
            raise ValueError("native KV cache is full")
        if self.graphs is not None and self.graphs.fits(len(ids)):
            logits = self.graphs.replay(ids, self._length)
        else:
            logits = self.run(ids, keep=len(ids))
        self._length += len(ids)
        return logits

    def rollback(self, length: int) -> None:
        self._length = min(self._length, length)

    @torch.inference_mode()
    def run(self, ids: Sequence[int], keep: int) -> torch.Tensor:
        """Writes ids' keys and values at slots length.., returns the last `keep` rows' logits."""
        start, q = self._length, len(ids)
        x = self.weights.embed[torch.tensor(list(ids), device=self.device)]  # [q, hidden]
        cos, sin = self.cos[start : start + q], self.sin[start : start + q]  # [q, 1, head_dim]
        mask = self.causal_mask(q, start, x.dtype)  # [groups * q, start + q] or None
        padded = self.layout.path(q) == "padded"
        rowwise = self.scheme is not None and keep == q  # a decode or verify pass
        at = Placement(slice(start, start + q), start + q, cos, sin, mask, padded, rowwise)
        return self.layers(x, at, keep)

    @torch.inference_mode()
    def run_fixed(
        self, ids: torch.Tensor, slots: torch.Tensor, positions: torch.Tensor
    ) -> torch.Tensor:
        """A pass whose shapes depend on len(ids) only, for CUDA graphs: ids, cache slots and
        position ids [s] are device tensors, attention spans the whole cache (masked past each
        row's own slot). Logits [s, vocab]; moves no length."""
        x = self.weights.embed[ids]  # [s, hidden]
        cos, sin = self.cos[positions], self.sin[positions]  # [s, 1, head_dim]
        capacity = self.keys.shape[2]
        seen = torch.arange(capacity, device=self.device)[None] <= slots[:, None]  # [s, capacity]
        mask = folded_mask(seen, self.groups, x.dtype)
        return self.layers(x, Placement(slots, capacity, cos, sin, mask, False), len(ids))

    def layers(self, x: torch.Tensor, at: Placement, keep: int) -> torch.Tensor:
        """The decoder over x [q, hidden] placed `at`: logits [keep, vocab] of the last rows."""
        w = self.weights
        if at.rowwise and self.decoder is not None:
            x = self.decoder(x, at.end - x.shape[0]).to(x.dtype)
        else:
            x = self.blocks(x, at)
        x = rms_norm(x[-keep:], w.norm, w.eps)
        return linear(x, w.head, None, at.padded, at.rowwise)  # [keep, vocab]

    def blocks(self, x: torch.Tensor, at: Placement) -> torch.Tensor:
        """x [q, hidden] through every decoder layer, in torch."""
        w, padded, rowwise = self.weights, at.padded, at.rowwise
        for i, layer in enumerate(w.layers):
            h = rms_norm(x, layer.attention_norm, w.eps)
            x = x + self.attention(i, layer, h, at)
            h = rms_norm(x, layer.mlp_norm, w.eps)
            gate_up = linear(h, layer.gate_up, layer.gate_up_bias, padded, rowwise)
            gate, up = gate_up.chunk(2, -1)
            x = x + linear(w.act(gate) * up, layer.down, layer.down_bias, padded, rowwise)
        return x

    def attention(self, i: int, layer: Layer, h: torch.Tensor, at: Placement) -> torch.Tensor:
        """Layer i's attention output [q, hidden] for its normed input h [q, hidden]."""
        w, q, d, padded = self.weights, h.shape[0], self.weights.head_dim, at.padded
        qkv = linear(h, layer.qkv, layer.qkv_bias, padded, at.rowwise)  # [q, (heads + 2 kv) * d]
        query, key, value = qkv.split([w.heads * d, w.kv_heads * d, w.kv_heads * d], -1)
        query, key = query.view(q, w.heads, d), key.view(q, w.kv_heads, d)
        if layer.q_norm is not None:  # Qwen3: RMSNorm over each head before the rotation
            query, key = rms_norm(query, layer.q_norm, w.eps), rms_norm(key, layer.k_norm, w.eps)
        query, key = rotate(query, at.cos, at.sin), rotate(key, at.cos, at.sin)
        self.keys[i, :, at.slots] = key.transpose(0, 1)  # [kv_heads, q, d]
        self.values[i, :, at.slots] = value.view(q, w.kv_heads, d).transpose(0, 1)
        if at.rowwise:
            out = attend_rows(
                query.transpose(0, 1),
                self.keys[i],
                self.values[i],
                at.end,
                w.scaling,
                self.row_kernel,
            )  # [heads, q, d]
        else:
            keys, values = self.keys[i, None, :, : at.end], self.values[i, None, :, : at.end]
            out = folded_sdpa(query.transpose(0, 1), keys, values, at.mask, w.scaling)
        out = out.transpose(0, 1).reshape(q, w.heads * d)
        return linear(out, layer.out, layer.out_bias, padded, at.rowwise)

    def causal_mask(self, q: int, start: int, dtype: torch.dtype) -> torch.Tensor | None:
        """Additive mask [groups * q, start + q]: row (g, i) sees slots up to start + i. None for
        one position, which sees every written slot."""
        if q == 1:
            return None
        seen = torch.ones(q, start + q, dtype=torch.bool, device=self.device).tril(start)
        return folded_mask(seen, self.groups, dtype)


@torch.inference_mode()
def rope_tables(model: PreTrainedModel, capacity: int) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin [capacity, 1, head_dim] from the model's own rotary module (its rope type's
    inv_freq and attention scaling), so every covered rope type matches transformers."""
    embed = model.model.embed_tokens.weight
    positions = torch.arange(capacity, device=embed.device)[None]  # [1, capacity]
    cos, sin = model.model.rotary_emb(embed[:1], positions)  # [1, capacity, head_dim] each
    return cos[0, :, None], sin[0, :, None]
