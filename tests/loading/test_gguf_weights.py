"""A GGUF's own blocks as pld's native weights: a tiny Llama written by gguf-py's writer, each
matrix in another type (K-quants with their sub-blocks of 16 among them, q/k/v of three types
fused), loads to the file's dequantized floats in transformers' row order, and decodes with pld
exactly as without."""

import numpy as np
import pytest
import torch
from conftest import repetitive_prompt
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType, GGUFWriter, quants
from random_blocks import random_blocks
from transformers import LlamaConfig

from pld_cli.core.config import DecodeConfig
from pld_cli.core.decode import Pass, generate
from pld_cli.core.stats import Stats
from pld_cli.loading.checkpoint import empty_model
from pld_cli.loading.fit import auto_choice
from pld_cli.loading.gguf_file import GGUFFile
from pld_cli.loading.gguf_weights import blocks_refusal, gguf_weights, weights_bytes
from pld_cli.runtime.clib.tables import MATRICES
from pld_cli.runtime.native.model import native_weights
from pld_cli.runtime.native.quantized.grouped import GroupedMatrix
from pld_cli.runtime.native.quantized.parts import GroupedParts
from pld_cli.runtime.native.runtime import NativeRuntime

Q = GGMLQuantizationType
CONFIG = dict(
    vocab_size=64,
    hidden_size=256,
    intermediate_size=512,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=512,
    tie_word_embeddings=False,
)
# A type per matrix and layer: every type pld maps, q/k/v of three types in layer 0
TYPES = [
    dict(q=Q.Q4_K, k=Q.Q5_K, v=Q.Q6_K, output=Q.Q3_K, gate=Q.Q2_K, up=Q.Q4_K, down=Q.Q6_K),
    dict(q=Q.Q4_0, k=Q.Q4_0, v=Q.Q8_0, output=Q.Q5_0, gate=Q.Q5_1, up=Q.Q4_1, down=Q.Q8_0),
]
# The same with an F32 matrix among them: it stays float, and the torch forward runs the layers
WITH_FLOAT = [TYPES[0], TYPES[1] | dict(output=Q.F32)]
LEGACY = (Q.Q8_0, Q.Q4_0, Q.Q4_1, Q.Q5_0, Q.Q5_1)


def blocks_of(qtype, rows: int, inputs: int, seed: int) -> np.ndarray:
    """gguf-py's quantizer's blocks of random weights, or random blocks where it has none (F32:
    the weights themselves)."""
    if qtype in (*LEGACY, Q.F32):
        weights = np.random.default_rng(seed).normal(0, 0.05, (rows, inputs)).astype(np.float32)
        return weights if qtype is Q.F32 else quants.quantize(weights, qtype)
    return random_blocks(qtype, rows, inputs, seed)


def unpermuting(rows: int, heads: int) -> torch.Tensor:
    """The row order that undoes llama.cpp's converter (convert_hf_to_gguf.py's permute: each
    head's rows [2, d / 2] stored as [d / 2, 2]), found by applying that permute to row numbers."""
    permuted = torch.arange(rows).reshape(heads, 2, rows // heads // 2).swapaxes(1, 2).flatten()
    return torch.argsort(permuted)


@pytest.fixture(scope="module", params=[TYPES, WITH_FLOAT], ids=["quantized", "with-float"])
def written(tmp_path_factory, request):
    """(path of the GGUF, config folder, expected float weights by transformers' name)"""
    folder = tmp_path_factory.mktemp("gguf")
    config = LlamaConfig(**CONFIG)
    config.save_pretrained(folder)
    writer = GGUFWriter(folder / "tiny.gguf", "llama")
    expected, seed = {}, 0

    def add(name: str, qtype, rows: int, inputs: int, hf_name: str) -> None:
        nonlocal seed
        seed += 1
        raw = blocks_of(qtype, rows, inputs, seed)
        writer.add_tensor(name, raw, raw_dtype=None if qtype is Q.F32 else qtype)
        floats = torch.from_numpy(quants.dequantize(raw, qtype).copy())
        heads = 4 if ".attn_q." in name else 2 if ".attn_k." in name else None
        expected[hf_name] = floats if heads is None else floats[unpermuting(len(floats), heads)]

    def add_float(name: str, shape: tuple, hf_name: str) -> None:
        values = 1 + 0.1 * np.random.default_rng(len(expected)).normal(size=shape)
        writer.add_tensor(name, values.astype(np.float32))
        expected[hf_name] = torch.from_numpy(values.astype(np.float32))

    hidden, inner, heads = CONFIG["hidden_size"], CONFIG["intermediate_size"], 4
    d = hidden // heads
    add("token_embd.weight", Q.Q8_0, 64, hidden, "model.embed_tokens.weight")
    add("output.weight", Q.Q6_K, 64, hidden, "lm_head.weight")
    add_float("output_norm.weight", (hidden,), "model.norm.weight")
    for i, types in enumerate(request.param):
        block, hf = f"blk.{i}.", f"model.layers.{i}."
        add_float(f"{block}attn_norm.weight", (hidden,), f"{hf}input_layernorm.weight")
        add_float(f"{block}ffn_norm.weight", (hidden,), f"{hf}post_attention_layernorm.weight")
        for x, rows in (("q", heads * d), ("k", 2 * d), ("v", 2 * d)):
            add(f"{block}attn_{x}.weight", types[x], rows, hidden, f"{hf}self_attn.{x}_proj.weight")
        add(
            f"{block}attn_output.weight",
            types["output"],
            hidden,
            hidden,
            f"{hf}self_attn.o_proj.weight",
        )
        add(f"{block}ffn_gate.weight", types["gate"], inner, hidden, f"{hf}mlp.gate_proj.weight")
        add(f"{block}ffn_up.weight", types["up"], inner, hidden, f"{hf}mlp.up_proj.weight")
        add(f"{block}ffn_down.weight", types["down"], hidden, inner, f"{hf}mlp.down_proj.weight")
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return folder / "tiny.gguf", folder, expected


def test_the_header_lists_each_tensor_with_its_type_and_bytes(written):
    path, _, expected = written
    file = GGUFFile(path)
    assert file.metadata["general.architecture"] == "llama"
    assert len(file.tensors) == len(expected)
    tensor = file.tensors["blk.0.attn_v.weight"]
    assert tensor.type is Q.Q6_K and tensor.shape == (256, 128) and tensor.data.shape == (128, 210)


def layouts(matrix: GroupedMatrix | GroupedParts) -> list[tuple[int, int]]:
    parts = matrix.parts if isinstance(matrix, GroupedParts) else [matrix]
    return [(part.group, part.bits) for part in parts]


def floats(matrix) -> torch.Tensor:
    return matrix if isinstance(matrix, torch.Tensor) else matrix.dequantized()


def test_the_weights_are_the_files_floats_in_transformers_order(written):
    path, folder, expected = written
    weights = gguf_weights(empty_model(folder, False), path)
    layer = weights.layers[0]
    assert layouts(layer.qkv) == [(32, 4), (32, 8), (16, 8)]  # each type's own, in parts
    assert layouts(weights.layers[1].qkv) == [(32, 4), (32, 8)]  # Q4_0's q and k together
    for i, layer in enumerate(weights.layers):
        hf = f"model.layers.{i}."
        qkv = torch.cat([expected[f"{hf}self_attn.{x}_proj.weight"] for x in "qkv"])
        gate_up = torch.cat([expected[f"{hf}mlp.{x}_proj.weight"] for x in ("gate", "up")])
        assert torch.equal(floats(layer.qkv), qkv)
        assert torch.equal(floats(layer.gate_up), gate_up)
        assert torch.equal(floats(layer.out), expected[f"{hf}self_attn.o_proj.weight"])
        assert torch.equal(floats(layer.down), expected[f"{hf}mlp.down_proj.weight"])
        assert torch.equal(layer.mlp_norm, expected[f"{hf}post_attention_layernorm.weight"])
    assert torch.equal(weights.head.dequantized(), expected["lm_head.weight"])
    assert torch.equal(
        weights.embed[torch.tensor([5, 0])], expected["model.embed_tokens.weight"][[5, 0]]
    )
    assert 0 < weights_bytes(path) < 4 * sum(t.numel() for t in expected.values())


def test_the_memory_estimate_is_what_the_weights_take(written):
    """weights_bytes (the check before a load) counts each type as pld holds it: a K-quant's
    scales in the file's form, a fused matrix's parts each in its own layout."""
    path, folder, _ = written
    weights = gguf_weights(empty_model(folder, False), path)
    matrices = [getattr(layer, name) for layer in weights.layers for name in MATRICES]
    if any(isinstance(m, torch.Tensor) for m in matrices):
        pytest.skip("a float matrix among them (and numpy's widest layout for its fused one)")
    vectors = [weights.norm] + [
        v for layer in weights.layers for v in (layer.attention_norm, layer.mlp_norm)
    ]
    held = sum(m.nbytes for m in [*matrices, weights.embed, weights.head])
    assert weights_bytes(path) == held + sum(v.nbytes for v in vectors)


def decode(model, prompt: list[int], config: DecodeConfig) -> tuple[list[int], Stats]:
    tokens, stats = [], Stats()
    for event in generate(NativeRuntime(model, 256), prompt, set(), config):
        stats.add(event)
        if isinstance(event, Pass):
            tokens.extend(event.emitted)
    return tokens, stats


def model_out(model):
    """Layer 1's output matrix, F32 in one of the files."""
    return native_weights(model).layers[1].out


def test_pld_on_the_ggufs_own_blocks_equals_plain_decoding(written):
    path, folder, _ = written
    model = empty_model(folder, False)
    gguf_weights(model, path)
    quantized = isinstance(model_out(model), GroupedMatrix)
    # all quantized: the whole pass in pld's C kernels; an F32 matrix: the torch forward
    assert (NativeRuntime(model, 64).decoder is not None) == quantized
    prompt = repetitive_prompt(0)
    plain, _ = decode(model, prompt, DecodeConfig(max_new_tokens=60, use_pld=False))
    pld, stats = decode(model, prompt, DecodeConfig(max_new_tokens=60))
    assert pld == plain
    assert 0 < stats.accepted_tokens < stats.drafted_tokens  # drafts both kept and rejected


def one_tensor_gguf(path, architecture: str, qtype) -> str:
    writer = GGUFWriter(path, architecture)
    raw = np.zeros((4, GGML_QUANT_SIZES[qtype][1]), np.uint8)
    writer.add_tensor("token_embd.weight", raw, raw_dtype=qtype)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def test_a_gguf_the_kernels_cannot_run_is_named_before_loading(written, tmp_path):
    assert blocks_refusal(written[0]) is None
    gemma = one_tensor_gguf(tmp_path / "g.gguf", "gemma2", Q.Q8_0)
    assert "does not cover gemma2 GGUFs" in blocks_refusal(gemma)
    ternary = one_tensor_gguf(tmp_path / "t.gguf", "llama", Q.IQ2_XXS)
    assert blocks_refusal(ternary) == "its IQ2_XXS tensors have no exact layout in pld"
    choice = auto_choice(True, "cpu", None, None, blocks_refusal(ternary))
    assert choice.scheme is None and "IQ2_XXS" in choice.why
