"""A runtime made ready for a decode: opened, refused where it cannot draft, calibrated.

Drafting needs a runtime that rolls back exactly (`Runtime.refusal` says why one cannot); adaptive
drafting and runtimes with several kernel paths need the measured pass costs t(q), calibrated once
per model, device, dtype and runtime, then read from the user cache (runtime/calibration/costs.py).
"""

from __future__ import annotations

from functools import cache

from pld_cli.cache import cache_dir
from pld_cli.core.config import DecodeConfig
from pld_cli.core.runtime import Runtime
from pld_cli.errors import PldError
from pld_cli.loading.models import LoadedModel
from pld_cli.runtime.calibration.costs import (
    CALIBRATION_POSITIONS,
    copy_speed,
    cost_key,
    pass_costs,
)
from pld_cli.runtime.names import RuntimeName
from pld_cli.runtime.opening import Note


def ready(
    loaded: LoadedModel,
    positions: int,
    config: DecodeConfig,
    runtime_name: RuntimeName | None = None,
    report: Note = lambda _: None,
    note: Note = lambda _: None,
) -> tuple[Runtime, list[float] | None]:
    """A runtime with room for `positions` and, for adaptive drafting, its t(q): calibrated once
    per model, device, dtype and runtime, then read from the cache. Call it ahead of a decode to
    do that work (and graph capture) outside the timed loop. `report` shows progress, `note`
    says which runtime runs and why."""
    runtime = loaded.runtimes.get(max(positions, CALIBRATION_POSITIONS), runtime_name, note)
    refusal = runtime.refusal
    if config.use_pld and refusal:
        raise PldError(f"{refusal}; rerun with --no-pld")
    # A runtime with kernel paths is calibrated for plain decoding too: that chooses the paths.
    # One that cannot roll back (the refusal) is not: a calibration rolls back after each pass.
    if refusal or not (config.adaptive or runtime.paths):
        return runtime, None
    key = cost_key(loaded.name, loaded.device, loaded.dtype, runtime.name)
    vocab_size = loaded.model.config.vocab_size
    cache_file = cache_dir() / "pass-costs.json"
    speed = machine_speed() if loaded.device == "cpu" else None
    max_q = config.num_draft + 1
    costs = pass_costs(runtime, vocab_size, key, cache_file, max_q, report, speed)
    return runtime, costs if config.adaptive else None


@cache
def machine_speed() -> float:
    """copy_speed(), once per process: every decode goes through ready() (each document of a
    batch, each bench item), and none should pay the probe again or re-measure the pass costs
    in the middle of a run because the probe came out slower once."""
    return copy_speed()
