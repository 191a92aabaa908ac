"""Verify passes on a CPU: a pass over a few positions should cost about what a pass over one does.

A verify pass streams every weight once, so on a memory-bound CPU it should cost little more than a
one-position pass; with stock kernels a two-position pass cost nearly twice one, for two causes
fixed here without changing what is computed: for a handful of rows MKL's `x @ W.T` streams the
weights once per row, and with a mask sdpa copies the cached keys and values per query head and
takes its slow path. `CpuKernels(model)` swaps in ../kernels.py's layouts for the passes inside
`with`; prefills and what they do not cover keep the stock path. They lost on another CPU, so the
runtimes offer them as a kernel path (`KernelPaths`) that the calibration times per pass size.
`pld bench`'s transformers peers run as shipped. Figures: docs/design-measurements.md.
"""

from __future__ import annotations

from collections import Counter
from contextlib import nullcontext
from functools import partial

import torch
from transformers import PreTrainedModel

from pld_cli.runtime.calibration.paths import PathChoice
from pld_cli.runtime.hf import compat
from pld_cli.runtime.kernels import additive, folded_mask, folded_sdpa, padded_linear, padded_size


def small_linear(weight: torch.Tensor, bias: torch.Tensor | None, x: torch.Tensor) -> torch.Tensor:
    """x @ weight.T + bias for x [..., in], weight [out, in], in the padded layout."""
    out = padded_linear(x.reshape(-1, x.shape[-1]), weight, bias)  # [m, out]
    return out.reshape(*x.shape[:-1], out.shape[-1])


def grouped_attention(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    **kwargs,
) -> tuple[torch.Tensor, None]:
    """transformers' sdpa attention for query [1, heads, q, d] over key/value
    [1, kv_heads, kv, d], with query heads folded instead of key/value repeated per query head;
    returns [1, q, heads, d] as transformers' sdpa does."""
    groups = getattr(module, "num_key_value_groups", 1)
    batch, _, q, _ = query.shape
    mask = attention_mask
    covered = groups > 1 and batch == 1 and padded_size(q) is not None and not dropout
    covered &= kwargs.get("is_causal") is not False and (mask is None or mask.shape[1] == 1)
    covered &= all(kwargs.get(name) is None for name in ("softcap", "position_bias", "s_aux"))
    if not covered:
        return compat.stock_sdpa_attention(
            module, query, key, value, attention_mask, dropout, scaling, **kwargs
        )
    if mask is None and q > 1:  # transformers left it out: plain causal, queries last in kv
        kv = key.shape[2]
        mask = torch.ones(q, kv, dtype=torch.bool, device=query.device).tril(kv - q)
    if mask is not None:
        mask = folded_mask(mask, groups, query.dtype)  # [groups * q, kv]
    out = folded_sdpa(query[0], key, value, mask, scaling)  # [heads, q, d]
    return out[None].transpose(1, 2).contiguous(), None


def additive_sdpa_mask(*args, dtype: torch.dtype = torch.float32, **kwargs) -> torch.Tensor | None:
    """transformers' sdpa mask, made additive once per pass rather than once per layer."""
    mask = compat.stock_sdpa_mask(*args, **kwargs)
    return None if mask is None else additive(mask, dtype)


class KernelPaths(PathChoice):
    """The stock path or the CPU kernels, per pass size, as the calibration measured them; until
    then, and for prefills and sizes past the measured ones, passes take the stock path. On a
    GPU there is one path, the stock one."""

    def __init__(self, model: PreTrainedModel, device: torch.device) -> None:
        self.kernels = CpuKernels(model) if device.type == "cpu" else None
        super().__init__(("stock", "cpu-kernels") if self.kernels else (), "stock")

    def for_pass(self, q: int) -> CpuKernels | nullcontext:
        return self.kernels if self.path(q) == "cpu-kernels" else nullcontext()

    def notes(self) -> list[str]:
        if self.kernels is None:
            return []
        return [self.kernels.describe() + " (where the calibration measures them faster)"]


class CpuKernels:
    """`with kernels:` runs the model's linear layers and (if it uses sdpa) its attention on the
    paths above, and restores them after. The model still sees "sdpa" as its attention
    implementation: transformers' sdpa functions are swapped, not the name."""

    def __init__(self, model: PreTrainedModel) -> None:
        self.linears, self.forwards, self.skipped = [], [], []
        for module in model.modules():
            weight = compat.linear_weight(module)
            # A module whose forward is already wrapped (accelerate's hooks) keeps it.
            if weight is not None and "forward" not in vars(module):
                self.linears.append(module)
                self.forwards.append(partial(small_linear, weight, module.bias))
            elif isinstance(module, torch.nn.Linear):
                self.skipped.append(module)
        self.sdpa = compat.attention_implementation(model) == "sdpa"
        self.attention = compat.SdpaReplaced(grouped_attention, additive_sdpa_mask)

    def describe(self) -> str:
        """What `with` patches, for --verbose."""
        patched = kinds(self.linears)
        # Models that call transformers' attention functions get the grouped one; model code
        # with its own sdpa call (Falcon's) keeps it.
        attention = "transformers' sdpa function -> grouped sdpa" if self.sdpa else "as shipped"
        note = f"cpu kernels: linear layers {patched or 'none'}; attention {attention}"
        return note + (f"; left as shipped: {kinds(self.skipped)}" if self.skipped else "")

    # Entered once per pass: the instance dicts are set directly, which nn.Module's __setattr__
    # would do too after checks that took most of a millisecond over ~200 layers.
    def __enter__(self) -> None:
        for linear, forward in zip(self.linears, self.forwards, strict=True):
            linear.__dict__["forward"] = forward
        if self.sdpa:
            self.attention.__enter__()

    def __exit__(self, *exc) -> None:
        for linear in self.linears:
            del linear.__dict__["forward"]
        if self.sdpa:
            self.attention.__exit__(*exc)


def kinds(modules: list[torch.nn.Module]) -> str:
    """ "12 Linear, 2 Conv1D": how many modules of each class."""
    counts = Counter(type(module).__name__ for module in modules)
    return ", ".join(f"{n} {name}" for name, n in counts.most_common())
