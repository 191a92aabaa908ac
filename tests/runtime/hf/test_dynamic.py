"""The dynamic runtime's rollback leaves exactly the state plain decoding reaches, for every layer
kind: full attention, sliding windows (rolled back after the sequence passed the window), conv
states and recurrent states."""

import pytest
import torch
from families import WINDOW, tiny_family_model

from pld_cli.errors import PldError, Unsupported
from pld_cli.runtime.hf import compat
from pld_cli.runtime.hf.dynamic import DynamicRuntime

PROMPT = 30  # past every family's window
assert PROMPT > 2 * WINDOW


def runtime(family: str) -> DynamicRuntime:
    try:
        return DynamicRuntime(tiny_family_model(family))
    except PldError as why:  # older transformers: no cache layers for conv/recurrent state
        pytest.skip(str(why))


@pytest.mark.parametrize("family", ["llama", "mistral", "gemma3", "lfm2", "qwen3_next"])
@pytest.mark.parametrize("keep", [0, 2])  # positions of a 6-position draft pass that are kept
def test_a_rejected_draft_leaves_no_trace(family, keep):
    ids = torch.randint(3, 64, (44,), generator=torch.Generator().manual_seed(keep)).tolist()
    drafted = runtime(family)
    drafted.prefill(ids[:PROMPT])
    drafted.forward(ids[PROMPT : PROMPT + 6])
    drafted.rollback(PROMPT + keep)
    plain = DynamicRuntime(drafted.model)
    plain.prefill(ids[: PROMPT + keep])
    assert drafted.length == plain.length == PROMPT + keep
    for layer, reference in zip(drafted.cache.layers, plain.cache.layers, strict=True):
        if getattr(layer, "keys", None) is not None:
            torch.testing.assert_close(layer.keys, reference.keys, rtol=1e-4, atol=1e-5)
    states = compat.recurrent_states(drafted.cache)
    for state, reference in zip(states, compat.recurrent_states(plain.cache), strict=True):
        torch.testing.assert_close(state, reference, rtol=1e-4, atol=1e-5)
    after = ids[PROMPT + 6 : PROMPT + 10]
    torch.testing.assert_close(drafted.forward(after), plain.forward(after), rtol=1e-4, atol=1e-5)


def test_a_rollback_before_the_last_pass_of_a_recurrent_model_is_refused():
    drafted = runtime("qwen3_next")
    drafted.prefill(list(range(3, 20)))
    drafted.forward([5, 6, 7])
    with pytest.raises(ValueError, match="within the last pass"):
        drafted.rollback(10)


def test_a_cache_pld_cannot_roll_back_refuses_drafting_only(monkeypatch):
    def unsupported(model):
        raise Unsupported("its FancyLayer cache layers")

    monkeypatch.setattr(compat, "rollback_cache", unsupported)
    plain = runtime("llama")
    plain.prefill([5, 6, 7])
    plain.forward([8])  # decoding without drafts works
    with pytest.raises(PldError, match="cannot draft for this model: its FancyLayer"):
        plain.rollback(3)


def test_a_model_whose_passes_restart_its_recurrent_state_refuses_drafting():
    # transformers' Mamba runs a pass over several positions from a zero state: a verify pass
    # would see none of the document. Plain decoding (one position per pass) is unaffected.
    # (transformers 5.17 fails earlier: its Mamba cache cannot be cut back.)
    mamba = runtime("mamba")
    assert "restarts its recurrent state" in mamba.refusal or "cut its cache back" in mamba.refusal
    assert runtime("qwen3_next").refusal is None
