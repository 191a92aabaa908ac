"""The splitter: headings, then paragraphs, lines, sentences; code between top-level blocks."""

from __future__ import annotations

import pytest

from pld_cli.tasks.chunks import (
    TooLong,
    block_units,
    lines_of,
    outline,
    split_blocks,
    split_prose,
)
from pld_cli.tasks.longdoc import stitch


def words(text: str) -> int:
    return len(text.split())


def pieces(text: str, spans) -> list[str]:
    return [text[a:b] for a, b in spans]


MARKDOWN = (
    "# Title\n\nIntro one. Intro two.\n\nMore.\n\n"
    "## Part A\n\nA text here now.\n\nA2 text.\n\n"
    "## Part B\n\nB text b b.\n"
)


def test_a_text_that_fits_is_one_span():
    assert split_prose(MARKDOWN, 100, words) == [(0, len(MARKDOWN))]


def test_markdown_headings_come_first():
    assert pieces(MARKDOWN, split_prose(MARKDOWN, 12, words)) == [
        "# Title\n\nIntro one. Intro two.\n\nMore.\n\n",
        "## Part A\n\nA text here now.\n\nA2 text.\n\n",
        "## Part B\n\nB text b b.\n",
    ]


def test_rst_headings_are_headings():
    rst = "Title\n=====\n\nText one.\n\nSection\n-------\n\nText two.\n"
    assert pieces(rst, split_prose(rst, 5, words)) == [
        "Title\n=====\n\nText one.\n\n",
        "Section\n-------\n\nText two.\n",
    ]


def test_paragraphs_then_sentences():
    text = "One two three. Four five six.\n\nSeven eight.\n"
    assert pieces(text, split_prose(text, 3, words)) == [
        "One two three. ",
        "Four five six.\n\n",
        "Seven eight.\n",
    ]


def test_spans_cover_the_text_in_order_and_never_cut_a_word():
    text = MARKDOWN * 5
    for budget in (4, 7, 12, 30):
        spans = split_prose(text, budget, words)
        assert "".join(pieces(text, spans)) == text
        assert all(words(text[a:b]) <= budget for a, b in spans)
        for a, _ in spans[1:]:
            assert text[a - 1].isspace() or text[a] == "#"


def test_an_unsplittable_sentence_names_its_position():
    text = "Short.\n\n" + "word " * 20 + "end.\n"
    with pytest.raises(TooLong, match="line 3, column 1"):
        split_prose(text, 5, words)


CODE = (
    "import os\n\n\n"
    "def f(x):\n    y = 1\n\n    return y\n\n\n"
    "class A:\n    pass\n\n\n"
    "if __name__ == '__main__':\n    f(1)\n"
)


def test_code_is_cut_only_between_top_level_blocks():
    assert pieces(CODE, block_units(CODE)) == [
        "import os\n",
        "def f(x):\n    y = 1\n\n    return y\n",  # the blank line inside f is no boundary
        "class A:\n    pass\n",
        "if __name__ == '__main__':\n    f(1)\n",
    ]


def test_blocks_are_packed_and_a_big_block_stays_whole():
    spans = split_blocks(CODE, 6, words)
    assert pieces(CODE, spans) == [
        "import os\n",
        "def f(x):\n    y = 1\n\n    return y\n",
        "class A:\n    pass\n",
        "if __name__ == '__main__':\n    f(1)\n",
    ]
    assert pieces(CODE, split_blocks(CODE, 1, words))[1].startswith("def f")
    assert len(split_blocks(CODE, 100, words)) == 1


def test_stitching_unchanged_pieces_gives_the_file_back():
    spans = split_blocks(CODE, 6, words)
    assert stitch(CODE, spans, pieces(CODE, spans)) == CODE
    edited = stitch(CODE, spans, [p.replace("f(", "g(") for p in pieces(CODE, spans)])
    assert edited == CODE.replace("f(", "g(")


def test_outline_lists_the_blocks_and_marks_the_piece():
    spans = split_blocks(CODE, 6, words)
    text = outline(CODE, spans, 1)
    assert text.splitlines() == [
        "    1: import os",
        "    4: def f(x):  <- this part",
        "   10: class A:",
        "   14: if __name__ == '__main__':",
    ]
    assert lines_of(CODE, spans[1]) == "lines 4-7"
