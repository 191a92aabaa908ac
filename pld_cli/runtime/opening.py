"""Opening a runtime: native where the model is covered, else the static cache, else dynamic.

`--runtime auto` tries the runtimes in the order of kinds.py: pld's own forward (`native.py`) when
it covers the model, else the static runtime when transformers can build a static cache for the
model, else the dynamic one, with a note at each fallback. On CUDA both graphed runtimes replay
CUDA graphs; where the native capture fails, `auto` moves on to the static runtime, since
transformers' forward replayed as a graph beats any eager forward on a GPU (the launches, not the
weights, decide an eager pass there). An explicit `--runtime` runs eagerly when its capture fails.
A `RuntimePool` keeps one runtime per kind for a model and reuses it while its cache is large
enough, so graphs are captured once per process.
"""

from __future__ import annotations

from collections.abc import Callable

from transformers import PreTrainedModel

from pld_cli.core.runtime import Runtime
from pld_cli.errors import PldError, Unsupported
from pld_cli.runtime.context import context_limit
from pld_cli.runtime.cuda_graphs import capture
from pld_cli.runtime.dynamic import DynamicRuntime
from pld_cli.runtime.kinds import KINDS
from pld_cli.runtime.native import NativeRuntime
from pld_cli.runtime.native_graphs import capture as capture_native
from pld_cli.runtime.quantized import quantization
from pld_cli.runtime.static import StaticRuntime

CAPACITY_STEP = 512  # static caches grow in steps, so a bench reuses one across its items

Note = Callable[[str], None]  # a line for --verbose


class RuntimePool:
    """The open runtimes of one model, one per kind, each reused while its cache is large enough.
    `kind` is the one asked for at load time (`--runtime`: auto, native, static or dynamic)."""

    def __init__(self, model: PreTrainedModel, kind: str = "auto") -> None:
        self.model, self.kind = model, kind
        self.open: dict[str, Runtime] = {}

    def get(self, positions: int, kind: str | None = None, note: Note = lambda _: None) -> Runtime:
        """The runtime of `kind` (default: the pool's) with room for `positions` positions."""
        kind = kind or self.kind
        positions = min(positions, context_limit(self.model))
        current = self.open.get(kind)
        if current is None or current.context_limit < positions:
            capacity = -(-positions // CAPACITY_STEP) * CAPACITY_STEP
            current = self.open[kind] = open_runtime(self.model, kind, capacity, note)
            because = chosen_because(self.model, kind, current)
            note(f"runtime: {current.name} ({because}), room for {current.context_limit} positions")
            for line in current.notes():
                note(line)
        return current


def chosen_because(model: PreTrainedModel, kind: str, runtime: Runtime) -> str:
    """Why this runtime runs: asked for, or what `auto` found (its fallbacks are noted before)."""
    if kind != "auto":
        return f"--runtime {kind}"
    architecture = type(model).__name__
    if runtime.name.startswith("native"):
        return f"auto: pld's own forward covers {architecture}"
    if runtime.name.startswith("static"):
        return f"auto: pld's own forward does not cover this {architecture}; static cache"
    return f"auto: {architecture} cannot have a static cache"


def open_runtime(model: PreTrainedModel, kind: str, capacity: int, note: Note) -> Runtime:
    """The runtime of `kind`; for auto, the first of KINDS that opens (dynamic always does).
    Quantized weights run on the native runtime only: transformers' forward has none left."""
    quantized = quantization(model)
    if quantized != "none":
        if kind not in ("auto", "native"):
            raise PldError(f"--runtime {kind}: --quantize {quantized} runs on native only")
        kind = "native"
    for candidate in KINDS if kind == "auto" else (kind,):
        runtime = OPENERS[candidate](model, kind, capacity, note)
        if runtime is not None:
            return runtime
    raise AssertionError("the dynamic runtime opens for every model")


def open_native(
    model: PreTrainedModel, kind: str, capacity: int, note: Note
) -> NativeRuntime | None:
    """The native runtime (with graphs on CUDA), or None where `auto` should try the static one."""
    native = attempt(kind, "native", lambda: NativeRuntime(model, capacity), note)
    if native is not None and native.device.type == "cuda":
        attach_cuda_graphs(native, note, capture_native)
        if native.graphs is None and kind == "auto":
            note("trying the static runtime's graphs instead of an eager native forward")
            return None
    return native


def open_static(
    model: PreTrainedModel, kind: str, capacity: int, note: Note
) -> StaticRuntime | None:
    """The static runtime (with graphs on CUDA), or None where `auto` should use the dynamic one."""
    static = attempt(kind, "static", lambda: StaticRuntime(model, capacity), note)
    if static is not None and static.device.type == "cuda":
        attach_cuda_graphs(static, note)
    return static


def open_dynamic(model: PreTrainedModel, kind: str, capacity: int, note: Note) -> DynamicRuntime:
    return DynamicRuntime(model)  # a cache that grows: no capacity to allocate


def attempt(kind: str, which: str, make: Callable[[], Runtime], note: Note) -> Runtime | None:
    """make() the `which` runtime, or None (with a note) where it cannot run this model; for an
    explicit `--runtime which`, that is an error."""
    try:
        return make()
    except Unsupported as why:
        if kind == which:
            raise PldError(f"--runtime {which}: {why}") from None
        note(f"{which} runtime unavailable ({why})")
        return None


OPENERS: dict[str, Callable[[PreTrainedModel, str, int, Note], Runtime | None]] = {
    "native": open_native,
    "static": open_static,
    "dynamic": open_dynamic,
}


def attach_cuda_graphs(
    runtime: StaticRuntime | NativeRuntime, note: Note, capture_graphs: Callable = capture
) -> None:
    runtime.prefill([0])  # the graphs read the cache tensors a first pass allocates
    try:
        runtime.graphs = capture_graphs(runtime)
    except Exception as why:  # noqa: BLE001 - any failure leaves the eager runtime
        note(f"CUDA graphs off ({why}); the {runtime.name} runtime runs eagerly")
    runtime.prefill([])
