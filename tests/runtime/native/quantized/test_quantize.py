"""Quantized native weights: each row's logits do not depend on the pass it is computed in, so pld
equals plain decoding; no float copy stays behind; other runtimes and families are refused."""

import json

import pytest
import torch
from conftest import COPY_SOURCE, repetitive_prompt, tiny_llama
from native_families import FAMILIES
from test_exactness import EDIT_SOURCE, SUMMARY_SOURCE
from transformers import GPT2Config, GPT2LMHeadModel

from pld_cli.core.config import DecodeConfig
from pld_cli.core.decode import Pass, generate
from pld_cli.core.stats import Stats
from pld_cli.engines.local import LocalEngine
from pld_cli.errors import PldError, Unsupported
from pld_cli.loading.models import LoadedModel, ModelSpec, load_model
from pld_cli.runtime.clib import library
from pld_cli.runtime.names import RuntimeName
from pld_cli.runtime.native.quantized import grouped
from pld_cli.runtime.native.quantized.embedding import GroupedRows
from pld_cli.runtime.native.quantized.grouped import GroupedMatrix
from pld_cli.runtime.native.quantized.matrices import CHECKED_ROWS, Int4Matrix
from pld_cli.runtime.native.quantized.quantize import (
    QUANTIZERS,
    layer_matrix,
    quantize_model,
    weight_bytes,
)
from pld_cli.runtime.native.runtime import NativeRuntime
from pld_cli.runtime.opening import RuntimePool
from pld_cli.tasks.pipeline import run_task
from pld_cli.tasks.prompts import Task

CPU_COSTS = [0.0] + [1.0 + 0.1 * (q - 1) for q in range(1, 20)]


# The layer matrix of each scheme; both need pld's C kernels (the head is int8 in groups).
MATRICES = [("int8", GroupedMatrix), ("int4", Int4Matrix)]
pytestmark = pytest.mark.skipif(not grouped.available(), reason=str(library.unavailable()))


def test_without_the_c_kernels_quantizing_is_refused_with_the_reason(monkeypatch):
    monkeypatch.setattr(grouped, "available", lambda: False)
    with pytest.raises(Unsupported, match="int8 runs pld's C kernels, which are not here"):
        quantize_model(tiny_llama(0), "int8")


def model_matrix(runtime: NativeRuntime):
    return runtime.weights.layers[0].gate_up


def quantized_llama(seed: int, scheme: str) -> torch.nn.Module:
    model = tiny_llama(seed)
    quantize_model(model, scheme)
    return model


def decode(model, prompt, config, costs=None):
    stats, tokens = Stats(), []
    for event in generate(NativeRuntime(model, 256), prompt, {2}, config, costs):
        stats.add(event)
        if isinstance(event, Pass):
            tokens.extend(event.emitted)
    return tokens, stats


@pytest.mark.parametrize("scheme", QUANTIZERS)
@pytest.mark.parametrize("draft,costs", [("fixed", None), ("adaptive", CPU_COSTS)])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_quantized_pld_equals_plain(seed, draft, costs, scheme):
    model = quantized_llama(seed, scheme)
    prompt = repetitive_prompt(seed)
    plain, _ = decode(model, prompt, DecodeConfig(max_new_tokens=80, use_pld=False))
    pld, stats = decode(model, prompt, DecodeConfig(max_new_tokens=80, draft=draft), costs)
    assert pld == plain
    assert 0 < stats.accepted_tokens < stats.drafted_tokens  # drafts both kept and rejected


# pld's C attention, or sdpa row by row (where the C kernel does not take the head size)
@pytest.mark.parametrize("c_attention", [True, False])
@pytest.mark.parametrize("scheme", QUANTIZERS)
def test_a_pass_over_q_positions_gives_each_row_what_a_pass_over_one_gives(
    scheme, c_attention, monkeypatch
):
    if not c_attention:
        for module in ("runtime", "decoder"):
            monkeypatch.setattr(f"pld_cli.runtime.native.{module}.kernel_fits", lambda *_: False)
    model = tiny_llama(3, max_positions=2048)
    quantize_model(model, scheme)
    # Past a thousand positions a batched sdpa rounds differently from a one-row one.
    ids = torch.randint(3, 64, (1125,), generator=torch.Generator().manual_seed(0)).tolist()
    runtime = NativeRuntime(model, 1200)
    assert runtime.row_kernel == c_attention
    assert (runtime.decoder is not None) == (scheme == "int8" and c_attention)
    assert isinstance(model_matrix(runtime), layer_matrix(scheme))
    path = "one call" if runtime.decoder else "in pld's C" if runtime.row_kernel else "sdpa"
    assert path in runtime.notes()[0]  # --verbose names the kernel path that runs
    runtime.prefill(ids[:1100])
    for q in (2, 7, 16, 25):
        together = runtime.forward(ids[1100 : 1100 + q]).clone()
        runtime.rollback(1100)
        alone = torch.cat([runtime.forward([token]).clone() for token in ids[1100 : 1100 + q]])
        runtime.rollback(1100)
        assert torch.equal(together, alone)  # bit for bit, not merely close


def verify_against_single_passes(model, ids: list[int], start: int):
    runtime = NativeRuntime(model, 256)
    runtime.prefill(ids[:start])
    together = runtime.forward(ids[start:]).clone()
    runtime.rollback(start)
    alone = torch.cat([runtime.forward([token]).clone() for token in ids[start:]])
    return together, alone


@pytest.mark.parametrize("scheme,matrix", MATRICES)
def test_a_kernel_whose_rows_move_with_the_batch_runs_verify_passes_row_by_row(
    monkeypatch, scheme, matrix
):
    product = matrix.product

    def moving(self, x):  # another path for batches, as tiles on another CPU might be
        out = product(self, x)
        return out * (1 + 2**-7) if x.shape[0] > 1 else out

    monkeypatch.setattr(matrix, "product", moving)
    model = tiny_llama(3)
    weights = quantize_model(model, scheme)
    assert {layer.gate_up.rows_checked for layer in weights.layers} == {0}
    ids = repetitive_prompt(3)[:40]
    together, alone = verify_against_single_passes(model, ids, 30)
    assert torch.equal(together, alone)
    for layer in weights.layers:  # had the check trusted the batch, rows would have moved
        layer.gate_up.rows_checked = CHECKED_ROWS
    together, alone = verify_against_single_passes(model, ids, 30)
    assert not torch.equal(together, alone)


@pytest.mark.parametrize("scheme,tolerance", [("int8", 0.02), ("int4", 0.15)])
def test_quantized_logits_stay_near_float32(scheme, tolerance):
    ids = repetitive_prompt(4)[:40]
    logits = {}
    for quantize in ("none", scheme):
        model = tiny_llama(4)
        if quantize != "none":
            quantize_model(model, quantize)
        runtime = NativeRuntime(model, 256)
        runtime.prefill(ids[:30])
        logits[quantize] = runtime.forward(ids[30:])
    scale = logits["none"].abs().max()
    error = (logits[scheme] - logits["none"]).abs().max()
    assert 0 < error <= tolerance * scale


@pytest.mark.parametrize("scheme,matrix", MATRICES)
def test_no_float_copy_stays_behind(scheme, matrix, monkeypatch):
    model = tiny_llama(5)
    float_bytes = sum(p.nbytes for p in model.parameters())
    weights = quantize_model(model, scheme)
    left = sum(p.nbytes for p in model.parameters())  # norms only: every matrix is freed
    assert left < 0.01 * float_bytes
    assert all(isinstance(layer.gate_up, matrix) for layer in weights.layers)
    assert isinstance(weights.head, GroupedMatrix) and isinstance(weights.embed, GroupedRows)
    assert weight_bytes(weights) < 0.3 * float_bytes


def test_a_tied_head_is_the_quantized_embedding():
    model = FAMILIES["smollm2"]()
    weights = quantize_model(model, "int8")
    assert weights.embed is weights.head


def test_quantized_models_run_on_native_only():
    model = quantized_llama(6, "int8")
    pool = RuntimePool(model)
    # a calibration of its own, by name (and by the C kernels' variant)
    assert pool.get(64).name == f"native-int8+{library.variant()}"
    with pytest.raises(PldError, match="runs on native only"):
        RuntimePool(model, RuntimeName.STATIC).get(64)


def test_uncovered_families_are_refused_before_anything_is_quantized():
    model = GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=32, n_head=2, vocab_size=64))
    with pytest.raises(Unsupported, match="does not cover GPT2LMHeadModel"):
        quantize_model(model, "int8")
    assert model.transformer.wte.weight.numel() > 0


@pytest.mark.parametrize("scheme", QUANTIZERS)
def test_the_command_line_quantizes_and_pld_equals_no_pld(pld, copying_model_dir, tmp_path, scheme):
    source = tmp_path / "a.py"
    source.write_text(COPY_SOURCE)
    args = ("-m", copying_model_dir, "--max-new-tokens", "24", "--draft", "fixed", "--verbose")
    code, out, err = pld(
        "edit", str(source), "-i", "x", *args, "--quantize", scheme, "--json", "--compare"
    )
    result = json.loads(out)
    assert f"native-{scheme}" in err
    assert result["compare"]["identical"] is True
    assert 0 < result["stats"]["accepted_tokens"] < result["stats"]["drafted_tokens"]


@pytest.fixture(scope="module", params=["int8", "gguf"])
def quantized_default_model(request) -> LoadedModel:
    """The default model re-quantized to int8 groups, and as its GGUF's own blocks (auto's)."""
    return load_model(ModelSpec(device="cpu", dtype="float32", quantize=request.param))


@pytest.mark.slow
@pytest.mark.parametrize(
    "task",
    [
        Task("edit", EDIT_SOURCE, "Rename `area` to `rect_area`.", "geo.py"),
        Task("summarize", SUMMARY_SOURCE),
    ],
    ids=["edit", "summarize"],
)
def test_default_model_quantized_pld_equals_plain(quantized_default_model, task):
    engine = LocalEngine(quantized_default_model)
    # Fixed drafts: verified whatever this machine's passes cost (adaptive may verify none).
    pld = run_task(engine, task, DecodeConfig(max_new_tokens=120, draft="fixed"))
    plain = run_task(engine, task, DecodeConfig(max_new_tokens=120, use_pld=False))
    assert pld.token_ids == plain.token_ids
    assert pld.stats.accepted_tokens > 0
    assert pld.stats.passes < plain.stats.passes
