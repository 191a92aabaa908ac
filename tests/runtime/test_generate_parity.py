"""pld's decode loop equals transformers' own greedy `generate()`, drafting on, for families whose
caches need more than cropping: sliding windows (passed long before the end), conv and recurrent
state. Drafts are both accepted and rejected, so rollbacks happen past the window."""

import pytest
import torch
from conftest import repetitive_prompt
from families import tiny_family_model

from pld_cli.core.decode import DecodeConfig, Pass, generate
from pld_cli.core.stats import Stats
from pld_cli.engines.local import LocalEngine, decode_ids
from pld_cli.errors import PldError
from pld_cli.runtime.hf.dynamic import DynamicRuntime
from pld_cli.runtime.hf.static import StaticRuntime
from pld_cli.runtime.native.runtime import NativeRuntime
from pld_cli.tasks.pipeline import task_ids
from pld_cli.tasks.prompts import Task

NEW = 30


@pytest.mark.parametrize(
    "family,runtime",
    [
        ("mistral", "static"),
        ("gemma3", "dynamic"),
        ("gpt_oss", "static"),
        ("lfm2", "dynamic"),
        ("qwen3_next", "dynamic"),
    ],
)
def test_pld_equals_transformers_generate(family, runtime):
    model = tiny_family_model(family)
    prompt = repetitive_prompt(0)[:40]
    with torch.inference_mode():
        out = model.generate(torch.tensor([prompt]), max_new_tokens=NEW, do_sample=False)
    expected = out[0, len(prompt) :].tolist()
    try:
        cache = DynamicRuntime(model) if runtime == "dynamic" else StaticRuntime(model, 128)
    except PldError as why:  # older transformers: no cache layers for conv/recurrent state
        pytest.skip(str(why))
    stats, tokens = Stats(), []
    for event in generate(cache, prompt, {2}, DecodeConfig(max_new_tokens=NEW, draft="fixed")):
        stats.add(event)
        if isinstance(event, Pass):
            tokens.extend(event.emitted)
    assert tokens == expected
    assert stats.accepted_tokens < stats.drafted_tokens  # rejections, after the window of 8


@pytest.mark.parametrize("penalty", [1.1, 1.5])
@pytest.mark.parametrize("runtime", ["native", "static", "dynamic"])
def test_repetition_penalty_equals_transformers_generate(runtime, penalty):
    """Each verified position gets the penalty over the tokens before it, earlier tokens of the
    same pass included: the output is generate(repetition_penalty=...)'s, drafting on. (1.5: a
    penalty strong enough that missing the pass's first token would change the output.)"""
    model = tiny_family_model("llama")
    prompt = repetitive_prompt(1)[:48]
    with torch.inference_mode():
        out = model.generate(
            torch.tensor([prompt]), max_new_tokens=NEW, do_sample=False, repetition_penalty=penalty
        )
        plain_out = model.generate(torch.tensor([prompt]), max_new_tokens=NEW, do_sample=False)
    expected = out[0, len(prompt) :].tolist()
    assert expected != plain_out[0, len(prompt) :].tolist()  # the penalty matters here
    runtimes = {
        "native": lambda: NativeRuntime(model, 128),
        "static": lambda: StaticRuntime(model, 128),
        "dynamic": lambda: DynamicRuntime(model),
    }
    cache = runtimes[runtime]()
    config = DecodeConfig(max_new_tokens=NEW, draft="fixed", repetition_penalty=penalty)
    stats, tokens = Stats(), []
    for event in generate(cache, prompt, {2}, config):
        stats.add(event)
        if isinstance(event, Pass):
            tokens.extend(event.emitted)
    assert tokens == expected
    assert 0 < stats.accepted_tokens < stats.drafted_tokens  # drafts kept and rejected


@pytest.mark.slow
def test_default_model_repetition_penalty_equals_transformers_generate(default_model):
    task = Task(
        "summarize",
        "The library opens at nine. The library closes at five. Members "
        "may borrow six books. Members may renew books twice online.\n",
        name="lib.txt",
    )
    # Fixed drafts: verified whatever this machine's passes cost (adaptive may verify none).
    config = DecodeConfig(max_new_tokens=48, draft="fixed", repetition_penalty=1.1)
    ids = task_ids(LocalEngine(default_model), task, config)
    with torch.inference_mode():
        out = default_model.model.generate(
            torch.tensor([ids]), max_new_tokens=48, do_sample=False, repetition_penalty=1.1
        )
    expected = out[0, len(ids) :].tolist()
    tokens, stats = decode_ids(default_model, ids, config)  # drafting on, the default runtime
    assert tokens == expected[: len(tokens)] and (
        len(tokens) == len(expected) or stats.stop == "eos"
    )
    assert stats.accepted_tokens > 0
