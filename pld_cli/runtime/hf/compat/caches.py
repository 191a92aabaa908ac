"""Caches pld can roll back: transformers' dynamic and static caches made exact under rollback.

A dynamic cache is cut back by `crop`; a static one by moving its write position. Layers that a
rollback could not restore (sliding rings, conv and recurrent states that cannot record their
past) are replaced by full layers or refused (`Unsupported`).
"""

from __future__ import annotations

import inspect

import torch
from transformers import DynamicCache, PreTrainedModel, StaticCache
from transformers import __version__ as transformers_version
from transformers.cache_utils import DynamicLayer, StaticLayer

from pld_cli.errors import Unsupported

try:  # 5.10 on: conv and recurrent states live in linear-attention cache layers
    from transformers.cache_utils import LinearAttentionCacheLayerMixin
except ImportError:  # 4.56 to 5.0: such models keep their own cache classes (`check_runs`)
    LinearAttentionCacheLayerMixin = None
HAS_LINEAR_ATTENTION_LAYERS = LinearAttentionCacheLayerMixin is not None


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
        if is_linear_attention(layer):
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
    """Unsupported unless transformers' caches can hold this model's state at all.

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
        raise Unsupported(
            f"this model's {what} layers need a newer transformers than {transformers_version} "
            "(one with linear-attention cache layers)"
        )


def is_linear_attention(layer) -> bool:
    """A conv or recurrent-state layer (5.10 on; none before)."""
    return LinearAttentionCacheLayerMixin is not None and isinstance(
        layer, LinearAttentionCacheLayerMixin
    )


def forget_recorded_past(cache) -> None:
    """Cut recorded conv states back to the kernel size once no rollback can need them (a layer
    recording its past concatenates every pass onto it). 5.20 on; no such layers before."""
    for layer in getattr(cache, "layers", []):
        if is_linear_attention(layer) and any(layer.is_conv_states_initialized.values()):
            LinearAttentionCacheLayerMixin.crop(layer, 0)


def recurrent_states(cache) -> list[torch.Tensor]:
    """The recurrent-state tensors of a cache's linear layers (updated in place by transformers,
    so a snapshot is a list of clones and a restore is `copy_`)."""
    states = []
    for layer in getattr(cache, "layers", []):
        if is_linear_attention(layer):
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
        if isinstance(layer, StaticLayer) and layer.is_sliding and not is_linear_attention(layer):
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
