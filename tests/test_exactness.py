"""Greedy pld output is token-identical to plain decoding (drafting off), in float32."""

import dataclasses
from concurrent.futures import ThreadPoolExecutor

import pytest
from conftest import repetitive_prompt, tiny_llama

from pld_cli.core.config import DecodeConfig
from pld_cli.core.decode import Pass, generate
from pld_cli.core.stats import Stats
from pld_cli.engines.local import LocalEngine, decode_ids
from pld_cli.loading.models import ModelSpec, load_model
from pld_cli.runtime.hf.dynamic import DynamicRuntime
from pld_cli.runtime.hf.static import StaticRuntime
from pld_cli.runtime.names import RuntimeName
from pld_cli.runtime.native.runtime import NativeRuntime
from pld_cli.tasks.pipeline import run_task, task_ids
from pld_cli.tasks.prompts import Task

CPU_COSTS = [0.0] + [1.0 + 0.1 * (q - 1) for q in range(1, 20)]  # t(11) = 2 t(1)
RUNTIMES = {
    "dynamic": DynamicRuntime,
    "static": lambda model: StaticRuntime(model, 256),
    "native": lambda model: NativeRuntime(model, 256),
}


def decode(model, prompt, config, costs=None, runtime="dynamic"):
    stats, tokens = Stats(), []
    for event in generate(RUNTIMES[runtime](model), prompt, {2}, config, costs):
        stats.add(event)
        if isinstance(event, Pass):
            tokens.extend(event.emitted)
    return tokens, stats


@pytest.mark.parametrize("runtime", list(RUNTIMES))
@pytest.mark.parametrize("draft,costs", [("fixed", None), ("adaptive", CPU_COSTS)])
@pytest.mark.parametrize("seed", [0, 1, 2, 3, 4])
def test_tiny_llama_pld_equals_plain(seed, draft, costs, runtime):
    model = tiny_llama(seed)
    prompt = repetitive_prompt(seed)
    plain, plain_stats = decode(model, prompt, DecodeConfig(max_new_tokens=80, use_pld=False))
    config = DecodeConfig(max_new_tokens=80, draft=draft)
    pld, pld_stats = decode(model, prompt, config, costs, runtime)
    assert pld == plain  # plain on the dynamic runtime: identical across runtimes too
    assert plain_stats.passes == len(plain)
    # The test only means something if drafts were both accepted and rejected.
    assert 0 < pld_stats.accepted_tokens < pld_stats.drafted_tokens
    assert pld_stats.passes < plain_stats.passes


@pytest.mark.parametrize("runtime", list(RUNTIMES))
@pytest.mark.parametrize("num_draft,ngram_max", [(1, 1), (4, 2), (16, 4)])
def test_tiny_llama_exact_for_any_draft_shape(num_draft, ngram_max, runtime):
    model = tiny_llama(7)
    prompt = repetitive_prompt(7)
    plain, _ = decode(model, prompt, DecodeConfig(max_new_tokens=60, use_pld=False))
    config = DecodeConfig(max_new_tokens=60, num_draft=num_draft, ngram_max=ngram_max)
    pld, stats = decode(model, prompt, config, runtime=runtime)
    assert pld == plain
    assert 0 < stats.accepted_tokens < stats.drafted_tokens  # drafts both kept and rejected


EDIT_SOURCE = """def area(width, height):
    return width * height


def perimeter(width, height):
    return 2 * (width + height)


def describe(width, height):
    print("area", area(width, height))
    print("perimeter", perimeter(width, height))
"""

SUMMARY_SOURCE = (
    "The Riverside Library will close for renovation from March 3 to June 14. During the "
    "closure, the mobile library van will visit Elm Street on Mondays and the Harbor Market on "
    "Thursdays. Director Ana Ruiz said the 2.4 million dollar project adds a children's wing, a "
    "quiet study room and solar panels on the roof. Borrowed books can be returned at the "
    "Town Hall drop box, and late fees are waived until the library reopens."
)


@pytest.mark.slow
@pytest.mark.parametrize(
    "task",
    [
        Task(
            "edit", EDIT_SOURCE, "Rename the function `area` to `rect_area` everywhere.", "geo.py"
        ),
        Task("summarize", SUMMARY_SOURCE, name="library.txt"),
    ],
    ids=["edit", "summarize"],
)
def test_default_model_pld_equals_plain(default_model, task):
    # Fixed drafts: every candidate verified, whatever this machine's passes cost (adaptive
    # drafting corrects its costs by the passes it runs and may verify none on a busy machine).
    config = DecodeConfig(max_new_tokens=120, draft="fixed")
    engine = LocalEngine(default_model)
    pld = run_task(engine, task, config)
    plain = run_task(engine, task, DecodeConfig(max_new_tokens=120, use_pld=False))
    assert pld.token_ids == plain.token_ids
    assert pld.text == plain.text
    assert pld.stats.accepted_tokens > 0
    assert pld.stats.passes < plain.stats.passes


@pytest.mark.slow
def test_default_model_same_output_on_every_runtime(default_model):
    task = Task("edit", EDIT_SOURCE, "Add a docstring to every function.", "geo.py")
    config = DecodeConfig(max_new_tokens=80)
    ids = task_ids(LocalEngine(default_model), task, config)
    static_pld, _ = decode_ids(default_model, ids, config, runtime_name=RuntimeName.STATIC)
    plain = dataclasses.replace(config, use_pld=False)
    dynamic_plain, _ = decode_ids(default_model, ids, plain, runtime_name=RuntimeName.DYNAMIC)
    assert static_pld == dynamic_plain
    native_pld, _ = decode_ids(default_model, ids, config, runtime_name=RuntimeName.NATIVE)
    native_plain, _ = decode_ids(default_model, ids, plain, runtime_name=RuntimeName.NATIVE)
    assert native_pld == native_plain == dynamic_plain


@pytest.mark.slow
def test_default_model_documents_at_once_equal_each_alone():
    """Three documents of different lengths in shared passes (-j 3) on the default model's own
    GGUF blocks (what it runs without options): each one's tokens are its alone run's, with
    drafting and without."""
    default_model = load_model(ModelSpec(device="cpu"))
    tasks = [
        Task("edit", EDIT_SOURCE, "Add a docstring to every function.", "geo.py"),
        Task("summarize", SUMMARY_SOURCE, name="library.txt"),
        Task("edit", EDIT_SOURCE * 3, "Rename `area` to `rect_area`.", "geo3.py"),
    ]
    config = DecodeConfig(max_new_tokens=60)
    alone = LocalEngine(default_model)
    ids = [task_ids(alone, task, config) for task in tasks]
    together = LocalEngine(default_model, jobs=3)
    together.prepare(max(map(len, ids)) + 60, config, print, print)
    assert together.parallel == 3
    with ThreadPoolExecutor(3) as pool:
        batched = list(pool.map(lambda prompt: together.decode(prompt, config)[0], ids))
    plain = dataclasses.replace(config, use_pld=False)
    for prompt, tokens in zip(ids, batched, strict=True):
        assert tokens == alone.decode(prompt, config)[0] == alone.decode(prompt, plain)[0]
