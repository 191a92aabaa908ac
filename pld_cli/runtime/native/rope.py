"""The rotary tables (cos and sin per position) of pld's own forward, the same bits on every CPU.

transformers builds them in torch, whose transcendental functions are vectorized per instruction
set and promise no particular rounding: its power, which forms the inverse frequencies, rounds
some of a common rope's differently without AVX2 than with it (tests/runtime/native/test_rope.py),
so a table built on one machine could differ in its last bits from one built on another, and
every pass reads it. So pld builds them itself, as transformers forms them, with every step fixed:

- the inverse frequencies by the model's own rope function (each rope type's own scaling), its one
  transcendental step, the base's power of each exponent, taken by Python's math in float64 and
  rounded once to float32 (`ScalarPowers`); the function's other steps are single IEEE operations
  per element, whose bits no vector width changes;
- the angles as transformers forms them: the float32 product of position and inverse frequency;
- their cosine and sine by Python's math in float64, rounded once to float32, then times the rope
  type's attention scaling in float32.

A scalar libm follows no vector width, and a float64 result rounded to float32 is the correctly
rounded float32 value unless it lies within a float64 step of a float32 midpoint: two libms'
last-bit differences in float64 could reach the table only at such a value. Each value is within
float32 rounding of transformers' own (tests/runtime/native/test_rope.py).
"""

from __future__ import annotations

import copy
import math

import torch
from transformers import PreTrainedModel


class ScalarPowers(float):
    """A rope base whose power of a tensor of exponents is taken element by element by Python's
    math in float64 and rounded once to the exponents' dtype: the one step of transformers' rope
    functions whose bits torch's vector width would choose."""

    def __pow__(self, exponents):
        if not isinstance(exponents, torch.Tensor):
            return float(self) ** exponents
        powers = [math.pow(self, e) for e in exponents.double().flatten().tolist()]
        fixed = torch.tensor(powers, dtype=torch.float64).view(exponents.shape)
        return fixed.to(exponents.dtype)


def inverse_frequencies(model: PreTrainedModel) -> tuple[torch.Tensor, float]:
    """The model's rope type's inverse frequencies [head_dim / 2] (float32, CPU) and attention
    scaling, by its own rotary module built anew over a copy of its config whose base is a
    `ScalarPowers` (transformers 5 reads it from rope_parameters, 4.x from rope_theta)."""
    config = copy.deepcopy(model.config)
    parameters = getattr(config, "rope_parameters", None)
    if isinstance(parameters, dict) and "rope_theta" in parameters:
        parameters["rope_theta"] = ScalarPowers(parameters["rope_theta"])
    if getattr(config, "rope_theta", None) is not None:
        config.rope_theta = ScalarPowers(config.rope_theta)
    rotary = type(model.model.rotary_emb)(config)
    return rotary.inv_freq.float().cpu(), float(rotary.attention_scaling)


def scalar(values: torch.Tensor, function) -> torch.Tensor:
    """function (math.cos or math.sin) of each float32 value, in float64, rounded to float32."""
    results = list(map(function, values.double().flatten().tolist()))
    return torch.tensor(results, dtype=torch.float64).view(values.shape).float()


@torch.inference_mode()
def rope_tables(model: PreTrainedModel, capacity: int) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin [capacity, 1, head_dim] in the model's dtype and on its device, for positions
    0..capacity-1, the same bits on every CPU (above)."""
    inv_freq, scaling = inverse_frequencies(model)
    angles = torch.arange(capacity, dtype=torch.float32)[:, None] * inv_freq  # [capacity, half]
    embed = model.model.embed_tokens.weight
    tables = []
    for function in (math.cos, math.sin):
        half = scalar(angles, function) * scaling
        tables.append(torch.cat([half, half], -1)[:, None].to(embed.device, embed.dtype))
    return tables[0], tables[1]
