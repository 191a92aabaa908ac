"""The one place that touches transformers' private or version-dependent API.

pld needs more of transformers than a forward call: a cache it can roll back, a static cache whose
write position it can move, the attention and mask registries its CPU kernels hook into, and the
names of forward arguments that changed between releases. Each function says which
transformers versions each of its branches serves; the rest of pld calls only these.
Supported: transformers >= 4.56, < 6 (`pyproject.toml`). Tested: 4.56 and 5.17 (`make
test-compat`; 5.17 is the GPU image's) and 5.24 (`make test`); the version bounds of a branch
between those were read from the 5.0, 5.10 and 5.20 sources ("5.0-5.10" below: changed in a
release after 5.0, by 5.10).

This package is that place: `arguments` (forward arguments that changed names), `caches` (caches
that roll back exactly), `trimmed_layer` (a static layer that attends over what was written),
`attention` (the sdpa registries), `linears` (which modules are a plain x @ W.T).
"""

from pld_cli.runtime.hf.compat.arguments import (
    attention_implementation,
    cache_argument,
    takes_cache_position,
    transformers_version,
)
from pld_cli.runtime.hf.compat.attention import SdpaReplaced, stock_sdpa_attention, stock_sdpa_mask
from pld_cli.runtime.hf.compat.caches import (
    HAS_LINEAR_ATTENTION_LAYERS,
    check_runs,
    crop,
    forget_recorded_past,
    is_linear_attention,
    plain_cache,
    plain_static_cache,
    recurrent_states,
    rollback_cache,
    write_position,
)
from pld_cli.runtime.hf.compat.linears import linear_weight
from pld_cli.runtime.hf.compat.trimmed_layer import TrimmedStaticLayer, trim_attention

__all__ = [
    "HAS_LINEAR_ATTENTION_LAYERS",
    "SdpaReplaced",
    "TrimmedStaticLayer",
    "attention_implementation",
    "cache_argument",
    "check_runs",
    "crop",
    "forget_recorded_past",
    "is_linear_attention",
    "linear_weight",
    "plain_cache",
    "plain_static_cache",
    "recurrent_states",
    "rollback_cache",
    "stock_sdpa_attention",
    "stock_sdpa_mask",
    "takes_cache_position",
    "transformers_version",
    "trim_attention",
    "write_position",
]
