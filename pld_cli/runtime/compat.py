"""The one place that touches transformers' private or version-dependent API.

pld needs more of transformers than a forward call: a cache it can roll back, a static cache whose
write position it can move, the attention and mask registries its CPU kernels hook into, and the
names of forward arguments that changed between releases. Each function below says which
transformers versions each of its branches serves; the rest of pld calls only these.
Supported: transformers >= 4.56, < 6 (`pyproject.toml`). Tested: 4.56 and 5.17 (`make
test-compat`; 5.17 is the GPU image's) and 5.24 (`make test`); the version bounds of a branch
between those were read from the 5.0, 5.10 and 5.20 sources ("5.0-5.10" below: changed in a
release after 5.0, by 5.10).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable

import torch
from transformers import DynamicCache, PreTrainedModel, StaticCache
from transformers import __version__ as transformers_version
from transformers.cache_utils import DynamicLayer, StaticLayer
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, sdpa_mask
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
from transformers.pytorch_utils import Conv1D

from pld_cli.errors import PldError

try:  # 5.10 on: conv and recurrent states live in linear-attention cache layers
    from transformers.cache_utils import LinearAttentionCacheLayerMixin
except ImportError:  # 4.56 to 5.0: such models keep their own cache classes (`check_runs`)
    LinearAttentionCacheLayerMixin = None


class Unsupported(Exception):
    """pld cannot roll back (or statically cache) this model's state; the message says why."""


# Forward arguments -------------------------------------------------------------------------


def cache_argument(model: PreTrainedModel) -> str:
    """The name of forward's cache argument: `cache` (after 5.20; 5.24), `past_key_values`
    (4.56 to 5.20)."""
    params = inspect.signature(model.forward).parameters
    return "cache" if "cache" in params else "past_key_values"


def takes_cache_position(model: PreTrainedModel) -> bool:
    """Whether forward places cache writes at an explicit `cache_position` (4.56 to 5.0); later
    releases (5.10 on) keep the write position in each static layer (`cumulative_length`)."""
    return "cache_position" in inspect.signature(model.forward).parameters


def attention_implementation(model: PreTrainedModel) -> str:
    """`config._attn_implementation` (private, 4.56 to 5.24): "sdpa", "eager", ..."""
    return model.config._attn_implementation


# The dynamic cache ------------------------------------------------------------------------


def rollback_cache(model: PreTrainedModel) -> DynamicCache:
    """A DynamicCache that `crop` restores exactly, for every layer kind pld knows.

    Sliding-window and chunked layers become full layers: they keep every position, so a rollback
    past the window has the positions it needs, while the model's own sliding-window masks still
    restrict what attention reads (the same products as plain decoding, masked entries adding 0).
    Conv and recurrent layers record their past conv states, so `crop` can cut them back; their
    recurrent states are restored by the runtime from a snapshot (`recurrent_states`).
    `DynamicCache(config=...)` builds typed layers in 4.56 to 5.24 (sliding ones throughout,
    linear ones from 5.10, which record their past from 5.20 on; 5.10's cannot: Unsupported).
    """
    check_runs(model)
    cache = DynamicCache(config=model.config)
    for i, layer in enumerate(cache.layers):
        if is_linear(layer):
            if not hasattr(layer, "activate_past_recording"):
                raise Unsupported(f"its {type(layer).__name__} cache cannot record past states")
            layer.activate_past_recording()
            if isinstance(layer, DynamicLayer) and getattr(layer, "is_sliding", False):
                raise Unsupported("its hybrid sliding-window layers cannot be rolled back")
        elif getattr(layer, "is_sliding", False):
            cache.layers[i] = DynamicLayer()
        elif not isinstance(layer, DynamicLayer) and type(layer).__name__ != "DummyLayer":
            raise Unsupported(f"pld cannot roll back its {type(layer).__name__} cache layers")
    return cache


def plain_cache(model: PreTrainedModel) -> DynamicCache:
    """transformers' own cache for the model, for decoding without rollbacks (4.56 to 5.24)."""
    return DynamicCache(config=model.config)


ATTENTION_KINDS = {"full_attention", "sliding_attention", "chunked_attention"}


def check_runs(model: PreTrainedModel) -> None:
    """PldError unless transformers' caches can hold this model's state at all.

    Releases without linear-attention cache layers (4.56 to 5.0) keep the state of conv and
    recurrent layers (LFM2, Mamba, Qwen3-Next) in model-specific cache classes that pld does not
    drive; such a model needs a newer transformers, with or without drafting.
    """
    if LinearAttentionCacheLayerMixin is not None:
        return
    text = model.config.get_text_config()
    kinds = set(getattr(text, "layer_types", None) or []) - ATTENTION_KINDS
    takes_cache = {"cache", "past_key_values"} & set(inspect.signature(model.forward).parameters)
    if kinds or not takes_cache:
        what = ", ".join(sorted(kinds)) or "recurrent"
        raise PldError(
            f"this model's {what} layers need a newer transformers than {transformers_version} "
            "(one with linear-attention cache layers)"
        )


def is_linear(layer) -> bool:
    """A conv or recurrent-state layer (5.10 on; none before)."""
    return LinearAttentionCacheLayerMixin is not None and isinstance(
        layer, LinearAttentionCacheLayerMixin
    )


def forget_recorded_past(cache) -> None:
    """Cut recorded conv states back to the kernel size once no rollback can need them (a layer
    recording its past concatenates every pass onto it). 5.20 on; no such layers before."""
    for layer in getattr(cache, "layers", []):
        if is_linear(layer) and any(layer.is_conv_states_initialized.values()):
            LinearAttentionCacheLayerMixin.crop(layer, 0)


def recurrent_states(cache) -> list[torch.Tensor]:
    """The recurrent-state tensors of a cache's linear layers (updated in place by transformers,
    so a snapshot is a list of clones and a restore is `copy_`)."""
    states = []
    for layer in getattr(cache, "layers", []):
        if is_linear(layer):
            for i, ready in layer.is_recurrent_states_initialized.items():
                if ready:
                    states.append(layer.recurrent_states[i])
    return states


def crop(cache, positions: int) -> None:
    """Forget the last `positions` positions: `crop` with a negative count, which removes that
    many in 4.56 to 5.24 (4.56 reads a positive one as a length, 5.24 refuses it). The static
    layers of 5.17 have no `crop`: their write position (cumulative_length) moves back in place."""
    if not positions:
        return
    layers = getattr(cache, "layers", [])
    if layers and not hasattr(layers[0], "crop"):
        for layer in layers:
            layer.cumulative_length.sub_(positions)
    else:
        cache.crop(-positions)


# The static cache -------------------------------------------------------------------------


def plain_static_cache(model: PreTrainedModel, capacity: int) -> StaticCache:
    """A StaticCache of `capacity` positions, all of its layers plain full-attention ones.

    Sliding-window layers become full ones, as in `rollback_cache`: a sliding layer writes in a
    ring, which a moved write position cannot undo; a full layer keeps every position and the
    model's sliding-window mask still limits what attention reads. Conv and recurrent layers fold
    their state in place: Unsupported. `StaticCache(config=, max_cache_len=)` and the layer
    classes: 4.56 to 5.24 (4.56 names the sliding layer SlidingWindowLayer).
    """
    check_runs(model)
    try:
        cache = StaticCache(config=model.config, max_cache_len=capacity)
    except Exception as error:  # noqa: BLE001 - any refusal means: use the dynamic runtime
        raise Unsupported(f"no static cache for this model ({error})") from error
    layers = getattr(cache, "layers", [])
    for i, layer in enumerate(layers):
        if isinstance(layer, StaticLayer) and layer.is_sliding and not is_linear(layer):
            layers[i] = StaticLayer(capacity)
    if not layers or any(type(layer) is not StaticLayer for layer in layers):
        kinds = sorted({type(layer).__name__ for layer in layers} - {"StaticLayer"})
        raise Unsupported(f"its cache has {', '.join(kinds) or 'no'} layers, not only full ones")
    return cache


def write_position(layer: StaticLayer) -> int | None:
    """Where a static layer writes next: `cumulative_length` (5.10 on), None where the caller
    passes explicit cache positions (4.56 to 5.0)."""
    position = getattr(layer, "cumulative_length", None)
    return None if position is None else int(position)


class TrimmedStaticLayer(StaticLayer):
    """A static layer whose attention reads only the positions written so far.

    Without CUDA graphs nothing needs fixed shapes, and on a CPU attending over the whole capacity
    costs more than DynamicCache's copy; a view of the written part costs neither. Its shapes
    change every pass, so it is not compileable, which also lets transformers skip the attention
    mask of a one-position pass, as it does for the dynamic cache. 5.10 on (`cumulative_length`,
    `get_mask_sizes(query_length)`; 4.56 to 5.0 take `get_mask_sizes(cache_position)`).
    """

    is_compileable = False

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs):
        keys, values = super().update(key_states, value_states, *args, **kwargs)
        end = int(self.cumulative_length)  # a CPU tensor: no device sync
        return keys[:, :, :end], values[:, :, :end]  # [1, heads, end, head_dim] views

    def get_mask_sizes(self, query_length: int) -> tuple[int, int]:
        return int(self.cumulative_length) + query_length, 0


def trim_attention(cache: StaticCache) -> None:
    """Swap plain static layers for trimmed ones where this transformers keeps the write position
    in the layer (4.56 to 5.0 take explicit cache positions and stay untrimmed)."""
    for i, layer in enumerate(cache.layers):
        if type(layer) is StaticLayer and write_position(layer) is not None:
            cache.layers[i] = TrimmedStaticLayer(layer.max_cache_len)


# Attention and mask functions ---------------------------------------------------------------

AttentionFunction = Callable[..., tuple[torch.Tensor, torch.Tensor | None]]
stock_sdpa_attention = sdpa_attention_forward
stock_sdpa_mask = sdpa_mask


class SdpaReplaced:
    """Inside `with`, models whose `_attn_implementation` is "sdpa" call `attention` and `mask`
    instead of transformers' sdpa ones, while still seeing "sdpa" (model code that tests for it,
    as Falcon's and Gemma 4's does, keeps its sdpa path). Overrides the local mappings of the
    shared interface objects (`GeneralInterface`, 4.56 to 5.24 at least), restoring after."""

    def __init__(self, attention: AttentionFunction, mask: Callable) -> None:
        self.replacements = (
            (ALL_ATTENTION_FUNCTIONS, attention),
            (ALL_MASK_ATTENTION_FUNCTIONS, mask),
        )
        self.saved: list = []

    def __enter__(self) -> None:
        self.saved = [table._local_mapping.get("sdpa") for table, _ in self.replacements]
        for table, function in self.replacements:
            table["sdpa"] = function

    def __exit__(self, *exc) -> None:
        for (table, _), before in zip(self.replacements, self.saved, strict=True):
            if before is None:
                del table["sdpa"]
            else:
                table["sdpa"] = before


# Linear layers ----------------------------------------------------------------------------


def linear_weight(module: torch.nn.Module) -> torch.Tensor | None:
    """The [out, in] weight of a module that computes x @ W.T + b and nothing else, or None.

    nn.Linear and subclasses that keep its forward; Falcon's FalconLinear (same product, written
    as `input @ weight.T`); GPT-2's Conv1D (weight stored [in, out]: its transposed view).
    Other subclasses (quantized, LoRA, ...) may compute something else and are left alone.
    """
    kind = type(module)
    if isinstance(module, torch.nn.Linear):
        same = kind.forward is torch.nn.Linear.forward or kind.__name__ == "FalconLinear"
        return module.weight if same else None
    if kind is Conv1D:
        return module.weight.t()
    return None
