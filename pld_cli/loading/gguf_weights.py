"""A GGUF's weights straight into pld's native forward: each tensor's blocks, read from the
memory-mapped file, become a grouped matrix in its own exact layout (gguf_blocks.py), written
into its final arrays by pld's C library (gguf_unpack.py; numpy's decoders where it cannot); no
float copy of a quantized tensor is made, in memory or on disk. Norms, biases and float tensors
(F32, F16, BF16) stay float32.

The model object around them is built from the GGUF's config on the meta device (its parameters
left empty, as a quantized load leaves them): the native runtime runs on these weights alone.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from gguf import quants
from transformers import PreTrainedModel

from pld_cli.loading.gguf_blocks import FLOATS, LAYOUTS, Blocks, blocks, layout_bytes, stacked
from pld_cli.loading.gguf_file import GGUFFile, Tensor
from pld_cli.loading.gguf_unpack import Part, unpacked, unpacks
from pld_cli.runtime.native.model import (
    Layer,
    LayerMatrix,
    NativeWeights,
    check_covered,
    shape,
)
from pld_cli.runtime.native.quantized.grouped import GroupedMatrix
from pld_cli.runtime.native.quantized.quantize import (
    mark,
    require_family,
    require_kernels,
    trim_heap,
)
from pld_cli.runtime.native.quantized.scheme import Scheme
from pld_cli.runtime.native.quantized.state import emptied

PERMUTED = ("llama",)  # llama.cpp's converter interleaves q/k rows for these architectures
ARCHITECTURES = ("llama", "qwen2", "qwen3")  # the GGUF architectures pld's own forward covers
Heads = list[int | None] | None  # per tensor of a fused matrix: its heads where rows are unpermuted


class GGUFTensors:
    """A GGUF file's tensors by name, read lazily from the mapped file."""

    def __init__(self, path: Path) -> None:
        self.file = GGUFFile(path)
        self.tensors = self.file.tensors
        self.architecture = self.file.metadata.get("general.architecture", "")

    def __contains__(self, name: str) -> bool:
        return name in self.tensors

    def vector(self, name: str) -> torch.Tensor | None:
        """A float tensor (a norm, a bias) as float32; None where the file has none."""
        tensor = self.tensors.get(name)
        if tensor is None:
            return None
        vector = torch.from_numpy(quants.dequantize(tensor.data, tensor.type).copy())
        self.file.release(tensor)
        return vector.flatten()

    def matrix(self, name: str) -> Blocks | torch.Tensor:
        """A matrix [out, in]: its blocks, or float32 where the file keeps it as floats."""
        tensor = self.tensors[name]
        inputs, rows = (int(n) for n in tensor.shape[:2])
        if tensor.type in FLOATS:
            return self.vector(name).reshape(rows, inputs)
        found = blocks(tensor.data, tensor.type, rows, inputs)
        self.file.release(tensor)
        return found

    def matrices(self, specs: list[tuple[list[str], Heads]]) -> list[LayerMatrix]:
        """Matrices, each (names, heads) of tensors over one input, one under the other (q/k/v,
        gate/up; or one alone), the rows of a part with a head count (q, k: heads not None) put
        back in transformers' order. Those whose types the C library decodes are written by it
        into their final arrays in one call (a layer's at once); the others are built by numpy's
        decoders (a float part among them)."""
        parts = [self.parts(names, heads) for names, heads in specs]
        written = [i for i, part in enumerate(parts) if unpacks(t.type for t, _ in part)]
        matrices = dict(zip(written, unpacked([parts[i] for i in written]), strict=True))
        for i in written:
            for tensor, _ in parts[i]:
                self.file.release(tensor)
        return [matrices[i] if i in matrices else self.decoded(*s) for i, s in enumerate(specs)]

    def parts(self, names: list[str], heads: Heads) -> list[Part]:
        """Each tensor with its row order (None: as stored)."""
        tensors = [self.tensors[name] for name in names]
        heads = heads or [None] * len(names)
        return [(t, order(t, count)) for t, count in zip(tensors, heads, strict=True)]

    def decoded(self, names: list[str], heads: Heads) -> LayerMatrix:
        """The matrix of `matrices` by numpy's decoders."""
        parts = [self.matrix(name) for name in names]
        heads = heads or [None] * len(names)
        parts = [p if h is None else unpermuted(p, h) for p, h in zip(parts, heads, strict=True)]
        return fused(parts) if len(parts) > 1 else grouped(parts[0])


def gguf_weights(model: PreTrainedModel, path: Path) -> NativeWeights:
    """The GGUF's weights as `model`'s native weights (model: built on the meta device from the
    GGUF's config); Unsupported where the native forward or the kernels do not cover it."""
    require_kernels(Scheme.GGUF)
    require_family(model)
    file = GGUFTensors(path)
    config = model.config
    permute = file.architecture in PERMUTED
    layers = [gguf_layer(file, i, config, permute) for i in range(config.num_hidden_layers)]
    names = ["token_embd.weight", *(["output.weight"] if "output.weight" in file else [])]
    embed, *head = file.matrices([([name], None) for name in names])
    head = head[0] if head else embed
    emptied(model)
    check_covered(model)
    weights = NativeWeights(embed, layers, file.vector("output_norm.weight"), head, **shape(model))
    mark(model, weights, Scheme.GGUF)
    trim_heap()  # the per-tensor temporaries, handed back
    return weights


def gguf_layer(file: GGUFTensors, i: int, config, permute: bool) -> Layer:
    """Layer i's tensors, q/k/v and gate/up stacked, q/k rows in transformers' order."""
    prefix = f"blk.{i}."
    heads = [config.num_attention_heads, config.num_key_value_heads, None] if permute else None
    biases = [file.vector(f"{prefix}attn_{x}.bias") for x in "qkv"]
    qkv, out, gate_up, down = file.matrices(
        [
            ([f"{prefix}attn_{x}.weight" for x in "qkv"], heads),
            ([f"{prefix}attn_output.weight"], None),
            ([f"{prefix}ffn_{x}.weight" for x in ("gate", "up")], None),
            ([f"{prefix}ffn_down.weight"], None),
        ]
    )
    return Layer(
        attention_norm=file.vector(f"{prefix}attn_norm.weight"),
        qkv=qkv,
        qkv_bias=None if biases[0] is None else torch.cat(biases),
        q_norm=file.vector(f"{prefix}attn_q_norm.weight"),
        k_norm=file.vector(f"{prefix}attn_k_norm.weight"),
        out=out,
        out_bias=file.vector(f"{prefix}attn_output.bias"),
        mlp_norm=file.vector(f"{prefix}ffn_norm.weight"),
        gate_up=gate_up,
        gate_up_bias=None,
        down=down,
        down_bias=file.vector(f"{prefix}ffn_down.bias"),
    )


def unpermuted(matrix: Blocks | torch.Tensor, heads: int) -> Blocks | torch.Tensor:
    """q or k rows back in transformers' order: llama.cpp's converter interleaves each head's
    two rotary halves (as transformers' GGUF loader reverses it, row by row)."""
    rows = matrix.values.shape[0] if isinstance(matrix, Blocks) else matrix.shape[0]
    order = unpermuting(rows, heads)
    if isinstance(matrix, torch.Tensor):
        return matrix[order]
    parts = (matrix.values[order], matrix.scales[order], matrix.offsets[order])
    return Blocks(*parts, matrix.bits)


def order(tensor: Tensor, heads: int | None) -> torch.Tensor | None:
    """A tensor's rows in transformers' order (`unpermuting`) where it has a head count."""
    return None if heads is None else unpermuting(int(tensor.shape[1]), heads)


def unpermuting(rows: int, heads: int) -> torch.Tensor:
    """The order of `unpermuted`: row i of the result is the file's row order[i]."""
    return torch.arange(rows).reshape(heads, rows // heads // 2, 2).transpose(1, 2).flatten()


def fused(parts: list[Blocks | torch.Tensor]) -> LayerMatrix:
    """Matrices over one input, one under the other: grouped where all are quantized, else
    float32 (the quantized ones dequantized exactly)."""
    if all(isinstance(part, Blocks) for part in parts):
        return grouped(stacked(parts))
    return torch.cat(
        [grouped(part).dequantized() if isinstance(part, Blocks) else part for part in parts]
    )


def grouped(matrix: Blocks | torch.Tensor) -> LayerMatrix:
    if isinstance(matrix, torch.Tensor):
        return matrix
    return GroupedMatrix(matrix.values, matrix.scales, matrix.offsets, matrix.bits)


def weights_bytes(path: Path) -> int:
    """Bytes the file's weights take in pld's layouts, for the memory check before loading."""
    tensors = GGUFFile.opened(path).tensors.values()
    return sum(layout_bytes(t.type, int(np.prod(t.shape))) for t in tensors)


def blocks_refusal(path: Path) -> str | None:
    """Why this GGUF's own blocks cannot run in pld's kernels (its architecture, or a tensor type
    without an exact layout), read from its header; None where they can."""
    file = GGUFFile.opened(path)
    architecture = file.metadata.get("general.architecture", "unnamed")
    if architecture not in ARCHITECTURES:
        covered = ", ".join(ARCHITECTURES)
        return f"pld's own forward does not cover {architecture} GGUFs (it covers {covered})"
    kinds = {tensor.type for tensor in file.tensors.values()}
    unmapped = sorted(kind.name for kind in kinds if kind not in LAYOUTS and kind not in FLOATS)
    if unmapped:
        return f"its {', '.join(unmapped)} tensors have no exact layout in pld"
    return None
