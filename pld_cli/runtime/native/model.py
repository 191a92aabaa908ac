"""pld's own forward for the Llama family, over the weights transformers loaded.

A transformers forward spends much of a small CPU pass outside the math (dispatch, masks built per
layer, keys repeated per query head), and its kernel choices are fixed in code. The families people
run locally share one shape: RMSNorm, rotary q/k (with optional q/k bias or q/k RMSNorm), grouped KV
heads, a gated SiLU MLP. Those are covered here, as gpt-fast and llama.cpp do, and nothing else:
`native_weights` refuses any other model with a reason (`Unsupported`).

The weights are the loaded model's own tensors. q/k/v and gate/up are fused into one matrix each so
a pass streams each layer's input once; the original Linear modules are then pointed at row slices
of the fused matrix (row slices of a row-major matrix are contiguous), so transformers' forward
still runs on the same memory and no second copy is kept.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from transformers import PreTrainedModel
from transformers.activations import ACT2FN

from pld_cli.errors import Unsupported
from pld_cli.runtime.kernels import padded_linear
from pld_cli.runtime.native.quantized.scheme import QuantizedMatrix, Scheme

LayerMatrix = torch.Tensor | QuantizedMatrix  # float, or quantized (quantized/)

COVERED = ("LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM")
# Rope types whose tables depend on the position alone; "dynamic" and "longrope" rescale with the
# sequence length of each pass, which a table computed once cannot follow.
STATIC_ROPE = ("default", "linear", "llama3", "yarn")


@dataclass
class Layer:
    """One decoder layer's tensors: [out, in] matrices, [out] biases (None without), [dim] norms."""

    attention_norm: torch.Tensor  # [hidden]
    qkv: LayerMatrix  # [(heads + 2 kv_heads) * head_dim, hidden]
    qkv_bias: torch.Tensor | None
    q_norm: torch.Tensor | None  # [head_dim] (Qwen3)
    k_norm: torch.Tensor | None
    out: LayerMatrix  # [hidden, heads * head_dim]
    out_bias: torch.Tensor | None
    mlp_norm: torch.Tensor  # [hidden]
    gate_up: LayerMatrix  # [2 * intermediate, hidden]
    gate_up_bias: torch.Tensor | None
    down: LayerMatrix  # [hidden, intermediate]
    down_bias: torch.Tensor | None


@dataclass
class NativeWeights:
    embed: LayerMatrix  # [vocab, hidden], read by rows
    layers: list[Layer]
    norm: torch.Tensor  # [hidden]
    head: LayerMatrix  # [vocab, hidden] (the embedding itself when tied)
    heads: int
    kv_heads: int
    head_dim: int
    scaling: float
    eps: float
    act: torch.nn.Module
    scheme: Scheme | None = None  # None: float weights


# Built once per model: a second runtime (a larger cache) reuses the fused tensors.
_BUILT: weakref.WeakKeyDictionary[torch.nn.Module, NativeWeights] = weakref.WeakKeyDictionary()


def native_weights(model: PreTrainedModel) -> NativeWeights:
    """The model's weights laid out for the native forward, or Unsupported."""
    if model not in _BUILT:
        check_covered(model)
        _BUILT[model] = build(model)
    return _BUILT[model]


def check_covered(model: PreTrainedModel) -> None:
    name = type(model).__name__
    if name not in COVERED:
        raise Unsupported(f"{name} is not a covered family ({', '.join(COVERED)})")
    config = model.config
    rope = getattr(model.model.rotary_emb, "rope_type", "default")
    if rope not in STATIC_ROPE:
        raise Unsupported(f"rope type {rope!r} rescales per pass")
    devices = {p.device for p in model.parameters()}
    if len(devices) != 1 or next(iter(devices)).type == "meta":
        raise Unsupported("the weights are spread over several devices or offloaded")
    if getattr(model, "hf_quantizer", None) is not None:
        raise Unsupported("quantized weights")
    if config.hidden_act not in ("silu", "swish"):
        raise Unsupported(f"activation {config.hidden_act!r}")


def sliding_window(config) -> int | None:
    """The attention window some layer uses, or None where every layer sees the whole context."""
    window = getattr(config, "sliding_window", None)
    types = getattr(config, "layer_types", None)
    if window is None or (types is not None and "sliding_attention" not in types):
        return None
    return window


def build(model: PreTrainedModel) -> NativeWeights:
    embed, norm = model.model.embed_tokens.weight.data, model.model.norm.weight.data
    layers = [block_layer(block) for block in model.model.layers]
    return NativeWeights(embed, layers, norm, model.lm_head.weight.data, **shape(model))


def block_layer(block: torch.nn.Module) -> Layer:
    """One decoder block's tensors, q/k/v and gate/up fused."""
    attn, mlp = block.self_attn, block.mlp
    qkv, qkv_bias = fuse([attn.q_proj, attn.k_proj, attn.v_proj])
    gate_up, gate_up_bias = fuse([mlp.gate_proj, mlp.up_proj])
    q_norm, k_norm = getattr(attn, "q_norm", None), getattr(attn, "k_norm", None)
    return Layer(
        attention_norm=block.input_layernorm.weight.data,
        qkv=qkv,
        qkv_bias=qkv_bias,
        q_norm=None if q_norm is None else q_norm.weight.data,
        k_norm=None if k_norm is None else k_norm.weight.data,
        out=attn.o_proj.weight.data,
        out_bias=bias(attn.o_proj),
        mlp_norm=block.post_attention_layernorm.weight.data,
        gate_up=gate_up,
        gate_up_bias=gate_up_bias,
        down=mlp.down_proj.weight.data,
        down_bias=bias(mlp.down_proj),
    )


def shape(model: PreTrainedModel) -> dict:
    """NativeWeights' fields that come from the config: heads, sizes, norm epsilon, activation."""
    first, config = model.model.layers[0].self_attn, model.config
    return dict(
        heads=config.num_attention_heads,
        kv_heads=config.num_key_value_heads,
        head_dim=first.head_dim,
        scaling=first.scaling,
        eps=config.rms_norm_eps,
        act=ACT2FN[config.hidden_act],
    )


def bias(linear: torch.nn.Linear) -> torch.Tensor | None:
    return None if linear.bias is None else linear.bias.data


def fuse(linears: list[torch.nn.Linear]) -> tuple[torch.Tensor, torch.Tensor | None]:
    """One [sum of outs, in] matrix (and bias) from several Linears over the same input; each
    Linear's parameters become row slices of it, so the originals are freed."""
    biases = [linear.bias for linear in linears]
    if len({b is None for b in biases}) > 1:
        raise Unsupported("projections with and without bias side by side")
    weight = torch.cat([linear.weight.data for linear in linears])
    fused_bias = None if biases[0] is None else torch.cat([b.data for b in biases])
    row = 0
    for linear in linears:
        rows = linear.weight.shape[0]
        linear.weight.data = weight[row : row + rows]
        if fused_bias is not None:
            linear.bias.data = fused_bias[row : row + rows]
        row += rows
    return weight, fused_bias


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """transformers' LlamaRMSNorm, step for step (the mean of squares in float32)."""
    h = x.to(torch.float32)
    h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)
    return weight * h.to(x.dtype)


def linear(
    x: torch.Tensor,
    weight: LayerMatrix,
    bias: torch.Tensor | None,
    padded: bool,
    rowwise: bool = False,
) -> torch.Tensor:
    """x [m, in] @ weight.T (+ bias) -> [m, out], plain or in the padded layout (../kernels.py); a
    quantized weight runs its own kernel, each row as if it were the only one where `rowwise` (a
    float one then runs row by row)."""
    if not isinstance(weight, torch.Tensor):
        out = weight(x, rowwise)
        return out if bias is None else out + bias
    if rowwise:  # a float matrix among quantized ones (a GGUF's F32 tensor): a row at a time
        return torch.cat([F.linear(row, weight, bias) for row in x.split(1)])
    return padded_linear(x, weight, bias) if padded else F.linear(x, weight, bias)


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotary embedding as transformers applies it: x [q, heads, d], cos/sin [q, 1, d]."""
    x1, x2 = x.chunk(2, -1)
    return x * cos + torch.cat([-x2, x1], -1) * sin


def adopt(model: PreTrainedModel, weights: NativeWeights) -> None:
    """Makes `weights` (built elsewhere: quantized/quantize.py) the model's native weights."""
    _BUILT[model] = weights


def scheme_of(model: PreTrainedModel) -> Scheme | None:
    """The quantization of the model's native weights; None for float weights or none built."""
    weights = _BUILT.get(model)
    return None if weights is None else weights.scheme
