"""Quantized native weights as a flat dict of tensors, and back.

This is what the quantized copy in the user cache holds (loading/quantized_copy.py): a second run
builds the model on the meta device and takes these tensors as they are, without reading float
weights or quantizing again. Names follow the weights' own fields (`layers.3.qkv.values`,
`embed.scales`, `norm`); a tied head is not stored twice.
"""

from __future__ import annotations

from dataclasses import fields

import torch
from transformers import PreTrainedModel

from pld_cli.runtime.clib.tables import MATRICES
from pld_cli.runtime.native.model import Layer, NativeWeights, shape
from pld_cli.runtime.native.quantized.embedding import GroupedRows
from pld_cli.runtime.native.quantized.grouped import GroupedMatrix
from pld_cli.runtime.native.quantized.parts import GroupedParts
from pld_cli.runtime.native.quantized.quantize import layer_matrix, mark, require_kernels
from pld_cli.runtime.native.quantized.scheme import Scheme

FORMAT = "7"  # bumped whenever the tensors' layout changes, so an old copy is not read


def flatten(weights: NativeWeights) -> dict[str, torch.Tensor]:
    state = {"norm": weights.norm, **matrix_state("embed", weights.embed)}
    if weights.head is not weights.embed:
        state.update(matrix_state("head", weights.head))
    for i, layer in enumerate(weights.layers):
        for field in fields(Layer):
            value, name = getattr(layer, field.name), f"layers.{i}.{field.name}"
            if isinstance(value, torch.Tensor):
                state[name] = value
            elif value is not None:
                state.update(matrix_state(name, value))
    return state


def matrix_state(name: str, matrix) -> dict[str, torch.Tensor]:
    if isinstance(matrix, GroupedParts):  # a GGUF's, whose weights are never stored
        raise TypeError(f"{name}: a matrix in parts has no stored form")
    return {f"{name}.{k}": v for k, v in vars(matrix).items() if isinstance(v, torch.Tensor)}


def restore(
    model: PreTrainedModel, state: dict[str, torch.Tensor], scheme: Scheme
) -> NativeWeights:
    """The weights `flatten` gave, made `model`'s native weights (model on the meta device: its
    own parameters become empty CPU tensors, as quantize_model leaves them)."""
    dtype = state["norm"].dtype
    scheme = Scheme(scheme)
    require_kernels(scheme)
    matrix = layer_matrix(scheme)
    layers = []
    for i in range(len(model.model.layers)):
        values = {}
        for field in fields(Layer):
            name = f"layers.{i}.{field.name}"
            values[field.name] = take(
                state, name, matrix if field.name in MATRICES else None, dtype
            )
        layers.append(Layer(**values))
    head = take(state, "head", GroupedMatrix, dtype)
    embed = take(state, "embed", GroupedMatrix if head is None else GroupedRows, dtype)
    head = head or embed
    emptied(model)
    weights = NativeWeights(embed, layers, state["norm"], head, **shape(model))
    mark(model, weights, scheme)
    return weights


def emptied(model: PreTrainedModel) -> None:
    """The model's parameters (on the meta device) made empty CPU tensors, as quantize_model
    leaves them: its native weights are held elsewhere."""
    for module in model.modules():
        for name, parameter in list(module.named_parameters(recurse=False)):
            empty = torch.empty(0, dtype=parameter.dtype)
            module._parameters[name] = torch.nn.Parameter(empty, requires_grad=False)


def take(state: dict, name: str, matrix: type | None, dtype: torch.dtype):
    """A tensor, a matrix rebuilt from its tensors, or None where the state has neither."""
    if matrix is None:
        return state.get(name)
    parts = {key[len(name) + 1 :]: v for key, v in state.items() if key.startswith(f"{name}.")}
    if not parts:
        return None
    rebuilt = matrix.__new__(matrix)
    vars(rebuilt).update(parts, device=torch.device("cpu"), dtype=dtype)
    return rebuilt
