"""Opening a runtime: native where the model is covered, else the static cache, else dynamic.

`--runtime auto` tries the runtimes in the order of names.py: pld's own forward (`native/`) when
it covers the model, else the static runtime when transformers can build a static cache for the
model, else the dynamic one, with a note at each fallback. On CUDA both graphed runtimes replay
CUDA graphs; where the native capture fails, `auto` moves on to the static runtime, since
transformers' forward replayed as a graph beats any eager forward on a GPU (the launches, not the
weights, decide an eager pass there). An explicit `--runtime` runs eagerly when its capture fails.
A `RuntimePool` keeps one runtime per name for a model and reuses it while its cache is large
enough, so graphs are captured once per process.
"""

from __future__ import annotations

from collections.abc import Callable

from transformers import PreTrainedModel

from pld_cli.core.runtime import Runtime
from pld_cli.errors import PldError, Unsupported
from pld_cli.runtime.context import context_limit
from pld_cli.runtime.hf.dynamic import DynamicRuntime
from pld_cli.runtime.hf.graphs import capture
from pld_cli.runtime.hf.static import StaticRuntime
from pld_cli.runtime.names import RuntimeName
from pld_cli.runtime.native.graphs import capture as capture_native
from pld_cli.runtime.native.model import scheme_of
from pld_cli.runtime.native.runtime import NativeRuntime

CAPACITY_STEP = 512  # static caches grow in steps, so a bench reuses one across its items

Note = Callable[[str], None]  # a line for --verbose


class RuntimePool:
    """The open runtimes of one model, one per name asked for, each reused while its cache is
    large enough. `asked` is the one asked for at load time (`--runtime`; None: auto)."""

    def __init__(self, model: PreTrainedModel, asked: RuntimeName | None = None) -> None:
        self.model, self.asked = model, asked
        self.open: dict[RuntimeName | None, Runtime] = {}

    def get(
        self, positions: int, name: RuntimeName | None = None, note: Note = lambda _: None
    ) -> Runtime:
        """The runtime `name` (default: the pool's) with room for `positions` positions."""
        asked = name or self.asked
        positions = min(positions, context_limit(self.model))
        current = self.open.get(asked)
        if current is None or current.context_limit < positions:
            capacity = -(-positions // CAPACITY_STEP) * CAPACITY_STEP
            opened, current = open_runtime(self.model, asked, capacity, note)
            self.open[asked] = current
            because = chosen_because(self.model, asked, opened)
            note(f"runtime: {current.name} ({because}), room for {current.context_limit} positions")
            for line in current.notes():
                note(line)
        return current


def chosen_because(model: PreTrainedModel, asked: RuntimeName | None, opened: RuntimeName) -> str:
    """Why this runtime runs: asked for, or what `auto` found (its fallbacks are noted before)."""
    if asked is not None:
        return f"--runtime {asked}"
    architecture = type(model).__name__
    if opened is RuntimeName.NATIVE:
        return f"auto: pld's own forward covers {architecture}"
    if opened is RuntimeName.STATIC:
        return f"auto: pld's own forward does not cover this {architecture}; static cache"
    return f"auto: {architecture} cannot have a static cache"


def open_runtime(
    model: PreTrainedModel, asked: RuntimeName | None, capacity: int, note: Note
) -> tuple[RuntimeName, Runtime]:
    """The runtime asked for; for auto (None), the first of RuntimeName's that opens (dynamic
    always does). Quantized weights run on the native runtime only: transformers' forward has
    none left."""
    scheme = scheme_of(model)
    if scheme is not None:
        if asked not in (None, RuntimeName.NATIVE):
            raise PldError(f"--runtime {asked}: --quantize {scheme} runs on native only")
        asked = RuntimeName.NATIVE
    for candidate in RuntimeName if asked is None else (asked,):
        runtime = OPENERS[candidate](model, asked, capacity, note)
        if runtime is not None:
            return candidate, runtime
    raise AssertionError("the dynamic runtime opens for every model")


def open_native(
    model: PreTrainedModel, asked: RuntimeName | None, capacity: int, note: Note
) -> NativeRuntime | None:
    """The native runtime (with graphs on CUDA), or None where `auto` should try the static one."""
    native = attempt(asked, RuntimeName.NATIVE, lambda: NativeRuntime(model, capacity), note)
    if native is not None and native.device.type == "cuda":
        attach_cuda_graphs(native, note, capture_native)
        if native.graphs is None and asked is None:
            note("trying the static runtime's graphs instead of an eager native forward")
            return None
    return native


def open_static(
    model: PreTrainedModel, asked: RuntimeName | None, capacity: int, note: Note
) -> StaticRuntime | None:
    """The static runtime (with graphs on CUDA), or None where `auto` should use the dynamic one."""
    static = attempt(asked, RuntimeName.STATIC, lambda: StaticRuntime(model, capacity), note)
    if static is not None and static.device.type == "cuda":
        attach_cuda_graphs(static, note)
    return static


def open_dynamic(
    model: PreTrainedModel, asked: RuntimeName | None, capacity: int, note: Note
) -> DynamicRuntime:
    return DynamicRuntime(model)  # a cache that grows: no capacity to allocate


def attempt(
    asked: RuntimeName | None, which: RuntimeName, make: Callable[[], Runtime], note: Note
) -> Runtime | None:
    """make() the `which` runtime, or None (with a note) where it cannot run this model; for an
    explicit `--runtime which`, that is an error."""
    try:
        return make()
    except Unsupported as why:
        if asked == which:
            raise PldError(f"--runtime {which}: {why}") from None
        note(f"{which} runtime unavailable ({why})")
        return None


Opener = Callable[[PreTrainedModel, RuntimeName | None, int, Note], Runtime | None]
OPENERS: dict[RuntimeName, Opener] = {
    RuntimeName.NATIVE: open_native,
    RuntimeName.STATIC: open_static,
    RuntimeName.DYNAMIC: open_dynamic,
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
