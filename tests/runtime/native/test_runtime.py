"""The native forward computes transformers' logits for each covered family, refuses the rest."""

import pytest
import torch
from conftest import tiny_llama
from native_families import FAMILIES, SHAPE, assert_close, rope
from transformers import (
    GPT2Config,
    GPT2LMHeadModel,
    LlamaConfig,
    LlamaForCausalLM,
    MistralConfig,
    MistralForCausalLM,
)

from pld_cli.errors import Unsupported
from pld_cli.runtime.hf.dynamic import DynamicRuntime
from pld_cli.runtime.native import graphs
from pld_cli.runtime.native.runtime import NativeRuntime


@pytest.mark.parametrize("family", FAMILIES)
def test_logits_match_transformers_for_passes_of_1_to_32_and_after_rollbacks(family):
    torch.manual_seed(0)
    model = FAMILIES[family]().eval()
    if family == "qwen2":  # random init leaves the q/k/v biases at zero
        for block in model.model.layers:
            for proj in (block.self_attn.q_proj, block.self_attn.k_proj, block.self_attn.v_proj):
                torch.nn.init.normal_(proj.bias, std=0.5)
    ids = torch.randint(3, 96, (400,), generator=torch.Generator().manual_seed(1)).tolist()
    reference, native = DynamicRuntime(model), NativeRuntime(model, 512)
    for runtime in (reference, native):
        runtime.prefill(ids[:40])
    at = 40
    for q in (1, 2, 3, 5, 8, 13, 16, 24, 32):
        chunk = ids[at : at + q]
        assert_close(native.forward(chunk), reference.forward(chunk))
        keep = at + q // 2 + 1  # a rejected draft: forget part of the pass
        reference.rollback(keep)
        native.rollback(keep)
        assert native.length == reference.length == keep
        at = keep
    native.choose({q: "padded" for q in (1, 2, 4, 8, 16, 32)})
    for q in (1, 4, 7, 32):
        chunk = ids[at : at + q]
        assert_close(native.forward(chunk), reference.forward(chunk))
        at += q


def test_the_transformers_model_still_runs_on_the_fused_weights_without_a_copy():
    model = tiny_llama(0)
    before = sum(p.numel() for p in model.parameters())
    x = torch.tensor([[3, 4, 5, 6]])
    with torch.inference_mode():
        expected = model(x).logits
    NativeRuntime(model, 64)
    attention = model.model.layers[0].self_attn
    fused = attention.q_proj.weight.untyped_storage().data_ptr()
    assert attention.v_proj.weight.untyped_storage().data_ptr() == fused
    assert sum(p.numel() for p in model.parameters()) == before
    with torch.inference_mode():
        assert torch.equal(model(x).logits, expected)
    NativeRuntime(model, 128)  # a second runtime reuses the fused weights
    assert attention.q_proj.weight.untyped_storage().data_ptr() == fused


def test_a_full_cache_refuses_and_prefill_starts_over():
    native = NativeRuntime(tiny_llama(0), 16)
    native.prefill(list(range(3, 15)))
    native.forward([3, 4, 5, 6])
    with pytest.raises(ValueError, match="full"):
        native.forward([7])
    native.prefill([3, 4])
    assert native.length == 2


def test_the_measured_path_choice_covers_the_sizes_below_each_measured_one():
    native = NativeRuntime(tiny_llama(0), 16)
    native.choose({1: "plain", 4: "padded", 8: "plain"})
    assert [native.layout.path(q) for q in (1, 2, 4, 5, 8, 9)] == [
        "plain",
        "padded",
        "padded",
        "plain",
        "plain",
        "plain",
    ]


def small(config_class, **changes):
    return config_class(**(SHAPE | changes))


@pytest.mark.parametrize(
    "model, reason",
    [
        (lambda: GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=32, n_head=2)), "not a covered"),
        (lambda: MistralForCausalLM(small(MistralConfig, sliding_window=64)), "sliding window"),
        (
            lambda: LlamaForCausalLM(
                small(
                    LlamaConfig, **rope({"rope_type": "dynamic", "factor": 2.0, "rope_theta": 1e4})
                )
            ),
            "rope type",
        ),
        (lambda: LlamaForCausalLM(small(LlamaConfig, hidden_act="gelu")), "activation"),
    ],
)
def test_uncovered_models_are_refused_with_a_reason(model, reason):
    with pytest.raises(Unsupported, match=reason):
        NativeRuntime(model(), 256)


class EagerGraph:
    """A CPU stand-in for a captured graph: replay() runs the fixed-shape pass on its buffers
    (`broken`: and then spoils its output, as a bad capture would)."""

    def __init__(self, runtime, inputs, logits, broken=False):
        self.runtime, self.inputs, self.logits, self.broken = runtime, inputs, logits, broken

    def replay(self):
        self.logits.copy_(self.runtime.run_fixed(*self.inputs))
        if self.broken:
            self.logits[0] = self.logits[0].roll(1)  # another greedy token in a row


def stand_in_record(broken_size=None):
    """graphs.capture_size for a CPU: the graph is an EagerGraph on the same buffers."""

    def record(runtime, size, pool):
        inputs = graphs.padded_inputs([0] * size, runtime.length, size)
        logits = torch.empty(size, runtime.weights.embed.shape[0])
        graph = EagerGraph(runtime, inputs, logits, broken=size == broken_size)
        return graphs.CapturedPass(graph, inputs, logits)

    return record


def test_capture_checks_every_graph_against_eager_passes():
    runtime = NativeRuntime(tiny_llama(0), 128)
    runtime.prefill([0])
    captured = graphs.capture(runtime, record=stand_in_record())
    assert set(captured.passes) == set(graphs.SIZES)
    for size in graphs.SIZES:  # a graph that disagrees with eager is never kept
        with pytest.raises(RuntimeError, match="disagrees with the eager pass"):
            graphs.capture(runtime, record=stand_in_record(broken_size=size))


def test_padded_fixed_shape_passes_as_replayed_match_eager_ones_across_rollbacks():
    model = tiny_llama(0)
    eager, replayed = NativeRuntime(model, 128), NativeRuntime(model, 128)
    replayed.graphs = graphs.capture(replayed, record=stand_in_record())
    assert replayed.name == "native+cuda-graphs"
    ids = torch.randint(3, 64, (120,), generator=torch.Generator().manual_seed(0)).tolist()
    for runtime in (eager, replayed):
        runtime.prefill(ids[:20])
    at = 20
    for q in (1, 3, 5, 8, 13, 32, 2):  # mostly padded: 3 -> 4, 5 -> 8, 13 -> 16
        chunk = ids[at : at + q]
        assert torch.allclose(replayed.forward(chunk), eager.forward(chunk), atol=1e-5)
        at += q // 2 + 1
        eager.rollback(at)
        replayed.rollback(at)
