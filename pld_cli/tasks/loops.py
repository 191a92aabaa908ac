"""An output the loop stop ended, cut where its loop began: the looping passage said once.

The loop stop (core/repetition.py) fires at the third copy of a repeated span, so the text it
ends holds two copies and part of a third. What is delivered ends after the first whole copy, at
the first sentence or line end from there on (within one period, so no second whole copy is
kept), else exactly where the repeats begin. The rule depends only on the tokens, so pld and
--no-pld deliver the same text.
"""

from __future__ import annotations

from collections.abc import Sequence

from pld_cli.core.repetition import LOOP_SPAN, loop_copies

SENTENCE_ENDS = (".", "!", "?", "\n")


def loop_cut(tokens: Sequence[int], tokenizer, span: int = LOOP_SPAN) -> int:
    """How many of `tokens` (an output the loop stop ended) to deliver."""
    found = loop_copies(tokens, span)
    if found is None:
        return len(tokens)
    start, period = found
    for cut in range(start, min(start + period, len(tokens))):
        text = tokenizer.decode(list(tokens[:cut]), skip_special_tokens=True)
        if text.rstrip(" \t").endswith(SENTENCE_ENDS):
            return cut
    return start
