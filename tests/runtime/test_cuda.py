"""On a CUDA device: graph replays against eager passes (bfloat16) and against transformers
(float32) across rollbacks, and pld equal to plain decoding on the graphed runtimes. Skipped where
there is no CUDA device (CI has none; scripts/gpu_check.sh runs these on one)."""

import pytest
import torch
from conftest import repetitive_prompt, tiny_llama

from pld_cli.core.config import DecodeConfig
from pld_cli.core.decode import Pass, generate
from pld_cli.engines.local import LocalEngine
from pld_cli.loading.models import LoadedModel, ModelSpec, load_model
from pld_cli.runtime.hf.dynamic import DynamicRuntime
from pld_cli.runtime.hf.graphs import capture as capture_static
from pld_cli.runtime.hf.static import StaticRuntime
from pld_cli.runtime.native.graphs import capture as capture_native
from pld_cli.runtime.native.runtime import NativeRuntime
from pld_cli.runtime.opening import attach_cuda_graphs
from pld_cli.tasks.pipeline import run_task
from pld_cli.tasks.prompts import Task

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")

GRAPHED = {"native": (NativeRuntime, capture_native), "static": (StaticRuntime, capture_static)}
PASSES = (1, 3, 5, 8, 13, 16, 32, 2)  # mostly padded up to a captured size


def graphed(kind: str, model) -> NativeRuntime | StaticRuntime:
    runtime_type, capture = GRAPHED[kind]
    runtime = runtime_type(model, 256)
    notes: list[str] = []
    attach_cuda_graphs(runtime, notes.append, capture)
    assert runtime.graphs is not None, notes
    return runtime


def assert_same_passes(replayed, reference, tolerance: float) -> None:
    """Prefill both, then passes of PASSES sizes with rollbacks between, logits within tolerance
    (relative to the largest)."""
    ids = torch.randint(3, 64, (160,), generator=torch.Generator().manual_seed(0)).tolist()
    for runtime in (replayed, reference):
        runtime.prefill(ids[:20])
    at = 20
    for q in PASSES:
        chunk = ids[at : at + q]
        got, expected = replayed.forward(chunk).float(), reference.forward(chunk).float()
        scale = expected.abs().max()
        assert (got - expected).abs().max() <= tolerance * scale, f"{q} positions"
        at += q // 2 + 1  # keep half of the pass: the rest is rolled back
        replayed.rollback(at)
        reference.rollback(at)


@pytest.mark.parametrize("kind", GRAPHED)
def test_graph_replays_match_eager_passes_in_bfloat16(kind):
    model = tiny_llama(0).to("cuda", torch.bfloat16)
    runtime_type, _ = GRAPHED[kind]
    assert_same_passes(graphed(kind, model), runtime_type(model, 256), tolerance=0.02)


@pytest.mark.parametrize("kind", GRAPHED)
def test_graph_replays_match_transformers_in_float32(kind):
    model = tiny_llama(1).to("cuda")
    assert_same_passes(graphed(kind, model), DynamicRuntime(model), tolerance=1e-4)


@pytest.mark.parametrize("kind", GRAPHED)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_pld_equals_plain_on_graphed_runtimes_in_float32(kind, seed):
    model = tiny_llama(seed).to("cuda")
    prompt = repetitive_prompt(seed)

    def tokens(config: DecodeConfig) -> list[int]:
        events = generate(graphed(kind, model), prompt, {2}, config)
        return [token for event in events if isinstance(event, Pass) for token in event.emitted]

    plain = tokens(DecodeConfig(max_new_tokens=80, use_pld=False))
    assert tokens(DecodeConfig(max_new_tokens=80)) == plain
    assert tokens(DecodeConfig(max_new_tokens=80, use_pld=False)) == plain  # replays repeat


@pytest.fixture(scope="module")
def cuda_default_model() -> LoadedModel:
    return load_model(ModelSpec(device="cuda", dtype="float32"))


@pytest.mark.slow
@pytest.mark.parametrize(
    "task",
    [
        Task("edit", "def area(w, h):\n    return w * h\n", "Rename area to rect_area.", "a.py"),
        Task("summarize", "The library closes from March 3 to June 14 for a new roof. " * 4),
    ],
    ids=["edit", "summarize"],
)
def test_default_model_pld_equals_plain_on_cuda_in_float32(cuda_default_model, task):
    loaded = cuda_default_model
    engine = LocalEngine(loaded)
    pld = run_task(engine, task, DecodeConfig(max_new_tokens=96))
    plain = run_task(engine, task, DecodeConfig(max_new_tokens=96, use_pld=False))
    assert loaded.runtimes.open["auto"].name == "native+cuda-graphs"
    assert pld.token_ids == plain.token_ids
    assert pld.stats.passes < plain.stats.passes
