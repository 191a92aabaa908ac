"""Weight-only quantization for the native forward: int8 per output channel, int4 in groups.

A pass on a CPU is bound by reading the weights, so reading int8 (or int4) instead of float32
makes a pass cheaper. torch's weight-only kernels (`_weight_int8pack_mm`,
`_weight_int4pack_mm_for_cpu`) take bfloat16 activations and compute each output row from its own
input row alone: a row's result is bit-identical whether it is computed alone or among the rows of
a verify pass, so the logits of a pass over q positions are exactly those of q passes over one and
pld's output equals `--no-pld`'s by construction (attention and the norms stay float32, as in the
float32 forward). That is checked at load on the machine itself (`check_rows`: a kernel may take
another path for more rows on another CPU); where it fails, verify passes run their rows one at a
time. The float32-activation variants of these kernels are reference loops, 30-100x slower; an
exact int8 x int8 product (`torch._int_mm`, activations in two int8 limbs) agreed with float32
barely better (98.5% top-1 against 98.3%) at twice the cost of a one-position pass.

The weights are quantized once, at load, one decoder block at a time: a block's q/k/v and gate/up
are fused (`native_model.block_layer`), each matrix quantized, and the model's own float weights
of the block freed, so float32 never lives beside the quantized copy (a model too large for memory
in float32 can be built block by block: `materialize`). The embedding and lm_head are quantized to
int8 (rows read back through the scales for the embedding lookup); at int4 too, since 4-bit
groups cost them far more agreement with float32 than 4-bit layers do (scripts/quant_report.py).
The model is then the native runtime's only: transformers' forward has no weights left to run.
"""

from __future__ import annotations

import ctypes
import weakref
from collections.abc import Callable

import torch
from transformers import PreTrainedModel

from pld_cli.errors import Unsupported
from pld_cli.runtime.native_model import (
    COVERED,
    Layer,
    NativeWeights,
    adopt,
    block_layer,
    check_covered,
    shape,
)

QUANTIZATIONS = ("int8", "int4")
INT4_GROUP = 32  # inputs per int4 scale and zero point
ACTIVATIONS = torch.bfloat16  # what the int4 kernel takes (and gives) on its fast path
CHECKED_ROWS = 32  # verify passes of up to this many rows are checked (default drafts: 25)

_QUANTIZED: weakref.WeakKeyDictionary[torch.nn.Module, str] = weakref.WeakKeyDictionary()


class RowKernel:
    """A quantized matrix's product, with the guarantee exact verification needs: each row of a
    verify pass gets what a pass over that row alone gives it. The kernels compute rows apart on
    the CPUs measured, but a kernel may switch paths with the number of rows (tiles for larger
    batches on other CPUs), so `check_rows` tests it at load on this machine; where a row's
    result moves, or past the rows checked, a verify pass runs its rows one at a time."""

    rows_checked = 0  # verify passes up to this many rows may run batched (set by check_rows)

    def __call__(self, x: torch.Tensor, alone: bool = False) -> torch.Tensor:
        """x [m, in] @ W.T -> [m, out], in x's dtype; `alone`: each row as if by itself."""
        if alone and x.shape[0] > self.rows_checked:
            return torch.cat([self.product(row) for row in x.split(1)])
        return self.product(x)

    def product(self, x: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    @property
    def shape(self) -> tuple[int, int]:
        raise NotImplementedError

    def stands_alone(self) -> bool:
        """Whether every row of a batch of 2..CHECKED_ROWS rows gets what it gets alone."""
        generator = torch.Generator().manual_seed(0)
        x = torch.randn(CHECKED_ROWS, self.shape[1], generator=generator)
        alone = torch.cat([self.product(row) for row in x.split(1)])
        return all(torch.equal(self.product(x[:m]), alone[:m]) for m in range(2, len(x) + 1))


class Int8Matrix(RowKernel):
    """An [out, in] matrix as int8 values and a bfloat16 scale per output row (symmetric)."""

    def __init__(self, weight: torch.Tensor) -> None:
        # The kernel multiplies by bfloat16 scales: quantize against the rounded ones.
        self.scales = (weight.abs().amax(1).clamp(min=1e-12) / 127).to(torch.bfloat16)
        self.values = int8_rows(weight, self.scales.float()[:, None])
        self.device, self.dtype = weight.device, weight.dtype  # what the embedding lookup gives

    def product(self, x: torch.Tensor) -> torch.Tensor:
        return torch._weight_int8pack_mm(x.to(ACTIVATIONS), self.values, self.scales).to(x.dtype)

    @property
    def shape(self) -> tuple[int, int]:
        return tuple(self.values.shape)

    def __getitem__(self, rows: torch.Tensor) -> torch.Tensor:
        """Rows of the matrix in float (the embedding lookup)."""
        return self.values[rows].to(self.dtype) * self.scales[rows].to(self.dtype)[:, None]

    @property
    def nbytes(self) -> int:
        return self.values.nbytes + self.scales.nbytes


def int8_rows(weight: torch.Tensor, steps: torch.Tensor) -> torch.Tensor:
    """round(weight / steps) in [-127, 127] as int8, a slab of rows at a time, so a large matrix's
    float temporaries stay a few MB and not a copy of it each."""
    out = torch.empty(weight.shape, dtype=torch.int8, device=weight.device)
    slab = max(1, 2**20 // max(1, weight.shape[1]))
    for start in range(0, weight.shape[0], slab):
        rows = slice(start, start + slab)
        out[rows] = torch.round(weight[rows].float() / steps[rows]).clamp_(-127, 127)
    return out


class Int4Matrix(RowKernel):
    """An [out, in] matrix as 4-bit values with a bfloat16 scale and zero point per group of
    INT4_GROUP inputs (asymmetric), packed as the CPU kernel wants them."""

    def __init__(self, weight: torch.Tensor) -> None:
        out, inputs = weight.shape
        if inputs % INT4_GROUP:
            raise Unsupported(f"int4 needs input sizes divisible by {INT4_GROUP}, not {inputs}")
        groups = weight.reshape(out, inputs // INT4_GROUP, INT4_GROUP)
        low, high = groups.amin(-1), groups.amax(-1)
        scales = ((high - low).clamp(min=1e-12) / 15).to(torch.bfloat16).float()
        # The kernel computes (q - 8) * scale + zero: zero is the value of q = 8.
        zeros = (low + 8 * scales).to(torch.bfloat16).float()
        values = torch.round((groups - zeros[..., None]) / scales[..., None] + 8).clamp(0, 15)
        values = values.to(torch.int32).reshape(out, inputs)
        self.packed = torch.ops.aten._convert_weight_to_int4pack_for_cpu(values, 1)
        self.scales_zeros = torch.stack([scales, zeros], -1).transpose(0, 1).to(ACTIVATIONS)
        self.scales_zeros = self.scales_zeros.contiguous()  # [in / group, out, 2]
        self.dtype = weight.dtype

    def product(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.ops.aten._weight_int4pack_mm_for_cpu(
            x.to(ACTIVATIONS), self.packed, INT4_GROUP, self.scales_zeros
        )
        return out.to(self.dtype)

    @property
    def shape(self) -> tuple[int, int]:
        return self.packed.shape[0], self.scales_zeros.shape[0] * INT4_GROUP

    @property
    def nbytes(self) -> int:
        return self.packed.nbytes + self.scales_zeros.nbytes


Matrix = Int8Matrix | Int4Matrix
LAYER_MATRICES = ("qkv", "out", "gate_up", "down")


def quantize_model(
    model: PreTrainedModel,
    kind: str,
    materialize: Callable[[torch.nn.Module], None] = lambda _: None,
) -> NativeWeights:
    """Quantizes the model's weights for the native forward (`kind`: int8 or int4), block by
    block, freeing its float weights as it goes; `materialize(module)` is called on each block,
    then on the embedding, norm and head, before they are read (for a model built on the meta
    device). Unsupported where the native forward does not cover the model."""
    if kind not in QUANTIZATIONS:
        raise ValueError(f"unknown quantization {kind!r}")
    if type(model).__name__ not in COVERED:
        raise Unsupported(f"pld's own forward does not cover {type(model).__name__}")
    if {p.device.type for p in model.parameters()} - {"cpu", "meta"}:
        raise Unsupported("quantized weights run on a CPU only (for now)")
    layer_matrix = Int8Matrix if kind == "int8" else Int4Matrix
    layers = []
    for block in model.model.layers:
        materialize(block)
        layers.append(quantized_layer(block_layer(block), layer_matrix))
        release(block)
    for module in (model.model.embed_tokens, model.model.norm, model.lm_head):
        materialize(module)
    check_covered(model)
    embed = Int8Matrix(model.model.embed_tokens.weight.data)
    tied = model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()
    head = embed if tied else Int8Matrix(model.lm_head.weight.data)
    release(model.model.embed_tokens)
    release(model.lm_head)
    weights = NativeWeights(embed, layers, model.model.norm.weight.data, head, **shape(model))
    mark(model, weights, kind)
    return weights


def mark(model: PreTrainedModel, weights: NativeWeights, kind: str) -> None:
    """Makes quantized `weights` the model's native weights, known as `kind`, their kernels'
    rows checked on this machine."""
    check_rows(weights)
    adopt(model, weights)
    _QUANTIZED[model] = kind


def check_rows(weights: NativeWeights) -> None:
    """Sets each matrix's rows_checked: CHECKED_ROWS where its kernel stands each row alone on
    this machine, else 0 (verify passes then run it row by row). One matrix per kind and shape
    is tried: the kernel's path depends on those and the number of rows."""
    matrices = [getattr(layer, name) for layer in weights.layers for name in LAYER_MATRICES]
    verdicts: dict[tuple, bool] = {}
    for matrix in [*matrices, weights.head]:
        key = (type(matrix), matrix.shape)
        if key not in verdicts:
            verdicts[key] = matrix.stands_alone()
        matrix.rows_checked = CHECKED_ROWS if verdicts[key] else 0


def quantized_layer(layer: Layer, matrix: type[Matrix]) -> Layer:
    for name in LAYER_MATRICES:
        setattr(layer, name, matrix(getattr(layer, name)))
    return layer


def release(module: torch.nn.Module) -> None:
    """Frees a module's float matrices (norm vectors and biases, which the forward reads, stay)."""
    for sub in module.modules():
        if isinstance(sub, torch.nn.Linear | torch.nn.Embedding):
            sub.weight.data = torch.empty(0, dtype=sub.weight.dtype, device=sub.weight.device)
    trim_heap()


def trim_heap() -> None:
    """Hands freed memory back to the system. glibc keeps freed blocks of this size for reuse,
    and the quantized blocks allocated between them pin them: without this the float blocks
    read and freed one by one stay resident (measured: 0.68-1.07 GB of RSS after loading the
    default model at int8, 0.55 GB with it)."""
    if _LIBC is not None:
        _LIBC.malloc_trim(0)


def _glibc():
    try:
        return ctypes.CDLL("libc.so.6")
    except OSError:  # not glibc (macOS, musl): the system keeps its own ways
        return None


_LIBC = _glibc()


def quantization(model: torch.nn.Module) -> str:
    """The model's quantization ("int8", "int4"), or "none"."""
    return _QUANTIZED.get(model, "none")


def weight_bytes(weights: NativeWeights) -> int:
    """Bytes a pass reads: every layer matrix and the head (not the embedding, read by rows)."""
    matrices = [getattr(layer, name) for layer in weights.layers for name in LAYER_MATRICES]
    return sum(m.nbytes for m in [*matrices, weights.head])
