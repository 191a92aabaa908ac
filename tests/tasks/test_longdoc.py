"""Map-reduce summaries and pieced edits, with a scripted decode instead of a model."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from transformers import AutoTokenizer

from pld_cli.core.stats import Stats
from pld_cli.errors import PldError
from pld_cli.tasks import longdoc
from pld_cli.tasks.longdoc import Part, Splitter
from pld_cli.tasks.prompts import Task
from pld_cli.tasks.result import Result


@pytest.fixture(scope="module")
def tokenizer(tiny_model_dir):
    return AutoTokenizer.from_pretrained(tiny_model_dir)


def splitter(tokenizer, max_new_tokens=32, chunk_tokens=None, context=2048) -> Splitter:
    engine = SimpleNamespace(tokenizer=tokenizer, context=context)
    return Splitter(engine, max_new_tokens, chunk_tokens)


def scripted(answer, calls: list[Task], stop: str = "eos"):
    def decode(task: Task, where: str) -> Part:
        calls.append(task)
        text = answer(task)
        stats = Stats(prompt_tokens=10, new_tokens=len(text.split()), passes=1, stop=stop)
        return Part(0, 0, where, len(task.document), Result(text, [len(calls)], stats))

    return decode


def first_sentence(task: Task) -> str:
    return task.document.strip().split(". ")[0][:40] + ".\n"


SECTION = "## Section {n}\n\n" + "Paragraph {n} says many things about the report. " * 12 + "\n\n"
LONG = "".join(SECTION.format(n=n) for n in range(12))


def test_a_document_that_fits_is_one_call(tokenizer):
    calls = []
    parts = longdoc.map_reduce(
        Task("summarize", "Short text."), splitter(tokenizer), scripted(first_sentence, calls)
    )
    assert len(parts) == 1 and calls == [Task("summarize", "Short text.")]


def test_long_documents_are_mapped_then_reduced(tokenizer):
    calls = []
    cut = splitter(tokenizer, chunk_tokens=300)
    parts = longdoc.map_reduce(Task("summarize", LONG), cut, scripted(first_sentence, calls))
    assert [p.round for p in parts] == [1] * (len(parts) - 1) + [2]
    assert [p.index for p in parts] == list(range(1, len(parts) + 1))
    assert all(cut.count(t.document) <= 300 for t in calls)
    assert calls[0].document.startswith("## Section 0")
    total = longdoc.total(parts)
    assert total.text == parts[-1].result.text
    assert total.stats.new_tokens == sum(p.result.stats.new_tokens for p in parts)
    assert total.token_ids == list(range(1, len(parts) + 1))


def test_a_chunk_cut_short_makes_the_whole_summary_cut_short():
    runs = [Stats(stop="eos"), Stats(stop="max_new_tokens"), Stats(stop="eos")]
    assert Stats.merged(runs).stop == "max_new_tokens"  # not the last call's "eos"
    assert Stats.merged(runs[:1]).stop == "eos"


def test_summaries_that_do_not_shrink_are_an_error(tokenizer):
    cut = splitter(tokenizer, chunk_tokens=300)
    with pytest.raises(PldError, match="no shorter"):
        longdoc.map_reduce(Task("summarize", LONG), cut, scripted(lambda t: t.document, []))


CODE = "".join(f"def f{n}(x):\n    return x + {n}\n\n\n" for n in range(40))


def test_a_long_edit_goes_in_pieces_with_an_outline(tokenizer):
    calls = []
    text, parts = longdoc.edit_in_pieces(
        Task("edit", CODE, "Add one.", "a.py"),
        splitter(tokenizer, max_new_tokens=64, chunk_tokens=200),
        scripted(lambda t: t.document.replace("return x", "return 1 + x"), calls),
    )
    assert len(parts) > 2
    assert text == CODE.replace("return x", "return 1 + x")
    assert all(t.outline and "<- this part" in t.outline for t in calls)
    assert parts[1].where.startswith(f"piece 2/{len(parts)} (lines ")
    assert longdoc.unfinished(parts) is None


def test_a_piece_cut_short_is_named(tokenizer):
    _, parts = longdoc.edit_in_pieces(
        Task("edit", CODE, "Add one.", "a.py"),
        splitter(tokenizer, max_new_tokens=64, chunk_tokens=200),
        scripted(lambda t: t.document, [], stop="max_new_tokens"),
    )
    assert longdoc.unfinished(parts) is parts[0]


def test_a_short_edit_is_one_call(tokenizer):
    calls = []
    task = Task("edit", CODE[:60], "Add one.", "a.py")
    text, parts = longdoc.edit_in_pieces(
        task, splitter(tokenizer), scripted(lambda t: "x\n", calls)
    )
    assert text == "x\n" and calls == [task]


def test_no_room_for_the_document(tokenizer):
    with pytest.raises(PldError, match="input too long"):
        splitter(tokenizer, max_new_tokens=2040).budget(Task("summarize", LONG))


def test_chunks_are_of_even_sizes(tokenizer):
    cut = splitter(tokenizer, chunk_tokens=1300)  # greedy packing: 1289 tokens, then 283
    sizes = [cut.count(t.document) for _, t in longdoc.chunk_tasks(Task("summarize", LONG), cut)]
    assert len(sizes) == 2 and max(sizes) <= 1300 and min(sizes) > max(sizes) * 0.8
