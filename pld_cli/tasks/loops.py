"""An output the loop stop ended, cut where it began to repeat itself: the passage said once.

The loop stop (core/repetition.py) fires at the third copy of a repeated span, so the text it
ends holds two copies and part of a third. What is delivered ends where the first repeat of a
span begins, moved on to the first sentence or line end within one span from there, else back to
the last one within one span before it (a repeat that begins just after "\n\nThe" ends the text
at the line end, not at "The"), else where the repeat begins; so no span of the delivered text
occurs twice in it. The rule depends only on the tokens, so pld and --no-pld deliver the same
text.
"""

from __future__ import annotations

from collections.abc import Sequence

from pld_cli.core.repetition import LOOP_SPAN, repeat_start

SENTENCE_ENDS = (".", "!", "?", "\n")


def loop_cut(tokens: Sequence[int], tokenizer, span: int = LOOP_SPAN) -> int:
    """How many of `tokens` (an output the loop stop ended) to deliver."""
    start = repeat_start(tokens, span)
    if start is None:
        return len(tokens)
    onward = range(start, min(start + span, len(tokens) + 1))
    back = range(start - 1, max(start - span, 0), -1)
    for cut in [*onward, *back]:
        text = tokenizer.decode(list(tokens[:cut]), skip_special_tokens=True)
        if text.rstrip(" \t").endswith(SENTENCE_ENDS):
            return cut
    return start
