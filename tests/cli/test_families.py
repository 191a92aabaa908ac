"""Every family users bring, through the command line: with --compare the output is identical to
--no-pld, or drafting is refused in one line and --no-pld works; never a traceback."""

from __future__ import annotations

import json

import pytest
from conftest import narrowed
from families import FAMILIES, tiny_family_model
from transformers import AutoTokenizer

from pld_cli.errors import ExitStatus
from pld_cli.loading.models import ModelSpec, locate
from pld_cli.runtime.hf import compat

# A document that repeats itself, so drafts are found; the models write only its tokens (narrowed).
DOC = "Revenue rose 12 percent to 4.2 million; costs fell 3 percent to 1.1 million.\n" * 4
# Families whose conv/recurrent state needs transformers' linear-attention cache layers.
STATEFUL = {"lfm2", "qwen3_next", "mamba"}
# transformers' Mamba restarts its state on a multi-position pass: drafting is refused.
REFUSED = {"mamba"}
# Every variant drafts a fixed length, so each checks drafts kept and rejected (the adaptive policy
# is test_exactness.py's); "auto" also calibrates the runtime auto picks (it rolls back past every
# window) once per family.
VARIANTS = {
    "auto": ["--draft", "fixed", "--compare"],
    "dynamic-verbose": ["--runtime", "dynamic", "--draft", "fixed", "--verbose", "--compare"],
    "sampled": ["--runtime", "dynamic", "--draft", "fixed", "--temperature", "0.8", "--compare"],
}


@pytest.fixture(autouse=True)
def short_calibration(monkeypatch):
    """Pass costs measured on top of 64 positions (still 8 windows) and once each, not 1,024 and
    five times: the same code, a fraction of the time."""
    monkeypatch.setattr("pld_cli.runtime.calibration.costs.CONTEXT", 64)
    monkeypatch.setattr("pld_cli.runtime.calibration.costs.REPEATS", 1)


@pytest.fixture(scope="session")
def family_dir(tmp_path_factory):
    """family -> a folder with a tiny random model of it and the default model's tokenizer."""
    tokenizer = AutoTokenizer.from_pretrained(locate(ModelSpec(), lambda _: None)[0])
    folders: dict[str, str] = {}

    def build(family: str) -> str:
        if family not in folders:
            folder = tmp_path_factory.mktemp(family)
            model = tiny_family_model(family, vocab_size=len(tokenizer))
            narrowed(model, tokenizer(DOC, add_special_tokens=False)["input_ids"])
            model.generation_config.eos_token_id = tokenizer.eos_token_id
            model.save_pretrained(folder)
            tokenizer.save_pretrained(folder)
            folders[family] = str(folder)
        return folders[family]

    return build


def expected(family: str) -> str:
    if family in STATEFUL and not compat.HAS_LINEAR_ATTENTION_LAYERS:
        return "too old"  # refused with or without drafting
    return "refused" if family in REFUSED else "identical"


# A tiny random model runs to --max-new-tokens (exit 3), unless it happens to draw its EOS.
FINISHED = (ExitStatus.OK, ExitStatus.INCOMPLETE)


@pytest.mark.parametrize("variant", list(VARIANTS))
@pytest.mark.parametrize("family", list(FAMILIES))
def test_family_through_the_cli(pld, family_dir, family, variant):
    args = ["summarize", "-m", family_dir(family), "--max-new-tokens", "12", "--json"]
    code, out, err = pld(*args, *VARIANTS[variant], stdin=DOC.encode())
    assert "Traceback" not in err
    outcome = expected(family)
    if outcome == "identical":
        assert code in FINISHED, err
        result = json.loads(out)
        stats = result["stats"]
        assert stats["drafted_tokens"] > stats["accepted_tokens"]  # some drafts rejected
        if variant != "sampled":  # a sampled run may keep none
            assert stats["accepted_tokens"] > 0  # and some kept: identity means something
        assert result["compare"]["identical"] is True  # sampled: the same seed, the same tokens
        return
    assert code == 1
    errors = [line for line in err.splitlines() if "error" in line]
    assert len(errors) == 1 and errors[0] == err.splitlines()[-1], err  # one line, the last
    assert errors[0].startswith("pld: error: ")
    assert ("--no-pld" in err) == (outcome == "refused")
    code, out, err = pld(*args, "--no-pld", stdin=DOC.encode())
    assert code in (FINISHED if outcome == "refused" else (ExitStatus.ERROR,)), err


def test_sampling_does_not_fall_back_to_greedy(pld, tiny_model_dir):
    args = ["summarize", "-m", tiny_model_dir, "--max-new-tokens", "12", "--json"]
    texts = {
        json.loads(pld(*args, *extra, stdin=DOC.encode())[1])["text"]
        for extra in (
            ["--temperature", "0"],
            ["--temperature", "1.5", "--seed", "1"],
            ["--temperature", "1.5", "--seed", "2"],
        )
    }
    assert len(texts) == 3  # random tiny model, 49k tokens: equal texts mean greedy
