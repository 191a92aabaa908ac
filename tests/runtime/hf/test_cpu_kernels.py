from contextlib import nullcontext

import pytest
import torch
from conftest import tiny_llama
from families import COMMON
from transformers import LlamaConfig, LlamaForCausalLM
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
from transformers.pytorch_utils import Conv1D

import pld_cli.runtime.calibration.costs as costs
from pld_cli.runtime.hf.cpu_kernels import CpuKernels, grouped_attention, small_linear
from pld_cli.runtime.hf.dynamic import DynamicRuntime


@pytest.fixture
def gqa_model():
    """A tiny Llama with 6 query heads over 2 KV heads, on sdpa."""
    torch.manual_seed(0)
    shape = {"vocab_size": 64, "hidden_size": 48, "intermediate_size": 96, "num_attention_heads": 6}
    config = LlamaConfig(**COMMON | shape, attn_implementation="sdpa")
    return LlamaForCausalLM(config).eval()


@pytest.mark.parametrize("rows", [1, 2, 3, 5, 8, 31, 33, 70])
@pytest.mark.parametrize("bias", [False, True])
def test_small_linear_computes_the_linear_layer(rows, bias):
    torch.manual_seed(rows)
    linear = torch.nn.Linear(24, 40, bias=bias)
    x = torch.randn(1, rows, 24)
    torch.testing.assert_close(small_linear(linear.weight, linear.bias, x), linear(x))


class Module(torch.nn.Module):
    num_key_value_groups = 3


def causal_suffix_mask(q: int, kv: int) -> torch.Tensor:
    return torch.ones(q, kv, dtype=torch.bool).tril(kv - q)[None, None]  # [1, 1, q, kv]


@pytest.mark.parametrize("q", [1, 2, 5, 16])
@pytest.mark.parametrize("given_mask", [False, True])
def test_grouped_attention_matches_sdpa(q, given_mask):
    torch.manual_seed(q)
    kv = 40
    query = torch.randn(1, 6, q, 8)  # 6 query heads over 2 KV heads
    key, value = torch.randn(1, 2, kv, 8), torch.randn(1, 2, kv, 8)
    mask = causal_suffix_mask(q, kv)
    expected, _ = sdpa_attention_forward(Module(), query, key, value, mask, scaling=0.3)
    got, _ = grouped_attention(
        Module(), query, key, value, mask if given_mask else None, scaling=0.3
    )
    torch.testing.assert_close(got, expected)


def test_a_model_computes_the_same_with_and_without_the_kernels(gqa_model):
    model = gqa_model
    ids = torch.randint(0, 64, (1, 12))
    with torch.inference_mode():
        stock = model(input_ids=ids).logits
        kernels = CpuKernels(model)
        with kernels:
            # The model still sees "sdpa" (model code tests for it); the function is swapped.
            assert model.config._attn_implementation == "sdpa"
            assert ALL_ATTENTION_FUNCTIONS["sdpa"] is grouped_attention
            fast = model(input_ids=ids[:, :4]).logits  # few rows: the new paths
        torch.testing.assert_close(fast, stock[:, :4], rtol=1e-4, atol=1e-5)
        assert ALL_ATTENTION_FUNCTIONS["sdpa"] is sdpa_attention_forward
        assert all("forward" not in vars(linear) for linear in kernels.linears)
        assert torch.equal(model(input_ids=ids).logits, stock)


def test_a_pass_over_a_few_positions_on_top_of_a_cache_is_unchanged(gqa_model):
    model = gqa_model
    ids = torch.randint(0, 64, (30,)).tolist()
    runtime = DynamicRuntime(model)
    runtime.prefill(ids[:25])
    fast = runtime.forward(ids[25:]).clone()  # 5 positions after 25 cached ones
    with torch.inference_mode():
        stock = model(input_ids=torch.tensor([ids])).logits[0, 25:]
    torch.testing.assert_close(fast, stock, rtol=1e-4, atol=1e-5)
    assert fast.argmax(-1).tolist() == stock.argmax(-1).tolist()


def test_a_wrapped_linear_layer_keeps_its_wrapper(gqa_model):
    hooked = gqa_model.lm_head
    hooked.forward = wrapper = lambda x: torch.nn.Linear.forward(hooked, x)  # as accelerate does
    kernels = CpuKernels(gqa_model)
    assert hooked not in kernels.linears
    with kernels:
        pass
    assert hooked.forward is wrapper


class OwnForward(torch.nn.Linear):
    def forward(self, x):  # something other than x @ W.T + b: must be left alone
        return super().forward(x) * 2


def test_conv1d_and_plain_subclasses_are_patched_and_others_named():
    torch.manual_seed(0)
    model = torch.nn.Sequential(Conv1D(40, 24), torch.nn.Linear(40, 24), OwnForward(24, 8))
    model.config = LlamaConfig(attn_implementation="eager")
    x = torch.randn(1, 3, 24)
    stock = model(x)
    kernels = CpuKernels(model)
    assert kernels.linears == [model[0], model[1]]
    with kernels:
        torch.testing.assert_close(model(x), stock)
    assert "1 Conv1D, 1 Linear" in kernels.describe()
    assert "left as shipped: 1 OwnForward" in kernels.describe()


def test_the_kernels_run_only_for_the_sizes_the_calibration_chose(tmp_path):
    runtime = DynamicRuntime(tiny_llama(0))
    assert runtime.paths == ("stock", "cpu-kernels")
    assert isinstance(runtime.kernels.for_pass(2), nullcontext)  # not yet measured: stock
    runtime.choose({1: "stock", 4: "cpu-kernels"})
    assert isinstance(runtime.kernels.for_pass(1), nullcontext)
    assert isinstance(runtime.kernels.for_pass(3), CpuKernels)  # sizes below 4 follow 4
    assert isinstance(runtime.kernels.for_pass(40), nullcontext)  # past the measured ones
    costs.pass_costs(runtime, 64, "tiny|cpu|dynamic", tmp_path / "costs.json", 11)
    assert set(runtime.kernels.choice) == set(costs.MEASURED_SIZES)
    assert set(runtime.kernels.choice.values()) <= set(runtime.paths)
