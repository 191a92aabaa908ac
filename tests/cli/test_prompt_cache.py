"""The CLI's kept prompts: a second `pld edit` on a file with another instruction prefills only
the instruction and prints what a run keeping nothing prints; a damaged file costs one warning and
changes nothing; a file kept under other kernels is never used."""

from __future__ import annotations

import json

import pytest

DOCUMENT = "".join(f"def step_{i}(x):\n    return x * {i} + {i * 7}\n\n" for i in range(30))


@pytest.fixture
def run(pld, tiny_model_dir, tmp_path, monkeypatch):
    """pld edit on one file with the tiny model as int8 (pld's C decoder), its prompts kept in
    their own folder: (JSON result, stderr)."""
    monkeypatch.setattr("pld_cli.loading.kept_prompts.cache_dir", lambda: tmp_path / "cache")
    source = tmp_path / "steps.py"
    source.write_text(DOCUMENT)
    model = ("-m", tiny_model_dir, "--quantize", "int8", "--max-new-tokens", "24")

    def edit(instruction: str, *extra: str) -> tuple[dict, str]:
        code, out, err = pld("edit", str(source), "-i", instruction, *model, "--json", *extra)
        assert code == 3, err  # the tiny random model stops at --max-new-tokens
        return json.loads(out), err

    return edit


def kept_files(tmp_path) -> list:
    return sorted((tmp_path / "cache" / "prompts").glob("*.kv"))


def test_a_second_instruction_reuses_the_document_and_prints_the_same(run, tmp_path):
    first, _ = run("Rename step_1 to first_step.")
    assert first["stats"]["cached_tokens"] == 0 and len(kept_files(tmp_path)) == 1
    second, _ = run("Add a docstring to step_2.")
    plain, _ = run("Add a docstring to step_2.", "--no-prompt-cache")
    prompt = second["stats"]["prompt_tokens"]
    assert prompt - 40 < second["stats"]["cached_tokens"] < prompt
    assert plain["stats"]["cached_tokens"] == 0 and second["text"] == plain["text"]
    again, _ = run("Add a docstring to step_2.")
    assert again["stats"]["cached_tokens"] == prompt - 1 and again["text"] == plain["text"]
    # The second prompt's keys and values, its document copied in: a fresh run's, bit for bit.
    kept = {path.name: path.read_bytes() for path in kept_files(tmp_path)}
    (tmp_path / "cache").rename(tmp_path / "before")
    run("Add a docstring to step_2.")
    (fresh,) = kept_files(tmp_path)
    assert kept[fresh.name] == fresh.read_bytes()


def test_a_damaged_file_is_one_warning_and_the_same_text(run, tmp_path):
    first, _ = run("Rename step_1 to first_step.")
    (path,) = kept_files(tmp_path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    again, err = run("Rename step_1 to first_step.")
    (line,) = [line for line in err.splitlines() if "prompt cache" in line]
    assert line.startswith("pld: warning: prompt cache:") and "ignored" in line
    assert again["stats"]["cached_tokens"] == 0 and again["text"] == first["text"]


def test_a_file_of_other_kernels_is_never_used(run, tmp_path, monkeypatch):
    run("Rename step_1 to first_step.")
    monkeypatch.setattr("pld_cli.loading.kept_prompts.KERNEL_REVISION", -1)
    other, _ = run("Rename step_1 to first_step.")
    assert other["stats"]["cached_tokens"] == 0 and len(kept_files(tmp_path)) == 2
