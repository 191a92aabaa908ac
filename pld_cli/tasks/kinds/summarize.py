"""Summaries: the model's text, trimmed; a long document summarized by map-reduce."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pld_cli.tasks.kinds import Calls, TaskKind
from pld_cli.tasks.prompts import Task

if TYPE_CHECKING:  # longdoc imports torch: imported where it runs (kinds/__init__.py)
    from pld_cli.tasks.longdoc import Decode, MapCalls, Part, Splitter


def finish(task: Task, text: str) -> str:
    return text.strip() + "\n"


def long(
    task: Task, splitter: Splitter, decode: Decode, map_calls: MapCalls
) -> tuple[str, list[Part]]:
    from pld_cli.tasks import longdoc

    parts = longdoc.map_reduce(task, splitter, decode, map_calls)
    return parts[-1].result.text, parts


def first_round(task: Task, splitter: Splitter) -> Calls:
    from pld_cli.tasks import longdoc

    if splitter.fits(task):
        return [("the whole document", task)]
    return longdoc.chunk_tasks(task, splitter)


KIND = TaskKind(
    name="summarize",
    needs_instruction=False,
    rewrites=False,
    stops_at_loops=True,
    finish=finish,
    long=long,
    first_round=first_round,
)
