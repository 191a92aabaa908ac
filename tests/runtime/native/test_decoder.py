"""The C decoder: a pass through it gives what the torch forward's row-wise pass gives (within
float rounding) for every covered family, and writes the same keys and values; it runs only over
int8 in groups. That a row's bits do not depend on its pass: test_quantized.py."""

import pytest
import torch
from native_families import FAMILIES, assert_close

from pld_cli.runtime.clib import library
from pld_cli.runtime.native.model import native_weights
from pld_cli.runtime.native.quantized.matrices import CHECKED_ROWS
from pld_cli.runtime.native.quantized.parts import GroupedParts
from pld_cli.runtime.native.quantized.quantize import quantize_model
from pld_cli.runtime.native.runtime import NativeRuntime

needs_kernel = pytest.mark.skipif(
    library.kernel("decode_rows") is None, reason=f"no C kernel: {library.unavailable()}"
)


def quantized(family: str) -> torch.nn.Module:
    """A tiny model of the family at int8, its biases and norms random (not zeros and ones: a
    step that skipped one, or took the wrong one, would pass unseen)."""
    torch.manual_seed(0)
    model = FAMILIES[family]().eval()
    for name, parameter in model.named_parameters():
        if name.endswith("bias"):
            torch.nn.init.normal_(parameter, std=0.5)
        elif "norm" in name:
            torch.nn.init.normal_(parameter, mean=1.0, std=0.3)
    quantize_model(model, "int8")
    return model


@needs_kernel
@pytest.mark.parametrize("family", FAMILIES)
def test_a_pass_through_the_c_decoder_is_the_torch_forwards(family):
    runtime = NativeRuntime(quantized(family), 512)
    assert runtime.decoder is not None
    ids = torch.randint(3, 96, (320,), generator=torch.Generator().manual_seed(1)).tolist()
    runtime.prefill(ids[:300])
    passes = {}
    for path in ("c", "torch"):
        if path == "torch":
            runtime.decoder = None
        logits = runtime.forward(ids[300:])  # a verify pass of 20 rows
        cache = runtime.keys[:, :, 300:320].clone(), runtime.values[:, :, 300:320].clone()
        passes[path] = logits.clone(), *cache
        runtime.rollback(300)
    for fused, reference in zip(passes["c"], passes["torch"], strict=True):
        assert_close(fused, reference)


@needs_kernel
def test_the_c_decoder_takes_int8_in_groups_only():
    model = FAMILIES["smollm2"]().eval()
    quantize_model(model, "int4")
    assert NativeRuntime(model, 64).decoder is None


@needs_kernel
def test_a_matrix_in_parts_runs_as_the_whole():
    """A q/k/v (with its bias) held in parts, as a GGUF's of several layouts is: the C decoder
    runs each part into its columns of the one product (decoder.h's `rest`), so a part of the
    same layout gives the whole's bits; the torch forward agrees."""
    model = quantized("qwen2")  # q/k/v with a bias
    runtime = NativeRuntime(model, 128)
    ids = torch.randint(3, 96, (40,), generator=torch.Generator().manual_seed(2)).tolist()
    runtime.prefill(ids[:30])
    whole = runtime.forward(ids[30:]).clone()
    for layer in native_weights(model).layers:
        rows = layer.qkv.shape[0]
        layer.qkv = GroupedParts([layer.qkv.outputs(0, 32), layer.qkv.outputs(32, rows)])
        layer.qkv.rows_checked = CHECKED_ROWS
    runtime = NativeRuntime(model, 128)
    assert runtime.decoder is not None
    runtime.prefill(ids[:30])
    assert torch.equal(runtime.forward(ids[30:]), whole)
    runtime.rollback(30)
    runtime.decoder = None
    assert_close(runtime.forward(ids[30:]), whole)
