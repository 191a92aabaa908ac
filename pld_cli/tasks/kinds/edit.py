"""Edits: the whole updated file, its code fence stripped; a long file in pieces stitched back."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pld_cli.tasks.kinds import Calls, TaskKind
from pld_cli.tasks.prompts import Task

if TYPE_CHECKING:  # longdoc imports torch: imported where it runs (kinds/__init__.py)
    from pld_cli.tasks.longdoc import Decode, MapCalls, Part, Splitter


def finish(task: Task, text: str) -> str:
    """The file as it should be saved: the body of a fence the answer opens with, else the
    answer; ending in a newline where the original did."""
    body = strip_fence(text, inner=sum(line.strip() == "```" for line in task.document.split("\n")))
    if task.document.endswith("\n") and not body.endswith("\n"):
        body += "\n"
    return body


def strip_fence(text: str, inner: int | None = None) -> str:
    """The body of a code fence the answer opens with, else text. The fence closes at its last
    closing line, or, when the file holds `inner` such lines of its own, at the one after them:
    a small model that goes on after the file (a remark, the file again) loses what follows.

    An answer cut short before its closing fence keeps everything after the opening line.
    """
    lines = text.strip("\n").split("\n")
    if not lines[0].startswith("```"):
        return text
    closing = [i for i, line in enumerate(lines) if i > 0 and line.strip() == "```"]
    end = closing[min(inner, len(closing) - 1) if inner is not None else -1] if closing else None
    return "\n".join(lines[1:end]) + "\n"


def long(
    task: Task, splitter: Splitter, decode: Decode, map_calls: MapCalls
) -> tuple[str, list[Part]]:
    from pld_cli.tasks import longdoc

    return longdoc.edit_in_pieces(task, splitter, decode, map_calls)


def first_round(task: Task, splitter: Splitter) -> Calls:
    from pld_cli.tasks import longdoc

    return longdoc.piece_tasks(task, splitter)[1] or [("the whole file", task)]


KIND = TaskKind(
    name="edit",
    needs_instruction=True,
    rewrites=True,
    stops_at_loops=False,  # code repeats legitimately
    finish=finish,
    long=long,
    first_round=first_round,
)
