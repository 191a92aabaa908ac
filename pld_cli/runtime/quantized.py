"""Weight-only quantization for the native forward: int8 (in groups, or per output channel where
pld's kernel is not built) and int4 in groups.

The layers' matrices run kernels whose rows stand alone: int8 in groups through pld's VNNI kernel
where it is built here (grouped_int8.py), else torch's weight-only kernels (quantized_matrices.py),
so pld's output equals `--no-pld`'s by construction (attention and the norms stay float32, as in
the float32 forward). torch's exact int8 x int8 product (`torch._int_mm`, activations in two
int8 limbs) cost twice a one-position pass; pld's own kernel does that product in groups at the
cost of torch's bfloat16 one.

The weights are quantized once, at load, one decoder block at a time: a block's q/k/v and gate/up
are fused (`native_model.block_layer`), each matrix quantized, and the model's own float weights
of the block freed, so float32 never lives beside the quantized copy (a model too large for memory
in float32 can be built block by block: `materialize`). The embedding and lm_head, at either
width, are int8 in groups of 32: through pld's kernel where it is built (float32 logits, rows
standing alone), else torch's int8 kernel with an exact argmax (quantized_head.py), since its
bfloat16 logits alone had cost more agreement with float32 than the layers' 4-bit groups did. The
model is then the native runtime's only: transformers' forward has no weights left to run.
"""

from __future__ import annotations

import ctypes
import weakref
from collections.abc import Callable

import torch
from transformers import PreTrainedModel

from pld_cli.errors import Unsupported
from pld_cli.runtime import grouped_int8
from pld_cli.runtime.grouped_int8 import GroupedInt8Matrix
from pld_cli.runtime.native_model import (
    COVERED,
    Layer,
    NativeWeights,
    adopt,
    block_layer,
    check_covered,
    shape,
)
from pld_cli.runtime.quantized_head import GroupedRows, QuantizedHead
from pld_cli.runtime.quantized_matrices import CHECKED_ROWS, Int4Matrix, Int8Matrix, Matrix

QUANTIZATIONS = ("int8", "int4")

_QUANTIZED: weakref.WeakKeyDictionary[torch.nn.Module, str] = weakref.WeakKeyDictionary()

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
    matrix = layer_matrix(kind)
    layers = []
    for block in model.model.layers:
        materialize(block)
        layers.append(quantized_layer(block_layer(block), matrix))
        release(block)
    for module in (model.model.embed_tokens, model.model.norm, model.lm_head):
        materialize(module)
    check_covered(model)
    tied = model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()
    head = head_matrix()(model.lm_head.weight.data)
    embed = head if tied else GroupedRows(model.model.embed_tokens.weight.data)
    release(model.model.embed_tokens)
    release(model.lm_head)
    weights = NativeWeights(embed, layers, model.model.norm.weight.data, head, **shape(model))
    mark(model, weights, kind)
    return weights


def layer_matrix(kind: str) -> type[Matrix | GroupedInt8Matrix]:
    """The layers' matrices: int4 in groups (torch's kernel); int8 in groups of 32 where pld's
    VNNI kernel is built here (grouped_int8.py), else per output row (torch's kernel)."""
    if kind == "int4":
        return Int4Matrix
    return GroupedInt8Matrix if grouped_int8.available() else Int8Matrix


def head_matrix() -> type[QuantizedHead | GroupedInt8Matrix]:
    """The head (and a tied embedding): int8 in groups through pld's kernel where it is built
    here, its rows standing alone like the layers'; else torch's int8 kernel with the exact
    argmax (quantized_head.py), whose bfloat16 logits alone would move the top token."""
    return GroupedInt8Matrix if grouped_int8.available() else QuantizedHead


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


def quantized_layer(layer: Layer, matrix: type[Matrix | GroupedInt8Matrix]) -> Layer:
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
