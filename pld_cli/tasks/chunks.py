"""Cutting a long text on its own structure into spans that each fit a token budget.

Prose (for summaries) is cut at the coarsest structure that works: Markdown or RST headings, then
blank-line paragraphs, then lines, then sentences; a unit still too long is cut at the next level,
and neighbouring units are packed together up to the budget. Cuts fall only on whitespace, never
inside a word, so a single over-long sentence or line is an error naming its position. Files to
edit are cut only at top-level blocks (a line at column 0 after a blank line: between top-level
definitions in source code, between paragraphs in text), so every piece is a whole unit; a block
larger than the budget stays one piece. Spans are (start, end) offsets into the text, in order.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from pld_cli.errors import PldError

Span = tuple[int, int]
Count = Callable[[str], int]  # tokens in a text

HEADING = re.compile(
    r"^(?:#{1,6}[ \t]"  # Markdown ATX heading
    r"|(?=[^\n]*\S[^\n]*\n([=\-~^*+#\"'`:.])\1{2,}[ \t]*$))",  # a title over an RST underline
    re.MULTILINE,
)
PARAGRAPH = re.compile(r"\n(?:[ \t]*\n)+")  # one or more blank lines
LINE = re.compile(r"\n")
SENTENCE = re.compile(r"[.!?;:][\"')\]]*[ \t]+")
PROSE_LEVELS = (
    ("heading", HEADING),
    ("paragraph", PARAGRAPH),
    ("line", LINE),
    ("sentence", SENTENCE),
)
BLANK_LINES = re.compile(r"(?:[ \t]*\n)*")
TOP_LEVEL = re.compile(r"\n(?:[ \t]*\n)+(?=[^\s)\]}])")  # a blank line, then a column-0 line


class TooLong(PldError):
    """A unit that no structure splits small enough: one huge sentence or line."""


def cuts(text: str, start: int, end: int, pattern: re.Pattern) -> list[int]:
    """Offsets strictly inside (start, end) where a unit of the pattern's kind begins."""
    inside = []
    for match in pattern.finditer(text, start, end):
        cut = match.start() if pattern is HEADING else match.end()
        if start < cut < end and text[cut:end].strip():
            inside.append(cut)
    return list(dict.fromkeys(inside))


def units(start: int, end: int, at: list[int]) -> list[Span]:
    bounds = [start, *at, end]
    return list(zip(bounds, bounds[1:], strict=False))


def split_prose(text: str, budget: int, count: Count) -> list[Span]:
    """Spans of at most `budget` tokens each, cut at the coarsest structure that allows it."""
    return pack_prose(text, 0, len(text), 0, budget, count)


def pack_prose(
    text: str, start: int, end: int, level: int, budget: int, count: Count
) -> list[Span]:
    if count(text[start:end]) <= budget:
        return [(start, end)]
    if level == len(PROSE_LEVELS):
        raise TooLong(
            f"cannot split the text at {position(text, start)} into chunks of {budget} tokens: "
            "one sentence or line is longer than that"
        )
    at = cuts(text, start, end, PROSE_LEVELS[level][1])
    if not at:
        return pack_prose(text, start, end, level + 1, budget, count)
    spans: list[Span] = []
    current: Span | None = None
    for a, b in units(start, end, at):
        if current and count(text[current[0] : b]) <= budget:
            current = (current[0], b)
            continue
        if current:
            spans.append(current)
        current = (a, b) if count(text[a:b]) <= budget else None
        if current is None:
            spans += pack_prose(text, a, b, level + 1, budget, count)
    return spans + ([current] if current else [])


def split_blocks(text: str, budget: int, count: Count) -> list[Span]:
    """Consecutive runs of top-level blocks of at most `budget` tokens; an over-long block is a
    span of its own. Each span ends after its last non-blank line; blank lines between spans
    belong to no span (they are copied as they are)."""
    spans: list[Span] = []
    for a, b in block_units(text):
        if spans and count(text[spans[-1][0] : b]) <= budget:
            spans[-1] = (spans[-1][0], b)
        else:
            spans.append((a, b))
    return spans


def block_units(text: str) -> list[Span]:
    """The top-level blocks: from a column-0 line after a blank line to its last non-blank line."""
    blocks = []
    for a, b in units(0, len(text), cuts(text, 0, len(text), TOP_LEVEL)):
        chunk = text[a:b]
        if chunk.strip():
            lead = BLANK_LINES.match(chunk).end()
            blocks.append((a + lead, line_end(text, a + len(chunk.rstrip()))))
    return blocks


def line_end(text: str, offset: int) -> int:
    """The offset just past the newline ending the line at offset (or the end of the text)."""
    newline = text.find("\n", offset)
    return len(text) if newline < 0 else newline + 1


def position(text: str, offset: int) -> str:
    line = text.count("\n", 0, offset) + 1
    column = offset - (text.rfind("\n", 0, offset) + 1) + 1
    return f"line {line}, column {column}"


def lines_of(text: str, span: Span) -> str:
    """'lines A-B' of a span, 1-based."""
    first = text.count("\n", 0, span[0]) + 1
    last = first + text.count("\n", span[0], span[1] - 1)
    return f"lines {first}-{last}"


def outline(text: str, spans: list[Span], current: int, limit: int = 40) -> str:
    """The first line of each top-level block with its line number, the current piece marked: a
    short map of the whole file for the model editing one piece (at most `limit` rows around it).
    """
    rows, here = [], 0
    for a, _ in block_units(text):
        mark = ""
        if a == spans[current][0]:
            mark, here = "  <- this part", len(rows)
        first_line = text[a : line_end(text, a)].rstrip()[:80]
        rows.append(f"{text.count(chr(10), 0, a) + 1:>5}: {first_line}{mark}")
    start = max(0, min(here - limit // 2, len(rows) - limit))
    return "\n".join(rows[start : start + limit])
