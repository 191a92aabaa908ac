"""Verify passes on a CPU: a pass over a few positions should cost about what a pass over one does.

A verify pass streams every weight once, whatever its length, so on a memory-bound CPU a pass over
2-8 positions should cost little more than a pass over one. With stock kernels it did not (fp32,
this project's 2-core machine, SmolLM2-135M at 1,024 tokens of context): a 2-position pass cost
1.9x a 1-position pass. Two causes, each fixed here without changing what is computed:

- Linear layers. For a handful of rows MKL's `x @ W.T` streams the weights once per row (and
  repacks them); `W @ x.T`, x.T a transposed view, with rows padded to a power of two, reads them
  once for all rows (the same product with a contiguous x.T is as slow as `x @ W.T`).
- Attention with grouped KV heads. With a mask (any pass over more than one position on top of a
  cache), sdpa copies every cached key and value once per query head and takes its slow math path.
  Folding a group's query heads into extra query rows of its KV head, with the mask repeated to
  match, keeps it on the fused kernel with no copies (transformers does this for one position).

`CpuKernels(model)` switches both on for the passes run inside `with`; prefills (many rows) and
models or arguments these do not cover take the stock path. Whether they win depends on the CPU
(on one of this project's machines they made a 1-position pass 2x slower than stock), so the
static and dynamic runtimes offer them as a kernel path (`KernelPaths`): the pass-cost calibration
times both paths per pass size on the machine at hand and each size runs the faster one. The peers
in `pld bench` (transformers' own `generate`) run as shipped.
"""

from __future__ import annotations

from collections import Counter
from contextlib import nullcontext
from functools import partial

import torch
import torch.nn.functional as F
from transformers import PreTrainedModel

from pld_cli.runtime import compat
from pld_cli.runtime.base import chosen_path

PADDED_ROWS = (2, 4, 8, 16, 32)  # linear inputs are padded up to one of these many rows


def small_linear(weight: torch.Tensor, bias: torch.Tensor | None, x: torch.Tensor) -> torch.Tensor:
    """x @ weight.T + bias for x [..., in], weight [out, in]; a few rows as W @ x.T (rows padded),
    many rows as usual."""
    rows = x.reshape(-1, x.shape[-1])  # [m, in]
    m = rows.shape[0]
    if m > PADDED_ROWS[-1]:
        return F.linear(x, weight, bias)
    padded = next(size for size in PADDED_ROWS if size >= m)
    # rows.t() must be a transposed view of contiguous rows: a contiguous [in, m] takes MKL's slow
    # path again (the input of a layer fed by this one's transposed output is such a view).
    if padded > m:
        rows = torch.cat([rows, rows.new_zeros(padded - m, rows.shape[1])])  # [padded, in]
    out = (weight @ rows.contiguous().t()).t()[:m]  # [out, padded] -> [m, out]
    if bias is not None:
        out = out + bias
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
    """sdpa for query [1, heads, q, d] over key/value [1, kv_heads, kv, d] without repeating
    key/value per query head; returns [1, q, heads, d] like transformers' sdpa."""
    groups = getattr(module, "num_key_value_groups", 1)
    batch, heads, q, dim = query.shape
    mask = attention_mask
    covered = groups > 1 and batch == 1 and q <= PADDED_ROWS[-1] and not dropout
    covered &= kwargs.get("is_causal") is not False and (mask is None or mask.shape[1] == 1)
    covered &= all(kwargs.get(name) is None for name in ("softcap", "position_bias", "s_aux"))
    if not covered:
        return compat.stock_sdpa_attention(
            module, query, key, value, attention_mask, dropout, scaling, **kwargs
        )
    rows = query.reshape(1, heads // groups, groups * q, dim)  # a group's heads as extra rows
    if mask is None and q > 1:  # transformers left it out: plain causal, queries last in kv
        kv = key.shape[2]
        mask = torch.ones(q, kv, dtype=torch.bool, device=query.device).tril(kv - q)
    if mask is not None:
        mask = additive(mask, query.dtype).reshape(q, -1).repeat(groups, 1)  # [groups * q, kv]
    out = F.scaled_dot_product_attention(
        rows, key, value, attn_mask=mask, scale=scaling
    )  # [1, kv_heads, groups * q, dim]
    return out.reshape(1, heads, q, dim).transpose(1, 2).contiguous(), None


def additive(mask: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """A boolean mask (True: attend) as 0 / -inf in dtype; a float mask as it is."""
    if mask.dtype != torch.bool:
        return mask
    return torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill_(~mask, -torch.inf)


def additive_sdpa_mask(*args, dtype: torch.dtype = torch.float32, **kwargs) -> torch.Tensor | None:
    """transformers' sdpa mask, made additive once per pass rather than once per layer."""
    mask = compat.stock_sdpa_mask(*args, **kwargs)
    return None if mask is None else additive(mask, dtype)


class KernelPaths:
    """The stock path or the CPU kernels, per pass size, as the calibration measured them
    (`costs.measure` times each of `paths` and calls `choose`). Until then, and for prefills and
    sizes past the measured ones, passes take the stock path."""

    def __init__(self, model: PreTrainedModel, device: torch.device) -> None:
        self.kernels = CpuKernels(model) if device.type == "cpu" else None
        self.paths = ("stock", "cpu-kernels") if self.kernels else ()
        self.choice: dict[int, str] = {}  # measured pass size -> path

    def choose(self, choice: dict[int, str]) -> None:
        """Run passes of each measured size (and the sizes just below it) on the given path."""
        self.choice = dict(choice)

    def for_pass(self, q: int) -> CpuKernels | nullcontext:
        faster = chosen_path(self.choice, q, "stock") == "cpu-kernels"
        return self.kernels if faster else nullcontext()


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

    # Entered twice per pass: the instance dicts are set directly, which nn.Module's __setattr__
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
