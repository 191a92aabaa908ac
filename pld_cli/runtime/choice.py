"""Choosing a runtime: native where the model is covered, else the static cache, else dynamic.

`--runtime auto` takes pld's own forward (`native.py`) when it covers the model, else the static
runtime when transformers can build a static cache for the model, else the dynamic one, with a note
at each fallback. On CUDA both graphed runtimes replay CUDA graphs; where the native capture fails,
`auto` moves on to the static runtime, since transformers' forward replayed as a graph beats any
eager forward on a GPU (the launches, not the weights, decide an eager pass there). An explicit
`--runtime` runs eagerly when its capture fails. One runtime per kind is kept with the loaded model
and reused while its cache is large enough, so graphs are captured once per process.
"""

from __future__ import annotations

from collections.abc import Callable

from pld_cli.errors import PldError
from pld_cli.runtime.base import Runtime, context_limit
from pld_cli.runtime.cpu_kernels import KernelPaths
from pld_cli.runtime.cuda_graphs import capture
from pld_cli.runtime.dynamic import DynamicRuntime
from pld_cli.runtime.native import NativeRuntime, NativeUnsupported
from pld_cli.runtime.native_graphs import capture as capture_native
from pld_cli.runtime.static import StaticRuntime, StaticUnsupported
from pld_cli.tasks.models import LoadedModel

KINDS = ("auto", "native", "static", "dynamic")
CAPACITY_STEP = 512  # static caches grow in steps, so a bench reuses one across its items

Report = Callable[[str], None]


def runtime_for(
    loaded: LoadedModel, positions: int, kind: str | None = None, report: Report = lambda _: None
) -> Runtime:
    """The loaded model's runtime of `kind` (default: the one asked for at load time) with room
    for `positions` cached positions."""
    kind = kind or loaded.runtime
    positions = min(positions, context_limit(loaded.model))
    current = loaded.runtimes.get(kind)
    if current is None or current.context_limit < positions:
        capacity = -(-positions // CAPACITY_STEP) * CAPACITY_STEP
        current = loaded.runtimes[kind] = open_runtime(loaded, kind, capacity, report)
        report(
            f"runtime: {current.name} ({chosen_because(loaded, kind, current)}), "
            f"room for {current.context_limit} positions"
        )
        kernels = getattr(current, "kernels", None)
        if isinstance(kernels, KernelPaths) and kernels.kernels is not None:
            report(kernels.kernels.describe() + " (where the calibration measures them faster)")
    return current


def chosen_because(loaded: LoadedModel, kind: str, runtime: Runtime) -> str:
    """Why this runtime runs: asked for, or what `auto` found (its fallbacks are noted before)."""
    if kind != "auto":
        return f"--runtime {kind}"
    architecture = type(loaded.model).__name__
    if runtime.name.startswith("native"):
        return f"auto: pld's own forward covers {architecture}"
    if runtime.name.startswith("static"):
        return f"auto: pld's own forward does not cover this {architecture}; static cache"
    return f"auto: {architecture} cannot have a static cache"


def open_runtime(loaded: LoadedModel, kind: str, capacity: int, report: Report) -> Runtime:
    if kind == "dynamic":
        return DynamicRuntime(loaded.model)
    if kind in ("native", "auto"):
        native = open_native(loaded, kind, capacity, report)
        if native is not None:
            return native
    try:
        runtime = StaticRuntime(loaded.model, capacity)
    except StaticUnsupported as why:
        if kind == "static":
            raise PldError(f"--runtime static: {why}") from None
        report(f"static runtime unavailable ({why}); using the dynamic one")
        return DynamicRuntime(loaded.model)
    if runtime.device.type == "cuda":
        attach_cuda_graphs(runtime, report)
    return runtime


def open_native(
    loaded: LoadedModel, kind: str, capacity: int, report: Report
) -> NativeRuntime | None:
    """The native runtime (with graphs on CUDA), or None where `auto` should try the static one."""
    try:
        native = NativeRuntime(loaded.model, capacity)
    except NativeUnsupported as why:
        if kind == "native":
            raise PldError(f"--runtime native: {why}") from None
        report(f"native runtime unavailable ({why}); trying the static one")
        return None
    if native.device.type == "cuda":
        attach_cuda_graphs(native, report, capture_native)
        if native.graphs is None and kind == "auto":
            report("trying the static runtime's graphs instead of an eager native forward")
            return None
    return native


def attach_cuda_graphs(
    runtime: StaticRuntime | NativeRuntime, report: Report, capture_graphs: Callable = capture
) -> None:
    runtime.prefill([0])  # the graphs read the cache tensors a first pass allocates
    try:
        runtime.graphs = capture_graphs(runtime)
    except Exception as why:  # noqa: BLE001 - any failure leaves the eager runtime
        report(f"CUDA graphs off ({why}); the {runtime.name} runtime runs eagerly")
    runtime.prefill([])
