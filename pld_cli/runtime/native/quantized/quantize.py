"""Weight-only quantization for the native forward: int8 in groups of 32 (pld's kernels) and int4
in groups of 32 (torch's kernel).

The layers run kernels whose rows stand alone (`grouped.py`; int4: torch's, `matrices.py`), so
pld's output equals `--no-pld`'s by construction; attention and the norms stay float32. Weights
are quantized once, at load, a decoder block at a time (fused by `../model.py`'s `block_layer`),
each block's float weights freed before the next, so float32 never lives beside the quantized copy
(`materialize` builds a model too large for float32 block by block). The embedding and head are
int8 in groups of 32 through pld's kernel under either scheme (torch's int8 kernel has bfloat16
logits, which alone cost more agreement than the layers' 4-bit groups). So a quantized model needs
pld's C library, of whichever variant this CPU runs: where there is none the load is refused with
the reason, never run in another format. transformers' forward has no weights left: the model is
the native runtime's only.
"""

from __future__ import annotations

import ctypes
from collections import Counter
from collections.abc import Callable

import torch
from transformers import PreTrainedModel

from pld_cli.errors import Unsupported
from pld_cli.runtime.clib import library
from pld_cli.runtime.clib.tables import MATRICES
from pld_cli.runtime.native.model import (
    COVERED,
    Layer,
    NativeWeights,
    adopt,
    block_layer,
    check_covered,
    shape,
)
from pld_cli.runtime.native.quantized import grouped
from pld_cli.runtime.native.quantized.embedding import GroupedRows
from pld_cli.runtime.native.quantized.grouped import GROUP, GroupedMatrix
from pld_cli.runtime.native.quantized.matrices import CHECKED_ROWS, Int4Matrix
from pld_cli.runtime.native.quantized.parts import GroupedParts
from pld_cli.runtime.native.quantized.scheme import Scheme

# what quantize_model makes of float weights (GGUF: a file's own blocks, loading/gguf_weights.py)
QUANTIZERS = (Scheme.INT8, Scheme.INT4)


def quantize_model(
    model: PreTrainedModel,
    scheme: Scheme,
    materialize: Callable[[torch.nn.Module], None] = lambda _: None,
) -> NativeWeights:
    """Quantizes the model's weights for the native forward to `scheme`, block by
    block, freeing its float weights as it goes; `materialize(module)` is called on each block,
    then on the embedding, norm and head, before they are read (for a model built on the meta
    device). Unsupported where the native forward does not cover the model."""
    scheme = Scheme(scheme)
    if scheme not in QUANTIZERS:
        raise Unsupported(f"--quantize {scheme} takes a .gguf file's own blocks, not float weights")
    require_kernels(scheme)
    require_family(model)
    if {p.device.type for p in model.parameters()} - {"cpu", "meta"}:
        raise Unsupported("quantized weights run on a CPU only (for now)")
    matrix = layer_matrix(scheme)
    layers = []
    for block in model.model.layers:
        materialize(block)
        layers.append(quantized_layer(block_layer(block), matrix))
        release(block)
    for module in (model.model.embed_tokens, model.model.norm, model.lm_head):
        materialize(module)
    check_covered(model)
    tied = model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()
    head = GroupedMatrix.quantized(model.lm_head.weight.data)
    embed = head if tied else GroupedRows(model.model.embed_tokens.weight.data)
    release(model.model.embed_tokens)
    release(model.lm_head)
    weights = NativeWeights(embed, layers, model.model.norm.weight.data, head, **shape(model))
    mark(model, weights, scheme)
    return weights


def require_kernels(scheme: Scheme) -> None:
    """Unsupported, with the reason, where pld's C kernels that `scheme` runs are not here."""
    if not grouped.available():
        why = library.unavailable()
        raise Unsupported(f"{scheme} runs pld's C kernels, which are not here: {why}")


def require_family(model: PreTrainedModel) -> None:
    """Unsupported where the native forward does not cover the model's family: asked before any
    weight is read (check_covered, the full check, needs them in place)."""
    if type(model).__name__ not in COVERED:
        raise Unsupported(f"pld's own forward does not cover {type(model).__name__}")


def layer_matrix(scheme: Scheme) -> type[Int4Matrix | GroupedMatrix]:
    """The layers' matrices: int8 in groups (pld's kernel, grouped.py) or int4 in groups
    (torch's kernel)."""
    return Int4Matrix if scheme is Scheme.INT4 else GroupedMatrix


def layout(scheme: Scheme) -> str:
    """The layers' format under `scheme` (int8 or int4), as a user reads it in a label."""
    return f"{scheme} in groups of {GROUP}"


def layouts(weights: NativeWeights) -> str:
    """The layer matrices' formats and how many of each, as --verbose lists them: 4-bit in
    groups of 32 (60), 8-bit in groups of 16 (30)."""
    kinds = Counter(kind(getattr(layer, name)) for layer in weights.layers for name in MATRICES)
    return ", ".join(f"{what} ({count})" for what, count in kinds.items())


def kind(matrix) -> str:
    if isinstance(matrix, GroupedParts):
        return " + ".join(kind(part) for part in matrix.parts)
    if isinstance(matrix, GroupedMatrix):
        form = ", K-quant scales" if matrix.super > 1 else ""  # tiles of their own
        return f"{matrix.bits}-bit in groups of {matrix.group}{form}"
    if isinstance(matrix, Int4Matrix):
        return layout(Scheme.INT4)
    return str(matrix.dtype).removeprefix("torch.")


def mark(model: PreTrainedModel, weights: NativeWeights, scheme: Scheme) -> None:
    """Makes quantized `weights` the model's native weights, of `scheme`, their kernels' rows
    checked on this machine."""
    check_rows(weights)
    weights.scheme = scheme
    adopt(model, weights)


def check_rows(weights: NativeWeights) -> None:
    """Sets each matrix's rows_checked: CHECKED_ROWS where its kernel stands each row alone on
    this machine, else 0 (verify passes then run it row by row). One matrix per kind and shape
    is tried: the kernel's path depends on those and the number of rows. Float matrices (a
    GGUF's F32 or F16 tensors) are left out: verify passes run them in the torch forward."""
    matrices = [getattr(layer, name) for layer in weights.layers for name in MATRICES]
    verdicts: dict[tuple, bool] = {}
    for matrix in [*matrices, weights.head]:
        if isinstance(matrix, torch.Tensor):
            continue
        key = (kind(matrix), matrix.shape)
        if key not in verdicts:
            verdicts[key] = matrix.computes_rowwise()
        matrix.rows_checked = CHECKED_ROWS if verdicts[key] else 0


def quantized_layer(layer: Layer, matrix: type[Int4Matrix | GroupedMatrix]) -> Layer:
    for name in MATRICES:
        setattr(layer, name, matrix.quantized(getattr(layer, name)))
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
    read and freed one by one stay resident (docs/design-measurements.md)."""
    if _LIBC is not None:
        _LIBC.malloc_trim(0)


def _glibc():
    try:
        return ctypes.CDLL("libc.so.6")
    except OSError:  # not glibc (macOS, musl): the system keeps its own ways
        return None


_LIBC = _glibc()


def weight_bytes(weights: NativeWeights) -> int:
    """Bytes a pass reads: every layer matrix and the head (not the embedding, read by rows)."""
    matrices = [getattr(layer, name) for layer in weights.layers for name in MATRICES]
    return sum(m.nbytes for m in [*matrices, weights.head])
