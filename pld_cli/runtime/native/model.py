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

COVERED = (
    "LlamaForCausalLM",
    "MistralForCausalLM",
    "Qwen2ForCausalLM",
    "Qwen3ForCausalLM",
    "Gemma3ForCausalLM",
)
ACTIVATIONS = ("silu", "swish", "gelu_pytorch_tanh")  # the C decoder's: decoder.h's Activation
SHIFTED_NORMS = ("Gemma3RMSNorm",)  # RMSNorms that scale by (1 + weight)
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
    # Gemma 3: RMSNorms of the attention's and the MLP's outputs before each residual sum
    post_attention_norm: torch.Tensor | None = None
    post_mlp_norm: torch.Tensor | None = None
    window: int | None = None  # the slots a row sees, itself included (None: all before it)
    rope: int = 0  # which of the model's rotary tables (rope.py's `rope_kinds`) the layer takes


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
    embed_scale: float = 1.0  # Gemma 3: embedding rows times sqrt(hidden), in float32

    def embedded(self, ids: torch.Tensor) -> torch.Tensor:
        """The embedding's rows for ids [n]: [n, hidden], scaled as the family scales them."""
        rows = self.embed[ids]
        if self.embed_scale == 1.0:
            return rows
        return rows * torch.tensor(self.embed_scale, dtype=rows.dtype, device=rows.device)


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
    ropes = getattr(model.model.rotary_emb, "rope_type", "default")
    for rope in ropes.values() if isinstance(ropes, dict) else [ropes]:  # Gemma 3: per layer type
        if rope not in STATIC_ROPE:
            raise Unsupported(f"rope type {rope!r} rescales per pass")
    devices = {p.device for p in model.parameters()}
    if len(devices) != 1 or next(iter(devices)).type == "meta":
        raise Unsupported("the weights are spread over several devices or offloaded")
    if getattr(model, "hf_quantizer", None) is not None:
        raise Unsupported("quantized weights")
    if activation(config) not in ACTIVATIONS:
        raise Unsupported(f"activation {activation(config)!r}")
    for name in ("final_logit_softcapping", "attn_logit_softcapping"):
        if getattr(config, name, None) is not None:
            raise Unsupported(f"{name} (Gemma 2's; Gemma 3 has none)")
    if getattr(config, "use_bidirectional_attention", False):
        raise Unsupported("bidirectional attention")


def activation(config) -> str:
    """The MLP's gate activation (Gemma names it hidden_activation)."""
    return getattr(config, "hidden_activation", None) or config.hidden_act


def layer_windows(config) -> list[int | None]:
    """Each layer's attention window where the family gives windows layer by layer (Gemma 3:
    sliding layers between global ones), else None for every layer: the runtime then refuses a
    model-wide window under its context (`sliding_window`)."""
    types = getattr(config, "layer_types", None)
    if getattr(config, "model_type", "") != "gemma3_text" or types is None:
        return [None] * config.num_hidden_layers
    return [config.sliding_window if t == "sliding_attention" else None for t in types]


def layer_ropes(config) -> list[int]:
    """Each layer's rotary table: its index in rope.py's `rope_kinds`."""
    from pld_cli.runtime.native.rope import rope_kinds

    kinds, types = rope_kinds(config), getattr(config, "layer_types", None)
    if kinds == [None]:
        return [0] * config.num_hidden_layers
    return [kinds.index(t) for t in types]


def sliding_window(config) -> int | None:
    """The attention window some layer uses, or None where every layer sees the whole context."""
    window = getattr(config, "sliding_window", None)
    types = getattr(config, "layer_types", None)
    if window is None or (types is not None and "sliding_attention" not in types):
        return None
    return window


def build(model: PreTrainedModel) -> NativeWeights:
    embed, norm = model.model.embed_tokens.weight.data, norm_weight(model.model.norm)
    layers = [block_layer(block) for block in model.model.layers]
    return NativeWeights(embed, layers, norm, model.lm_head.weight.data, **shape(model))


def block_layer(block: torch.nn.Module) -> Layer:
    """One decoder block's tensors, q/k/v and gate/up fused; Gemma 3's norms as plain RMSNorm
    weights (1 + its weight) and its pre-MLP norm in the MLP norm's place."""
    attn, mlp = block.self_attn, block.mlp
    qkv, qkv_bias = fuse([attn.q_proj, attn.k_proj, attn.v_proj])
    gate_up, gate_up_bias = fuse([mlp.gate_proj, mlp.up_proj])
    q_norm, k_norm = getattr(attn, "q_norm", None), getattr(attn, "k_norm", None)
    gemma = hasattr(block, "pre_feedforward_layernorm")
    post_mlp = getattr(block, "post_feedforward_layernorm", None)
    config, index = attn.config, attn.layer_idx
    return Layer(
        attention_norm=norm_weight(block.input_layernorm),
        qkv=qkv,
        qkv_bias=qkv_bias,
        q_norm=norm_weight(q_norm),
        k_norm=norm_weight(k_norm),
        out=attn.o_proj.weight.data,
        out_bias=bias(attn.o_proj),
        mlp_norm=norm_weight(
            block.pre_feedforward_layernorm if gemma else block.post_attention_layernorm
        ),
        gate_up=gate_up,
        gate_up_bias=gate_up_bias,
        down=mlp.down_proj.weight.data,
        down_bias=bias(mlp.down_proj),
        post_attention_norm=norm_weight(block.post_attention_layernorm) if gemma else None,
        post_mlp_norm=norm_weight(post_mlp),
        window=layer_windows(config)[index],
        rope=layer_ropes(config)[index],
    )


def norm_weight(norm: torch.nn.Module | None) -> torch.Tensor | None:
    """An RMSNorm's weight as a plain RMSNorm applies it: Gemma's (1 + weight), in float32."""
    if norm is None:
        return None
    if type(norm).__name__ in SHIFTED_NORMS:
        return 1.0 + norm.weight.data.float()
    return norm.weight.data


def shape(model: PreTrainedModel) -> dict:
    """NativeWeights' fields that come from the config: heads, sizes, norm epsilon, activation."""
    first, config = model.model.layers[0].self_attn, model.config
    return dict(
        heads=config.num_attention_heads,
        kv_heads=config.num_key_value_heads,
        head_dim=first.head_dim,
        scaling=first.scaling,
        eps=config.rms_norm_eps,
        act=ACT2FN[activation(config)],
        embed_scale=embed_scale(model),
    )


def embed_scale(model: PreTrainedModel) -> float:
    """The factor of the embedding's rows, as float32 (Gemma 3's sqrt(hidden)), else 1."""
    scale = getattr(model.model.embed_tokens, "scalar_embed_scale", None)
    return 1.0 if scale is None else float(torch.tensor(scale, dtype=torch.float32))


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
