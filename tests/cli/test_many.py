"""Several files in one run, long documents in parts, and --diff, from the command line.

Edits that must finish (EOS) use a scripted `run_task` in place of the tiny random model's decode,
which never ends on its own; the long summary runs the tiny model itself.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from pld_cli.core.stats import Stats
from pld_cli.errors import ExitStatus
from pld_cli.tasks.result import Result

CUT = ExitStatus.INCOMPLETE
SOURCE = "def f(x):\n    return x + 1\n"
SECTION = (
    "## Part {n}\n\n" + "The report for part {n} lists revenue, costs and plans. " * 8 + "\n\n"
)


def errors(err: str) -> list[str]:
    assert "Traceback" not in err
    return [line for line in err.splitlines() if line.startswith("pld: error:")]


@pytest.fixture
def scripted_edit(monkeypatch):
    """Edits rename f to g and finish at EOS, except in files containing 'LONG' (cut short)."""

    def run_task(loaded, task, config, observe=None):
        stop = "max_new_tokens" if "LONG" in task.document else "eos"
        text = task.document.replace("def f", "def g")
        return Result(text, [1, 2], Stats(new_tokens=2, passes=1, decode_s=0.1, stop=stop))

    monkeypatch.setattr("pld_cli.cli.run.run_task", run_task)


def files(tmp_path, **contents) -> list[str]:
    paths = []
    for name, content in contents.items():
        path = tmp_path / f"{name}.py"
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
        paths.append(str(path))
    return paths


def test_several_edits_with_a_bad_file_in_the_middle(pld, tiny, tmp_path, scripted_edit):
    a, bad, cut, d = files(tmp_path, a=SOURCE, bad=b"\x00\x01", cut=SOURCE + "# LONG\n", d=SOURCE)
    code, out, err = pld("edit", a, bad, cut, d, "-i", "rename f to g", "--write", *tiny)
    assert code == 1 and out == ""
    assert Path(a).read_text() == Path(d).read_text() == SOURCE.replace("def f", "def g")
    assert Path(cut).read_text() == SOURCE + "# LONG\n"  # cut short: untouched
    lines = errors(err)
    assert "binary" in lines[0] and "cut.py" in lines[1] and "left untouched" in lines[1]
    assert "2 of 4 files failed" in lines[2]
    assert "2 files done, 2 failed" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.py", "bad.py", "cut.py", "d.py"]


def test_diff_applies_with_git_and_no_change_says_so(
    pld, tiny, tmp_path, scripted_edit, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    files(tmp_path, a=SOURCE, same="x = 1\n")
    code, out, err = pld("edit", "a.py", "same.py", "-i", "rename f to g", "--diff", *tiny)
    assert code == 0, err
    assert out.startswith("--- a/a.py\n+++ b/a.py\n") and "same.py" not in out
    assert "same.py: no changes" in err
    subprocess.run(["git", "apply", "--check", "-"], input=out, text=True, check=True)
    assert (tmp_path / "a.py").read_text() == SOURCE  # --diff alone writes nothing


def test_write_and_diff_puts_the_diff_on_stderr(pld, tiny, tmp_path, scripted_edit):
    (path,) = files(tmp_path, a=SOURCE)
    code, out, err = pld("edit", path, "-i", "rename f to g", "--write", "--diff", *tiny)
    assert code == 0 and out == ""
    assert "+def g(x):" in err and Path(path).read_text() == SOURCE.replace("def f", "def g")


def test_several_edits_to_stdout_are_a_usage_error(pld, tmp_path):
    code, out, err = pld("edit", *files(tmp_path, a=SOURCE, b=SOURCE), "-i", "x")
    assert code == 2 and out == ""
    assert "--write" in errors(err)[0]


def test_several_summaries_have_headers_or_json_lines(pld, tiny, tmp_path):
    paths = files(tmp_path, a="Revenue rose.\n", b="Costs fell.\n")
    code, out, _ = pld("summarize", *paths, *tiny, "-q")
    assert code == CUT  # the tiny model never ends on its own
    assert out.startswith(f"==> {paths[0]} <==\n") and f"\n\n==> {paths[1]} <==\n" in out
    code, out, err = pld("summarize", *paths, *tiny, "--json")
    assert code == CUT
    assert [json.loads(line)["file"] for line in out.splitlines()] == paths
    assert "2 files done, 0 failed (2 cut short at --max-new-tokens)" in err


def test_a_long_summary_goes_in_chunks_each_exact(pld, tiny, tmp_path):
    (path,) = files(tmp_path, long="".join(SECTION.format(n=n) for n in range(6)))
    code, out, err = pld("summarize", path, *tiny, "--chunk-tokens", "200", "--compare", "--json")
    assert code == CUT, err
    result = json.loads(out)
    chunks = result["chunks"]
    assert len(chunks) > 2 and chunks[-1]["round"] == 2
    assert {"index", "chars", "prompt_tokens", "stats"} <= set(chunks[0])
    assert all(chunk["identical"] for chunk in chunks) and result["compare"]["identical"]
    assert result["stats"]["new_tokens"] == sum(c["stats"]["new_tokens"] for c in chunks)
    assert "pld calls" in err  # the per-call table
    assert result["stop"] == "max_new_tokens" and chunks[0]["stop"] == "max_new_tokens"
    assert "incomplete: generation of chunk 1/" in err  # the first call cut short, named


def test_an_unsplittable_line_is_an_error_with_its_position(pld, tiny, tmp_path):
    (path,) = files(tmp_path, line="Intro.\n\n" + "word " * 400 + "\n")
    code, out, err = pld("summarize", path, *tiny, "--chunk-tokens", "100")
    assert code == 1 and out == ""
    assert "line 3, column 1" in errors(err)[0]


@pytest.mark.slow
def test_default_model_summarizes_three_contexts_exactly(pld, tmp_path, default_model):
    samples = sorted(Path(__file__).parents[2].joinpath("samples", "summarize").glob("*.[mt][dx]*"))
    parts, count = [], 0
    while count < 3 * 8192:  # SmolLM2's context, three times over
        sample = samples[len(parts) % len(samples)]
        parts.append(f"# {sample.name} ({len(parts)})\n\n{sample.read_text()}\n")
        count += len(default_model.tokenizer(parts[-1])["input_ids"])
    path = tmp_path / "long.md"
    path.write_text("".join(parts))
    code, out, err = pld("summarize", str(path), "--max-new-tokens", "16", "--compare", "--json")
    assert code in (0, CUT), err  # 16 tokens: chunk summaries may be cut short
    result = json.loads(out)
    assert len([c for c in result["chunks"] if c["round"] == 1]) >= 3
    assert all(chunk["identical"] for chunk in result["chunks"])
