"""The task registry: each kind of task pld runs is one module of this package, found by name.

A kind (`TaskKind`) owns everything that differs between tasks: its templates (prompts/<name>.txt,
and <name>_part.txt where a long file is cut in pieces), whether it needs an instruction and
whether its result is the document rewritten, whether it ends where its output loops, how the
model's text becomes the result (`finish`), how a document too long for one call runs (`long`:
map-reduce for a summary, pieces stitched back for an edit) and which calls of such a document a
benchmark times (`first_round`: later rounds depend on each method's output). Adding a kind is
one module here that defines `KIND`, plus its template; the command line gives it a command.
The registry imports no model library (kind modules import longdoc.py where they run it), so
manifests and inputs are checked before torch loads.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING

from pld_cli.errors import PldError
from pld_cli.tasks.prompts import Task

if TYPE_CHECKING:  # longdoc imports torch; the registry is read before it loads (manifests)
    from pld_cli.tasks.longdoc import Decode, MapCalls, Part, Splitter

Calls = list[tuple[str, Task]]  # (where, task) of each call: 'the whole file', 'chunk 2/5', ...


@dataclass(frozen=True)
class TaskKind:
    name: str  # as in Task.kind, manifests and JSON
    needs_instruction: bool
    rewrites: bool  # the result is the document rewritten (kept in its line endings, --write)
    stops_at_loops: bool  # output that starts repeating itself ends there (core/repetition.py)
    finish: Callable[[Task, str], str]  # (task, the answer as the model wrote it) -> the result
    # (task, splitter, decode, map over independent calls) -> (result, its calls)
    long: Callable[[Task, Splitter, Decode, MapCalls], tuple[str, list[Part]]]
    first_round: Callable[[Task, Splitter], Calls]


@cache
def registry() -> dict[str, TaskKind]:
    kinds = [
        importlib.import_module(f"{__name__}.{module.name}").KIND
        for module in pkgutil.iter_modules(__path__)
    ]
    return {kind.name: kind for kind in kinds}


def kind_of(name: str) -> TaskKind:
    kinds = registry()
    if name not in kinds:
        raise PldError(f'unknown task "{name}": expected {" or ".join(map(repr, sorted(kinds)))}')
    return kinds[name]
