"""The loop stop and the repetition penalty from the command line, on the tiny random model (which
soon falls into a loop, as small models do)."""

from __future__ import annotations

import json
import shutil

import pytest

from pld_cli.errors import ExitStatus

DOC = "The quarterly report shows revenue of 4.2 million, up 12 percent.\n" * 3
LONG = ["--max-new-tokens", "300", "--json"]
CUT = ExitStatus.INCOMPLETE


def summary(pld, model: str, *args: str) -> dict:
    code, out, err = pld("summarize", "-m", model, *LONG, *args, stdin=DOC.encode())
    result = json.loads(out)
    # A loop stop ends the text (exit 0); running out of --max-new-tokens is a cut (exit 3).
    assert code == (CUT if result["stop"] == "max_new_tokens" else 0), err
    return result


def test_a_looping_summary_stops_at_the_same_token_with_and_without_drafting(pld, tiny_model_dir):
    looped = summary(pld, tiny_model_dir, "--compare")
    assert looped["stop"] == "repetition" and looped["stats"]["new_tokens"] < 300
    assert looped["compare"]["identical"] is True
    # Delivered: up to the end of the loop's first copy; the rest is counted, not shown.
    assert looped["stats"]["removed_tokens"] > 0
    plain = summary(pld, tiny_model_dir, "--no-pld")
    assert plain["stop"] == "repetition" and plain["text"] == looped["text"]
    assert plain["stats"]["removed_tokens"] == looped["stats"]["removed_tokens"]
    going_on = summary(pld, tiny_model_dir, "--allow-repetition")
    assert going_on["stop"] == "max_new_tokens" and going_on["text"].startswith(
        looped["text"].rstrip()
    )


def test_edits_do_not_stop_at_repetition(pld, tiny_model_dir, tmp_path):
    source = tmp_path / "a.txt"
    source.write_text(DOC)
    code, out, _ = pld("edit", str(source), "-i", "shorten", "-m", tiny_model_dir, *LONG)
    assert code == CUT and json.loads(out)["stop"] == "max_new_tokens"


@pytest.fixture
def penalized_model_dir(tiny_model_dir, tmp_path):
    """The tiny model with repetition_penalty 1.5 in its generation_config."""
    folder = tmp_path / "penalized"
    shutil.copytree(tiny_model_dir, folder)
    config = json.loads((folder / "generation_config.json").read_text())
    (folder / "generation_config.json").write_text(json.dumps(config | {"repetition_penalty": 1.5}))
    return str(folder)


def test_the_models_own_penalty_is_used_unless_one_is_given(
    pld, tiny_model_dir, penalized_model_dir
):
    own = summary(pld, penalized_model_dir, "--allow-repetition", "--compare")
    assert own["compare"]["identical"] is True
    given = summary(pld, tiny_model_dir, "--allow-repetition", "--repetition-penalty", "1.5")
    assert own["text"] == given["text"]
    none = summary(pld, penalized_model_dir, "--allow-repetition", "--repetition-penalty", "1")
    assert none["text"] == summary(pld, tiny_model_dir, "--allow-repetition")["text"] != own["text"]
