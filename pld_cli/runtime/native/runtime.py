"""The native runtime: pld's own Llama-family forward (`model.py`) over a KV cache it owns.

The cache is one [layers, kv_heads, slots, head_dim] tensor each for keys and values (one region
of slots per document decoded at once, ../batch/), written at explicit positions, so a rollback
only moves the length back: what a rejected draft left is never read, and the next pass overwrites
it. Float linear layers run plain or padded (../kernels.py) per pass size, as the calibration
chose (../calibration/). Quantized weights (`quantized/`) run their own kernels, and their passes
compute each row as a one-position pass would (`attention.py`; all layers in one C call, prefills
included: `decoder.py`). On CUDA, passes replay CUDA graphs
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
from pld_cli.runtime.clib.tables import Segment
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
from pld_cli.runtime.native.rope import rope_tables

PATHS = ("plain", "padded")  # the linear layouts the calibration chooses between, per pass size
PREFILL_SLICE = 256  # prompt rows per pass of the C decoder


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


@dataclass(frozen=True)
class Piece:
    """One document's rows in a pass of the C decoder: `ids` at positions start.. of cache region
    `region`, and how many of its last rows' logits to return."""

    region: int
    start: int
    ids: Sequence[int]
    keep: int


class NativeRuntime:
    def __init__(self, model: PreTrainedModel, capacity: int, regions: int = 1) -> None:
        """Room for `capacity` positions in each of `regions` cache regions: one per document
        decoded at once (../batch/); this runtime's own prefill, forward and rollback use the
        first."""
        self.model, self.weights = model, native_weights(model)
        weights = self.weights
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
        self.span = self.context_limit + CACHE_PADDING  # slots per region
        shape = (len(weights.layers), weights.kv_heads, regions * self.span, weights.head_dim)
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

    def prefill(self, ids: Sequence[int], start: int = 0) -> None:
        """Fills positions start.. with ids[start:]; those before `start` are taken as written
        (restore(), ../prefix/: the C decoder's only, where a prefill split there is exact)."""
        if start and self.decoder is None:
            raise ValueError("a prefill from a kept prefix runs on the C decoder only")
        self._length = start
        # The C decoder takes a long prompt in slices, its partial sums bounded (any slicing
        # gives each row the same bits); the loop never reads prefill logits: none are made.
        sliced = self.decoder is not None
        step = PREFILL_SLICE if sliced else max(len(ids), 1)
        for first in range(start, len(ids), step):
            self.run(ids[first : first + step], keep=0 if sliced else 1)
            self._length = min(first + step, len(ids))
        if ids and self.device.type == "cuda":
            torch.cuda.synchronize(self.device)  # so the caller's timer sees the whole prefill

    def snapshot(self, length: int, region: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
        """Copies of the keys and values of a region's first `length` positions."""
        base = region * self.span
        span = slice(base, base + length)
        return self.keys[:, :, span].clone(), self.values[:, :, span].clone()

    def restore(
        self, keys: torch.Tensor, values: torch.Tensor, count: int, region: int = 0
    ) -> None:
        """Writes the first `count` positions of kept keys and values into a region."""
        base = region * self.span
        self.keys[:, :, base : base + count] = keys[:, :, :count]
        self.values[:, :, base : base + count] = values[:, :, :count]

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
        if self.decoder is not None:
            return self.run_pieces([Piece(0, start, ids, keep)])[0]
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

    @torch.inference_mode()
    def run_pieces(self, pieces: Sequence[Piece]) -> list[torch.Tensor]:
        """One pass of the C decoder over several documents' rows (../batch/), each computed from
        its own row alone: every piece's keys and values written in its region, its last `keep`
        rows' logits [keep, vocab] returned in order. The decoder applies the final norm itself
        (its fixed order, not torch's), so only the head's product runs here. Moves no length."""
        ids = [token for piece in pieces for token in piece.ids]
        x = self.weights.embed[torch.tensor(ids, device=self.device)]  # [rows, hidden]
        segments = [Segment(len(p.ids), p.region * self.span, p.start) for p in pieces]
        normed = self.decoder(x, segments).to(x.dtype)
        ends = torch.tensor([len(p.ids) for p in pieces]).cumsum(0).tolist()
        kept = torch.cat([normed[end - p.keep : end] for p, end in zip(pieces, ends, strict=True)])
        logits = linear(kept, self.weights.head, None, False, rowwise=True) if len(kept) else kept
        return list(logits.split([p.keep for p in pieces]))

    def head(self, x: torch.Tensor, padded: bool = False, rowwise: bool = False) -> torch.Tensor:
        """The final norm and the LM head over rows x [n, hidden]: logits [n, vocab]."""
        w = self.weights
        return linear(rms_norm(x, w.norm, w.eps), w.head, None, padded, rowwise)

    def layers(self, x: torch.Tensor, at: Placement, keep: int) -> torch.Tensor:
        """The decoder over x [q, hidden] placed `at`: logits [keep, vocab] of the last rows."""
        return self.head(self.blocks(x, at)[-keep:], at.padded, at.rowwise)

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
