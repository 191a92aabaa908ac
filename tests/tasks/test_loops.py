"""A looping output is delivered up to the end of its loop's first copy, at a sentence end."""

from pld_cli.core.repetition import LoopStop
from pld_cli.tasks.loops import loop_cut

INTRO = "The memo covers three points."
LOOP = " The document is a summary of the Python documentation."


def stopped(tokenizer, text: str) -> list[int]:
    """The tokens of `text` up to where the loop stop ends them."""
    tokens = tokenizer(text, add_special_tokens=False)["input_ids"]
    keep = LoopStop().extend(tokens)
    assert keep is not None, "the text must loop"
    return tokens[:keep]


def delivered(tokenizer, text: str) -> str:
    tokens = stopped(tokenizer, text)
    return tokenizer.decode(tokens[: loop_cut(tokens, tokenizer)])


def test_a_loop_is_delivered_once_after_what_came_before(tokenizer):
    assert delivered(tokenizer, INTRO + LOOP * 6) == INTRO + LOOP


def test_a_loop_that_began_mid_sentence_ends_at_a_sentence_end(tokenizer):
    # The intro ends with the loop's own last words, so the repeats begin inside it.
    text = "We read it twice: a summary of the Python documentation." + LOOP * 6
    out = delivered(tokenizer, text)
    assert out.endswith("documentation.") and out.count(LOOP.strip()) == 1


def test_a_loop_that_begins_after_a_line_start_ends_at_that_line_end(tokenizer):
    # Each repeat follows "\n\nThe", the first copy ", also": the repeats begin after "The",
    # and no sentence ends in the span that follows.
    run = (
        " extension will also include a public exhibition showing detailed designs of the four"
        " stops and a business support fund for the shops along the route"
    )
    out = delivered(tokenizer, INTRO + " Also, the" + run + ("\n\nThe" + run) * 6)
    assert out == INTRO + " Also, the" + run + "\n\n"


def test_an_output_that_ends_without_a_loop_is_kept_whole(tokenizer):
    tokens = tokenizer(INTRO + LOOP, add_special_tokens=False)["input_ids"]
    assert loop_cut(tokens, tokenizer) == len(tokens)
