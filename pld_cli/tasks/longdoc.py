"""Documents longer than one call: summaries by map-reduce, edits in pieces stitched back.

A document that fits (its prompt plus --max-new-tokens within the context, its text within
--chunk-tokens when given) is one call, exactly as before. Otherwise a summary is cut on the
document's structure (chunks.split_prose), each chunk summarized on its own (PLD looks up in that
chunk's prompt), the summaries joined and summarized again, recursively until the text fits one
call. An edit is cut at top-level blocks (chunks.split_blocks) into pieces its rewrite fits; each
is rewritten with the instruction and an outline of the whole file, and the pieces are stitched
back between the untouched blank lines. Every call goes through `decode`, so each one is the same
exact loop as a short document's; the calls of one round are independent, so `map_calls` may run
them at once (an engine that takes several calls, a server), results kept in order.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from pld_cli.core.stats import Stats
from pld_cli.errors import PldError
from pld_cli.tasks.chunks import (
    Count,
    Span,
    TooLong,
    lines_of,
    outline,
    split_blocks,
    split_prose,
)
from pld_cli.tasks.engine import Engine
from pld_cli.tasks.prompts import Task, prompt_ids
from pld_cli.tasks.result import Result

MARGIN = 16  # tokens kept free: a chunk's tokens counted alone may differ a little in the prompt
BALANCE_SLACK = 110  # percent of an even share a chunk may take, to end on structure
REWRITE_ROOM = 8  # an edit's piece may hold 7/8 of --max-new-tokens, so the rewrite can grow


@dataclass
class Part:
    """One call of a long document: its place, its input's size and its result."""

    index: int  # 1-based over all the document's calls
    round: int  # 1: the document's own chunks or pieces; 2 on: summaries of summaries
    where: str  # 'chunk 2/5 of round 1', 'piece 3/4 (lines 120-240)'
    chars: int
    result: Result
    plain: Result | None = None  # the same call without drafting, under --compare


Decode = Callable[[Task, str], Part]  # (task, where) -> the call's Part (index/round set later)
Call = tuple[str, Task]  # (where, task)
MapCalls = Callable[[Callable[[Call], Part], Sequence[Call]], list[Part]]  # map(), in order


def in_order(decode_one: Callable[[Call], Part], calls: Sequence[Call]) -> list[Part]:
    """One call after another: the map for an engine that takes one call at a time."""
    return [decode_one(call) for call in calls]


class Splitter:
    """Token counts and budgets of one model and decode config."""

    def __init__(
        self,
        engine: Engine,
        max_new_tokens: int,
        chunk_tokens: int | None = None,
        whole_rewrites: bool = True,
    ) -> None:
        self.tokenizer = engine.tokenizer
        self.context = engine.context
        self.max_new_tokens = max_new_tokens
        self.chunk_tokens = chunk_tokens
        # An edit's output must hold its whole piece; a bench measures speed, cut where it is.
        self.whole_rewrites = whole_rewrites

    def count(self, text: str) -> int:
        return len(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def fits(self, task: Task) -> bool:
        """One call does, as before: the prompt leaves room for --max-new-tokens in the context
        (and the document is within --chunk-tokens, when given)."""
        if len(prompt_ids(self.tokenizer, task)) + self.max_new_tokens > self.context:
            return False
        return not self.chunk_tokens or self.count(task.document) <= self.chunk_tokens

    def budget(self, task: Task, rewrite: bool = False) -> int:
        """The most document tokens one call of a cut document takes; for a piece to `rewrite`,
        also no more than its rewrite can take (7/8 of --max-new-tokens, so it may grow)."""
        overhead = len(prompt_ids(self.tokenizer, dataclasses.replace(task, document="")))
        limits = [self.context - self.max_new_tokens - overhead - MARGIN]
        limits += [self.chunk_tokens] if self.chunk_tokens else []
        if rewrite and self.whole_rewrites:
            limits.append(self.max_new_tokens - self.max_new_tokens // REWRITE_ROOM)
        budget = min(limits)
        if budget < 1:
            raise PldError(
                f"input too long: {overhead} prompt tokens without the document + "
                f"{self.max_new_tokens} new tokens (--max-new-tokens) leave no room for it in "
                f"the model's context of {self.context} tokens"
            )
        return budget


def map_reduce(
    task: Task, splitter: Splitter, decode: Decode, map_calls: MapCalls = in_order
) -> list[Part]:
    """Map-reduce until the text fits one call; the last part's text is the summary."""
    parts: list[Part] = []
    current, round_ = task, 1
    while True:
        if splitter.fits(current):
            parts.append(numbered(decode(current, final_label(round_)), len(parts), round_))
            return parts
        done = map_calls(
            lambda call: decode(call[1], call[0]), chunk_tasks(current, splitter, round_)
        )
        parts += [numbered(part, len(parts) + i, round_) for i, part in enumerate(done)]
        joined = "\n\n".join(part.result.text.strip() for part in done) + "\n"
        if splitter.count(joined) >= splitter.count(current.document):
            raise PldError(
                f"the chunk summaries of round {round_} are no shorter than their text; "
                "lower --max-new-tokens or raise --chunk-tokens"
            )
        current, round_ = dataclasses.replace(task, document=joined), round_ + 1


def chunk_tasks(task: Task, splitter: Splitter, round_: int = 1) -> list[tuple[str, Task]]:
    """(where, task) of each chunk of a document too long for one summary call."""
    text = task.document
    spans = balanced(text, splitter.budget(task), splitter.count)
    return [
        (
            f"chunk {i}/{len(spans)}" + (f" of round {round_}" if round_ > 1 else ""),
            dataclasses.replace(task, document=text[start:end].strip() + "\n"),
        )
        for i, (start, end) in enumerate(spans, 1)
    ]


def balanced(text: str, budget: int, count: Count) -> list[Span]:
    """As many chunks as the budget needs, but of even sizes where the structure allows: a
    pass costs more the longer its context, and packing greedily leaves a short last chunk."""
    spans = split_prose(text, budget, count)
    if len(spans) < 2:
        return spans
    even = -(-count(text) // len(spans)) * BALANCE_SLACK // 100
    with contextlib.suppress(TooLong):
        evened = split_prose(text, min(budget, even), count)
        if len(evened) == len(spans):
            return evened
    return spans


def final_label(round_: int) -> str:
    return "the whole document" if round_ == 1 else f"the chunk summaries (round {round_})"


def edit_in_pieces(
    task: Task, splitter: Splitter, decode: Decode, map_calls: MapCalls = in_order
) -> tuple[str, list[Part]]:
    """The edited file and its calls: one, or one per piece, stitched back in order."""
    spans, pieces = piece_tasks(task, splitter)
    if not pieces:
        part = numbered(decode(task, "the whole file"), 0, 1)
        return part.result.text, [part]
    done = map_calls(lambda call: decode(call[1], call[0]), pieces)
    parts = [numbered(part, i, 1) for i, part in enumerate(done)]
    return stitch(task.document, spans, [part.result.text for part in parts]), parts


def piece_tasks(task: Task, splitter: Splitter) -> tuple[list[Span], list[tuple[str, Task]]]:
    """The spans and (where, task) of each piece of a file too long for one edit call; none
    when it fits, or has no top-level boundary to cut at (then it is one call, as before)."""
    if splitter.fits(task):
        return [], []
    text = task.document
    # The outline's size depends on the pieces only through its marker: budget with a sample.
    sample = dataclasses.replace(task, outline=outline(text, [(0, len(text))], 0))
    spans = split_blocks(text, splitter.budget(sample, rewrite=True), splitter.count)
    if len(spans) < 2:
        return [], []
    pieces = [
        (
            f"piece {i + 1}/{len(spans)} ({lines_of(text, span)})",
            dataclasses.replace(
                task, document=text[span[0] : span[1]], outline=outline(text, spans, i)
            ),
        )
        for i, span in enumerate(spans)
    ]
    return spans, pieces


def stitch(text: str, spans: list[Span], pieces: list[str]) -> str:
    """The text with each span replaced by its edited piece; what lies between is kept."""
    out, done = [], 0
    for (start, end), piece in zip(spans, pieces, strict=True):
        out += [text[done:start], piece]
        done = end
    return "".join(out) + text[done:]


def numbered(part: Part, before: int, round_: int) -> Part:
    return dataclasses.replace(part, index=before + 1, round=round_)


def total(parts: list[Part], text: str | None = None, plain: bool = False) -> Result:
    """All calls as one result: `text` (else the last call's), every call's tokens, summed stats."""
    results = [part.plain if plain else part.result for part in parts]
    if len(results) == 1 and text is None:
        return results[0]
    tokens = [token for result in results for token in result.token_ids]
    text = results[-1].text if text is None else text
    return Result(text, tokens, Stats.merged([result.stats for result in results]))


def unfinished(parts: list[Part]) -> Part | None:
    """The first call that stopped before the model's end (EOS), if any."""
    return next((part for part in parts if not part.result.complete), None)
