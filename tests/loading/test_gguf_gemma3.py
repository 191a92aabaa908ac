"""Gemma 3 GGUFs on pld's own forward: tiny random Gemma 3 models written as llama.cpp's converter
writes them (its tensor names and metadata keys, each norm holding 1 + the weight), loaded from
their own blocks, give transformers' Gemma3ForCausalLM's logits within float tolerance, and pld's
output equals --no-pld's bit for bit: sliding layers between global ones (a window across the C
attention's chunks of 256 slots in one), each layer type with its rope, tied and untied heads."""

from dataclasses import dataclass, field

import numpy as np
import pytest
import torch
from conftest import repetitive_prompt
from gguf import GGMLQuantizationType, GGUFWriter, RopeScalingType, quants
from random_blocks import random_blocks
from transformers import Gemma3ForCausalLM

from pld_cli.core.config import DecodeConfig
from pld_cli.core.decode import Pass, generate
from pld_cli.core.stats import Stats
from pld_cli.loading.checkpoint import empty_model
from pld_cli.loading.gguf import gguf_config
from pld_cli.loading.gguf_weights import blocks_refusal, gguf_weights
from pld_cli.runtime.native.runtime import NativeRuntime

Q = GGMLQuantizationType
LEGACY = (Q.Q8_0, Q.Q4_0, Q.Q4_1, Q.Q5_0, Q.Q5_1)


@dataclass
class Shape:
    hidden: int
    inner: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    window: int | None  # None: no sliding layers (no window in the metadata)
    types: dict = field(default_factory=dict)  # matrix -> quantization type
    tied: bool = True
    rope_factor: float | None = None  # the global layers' linear rope scaling
    prompt: int = 40


VARIANTS = {
    # every 6th layer global (layer 5), two sliding layers after it; Q4_K_M's types
    "q4_k_m-window-8": Shape(
        hidden=256,
        inner=512,
        layers=7,
        heads=4,
        kv_heads=2,
        head_dim=64,
        vocab=300,
        window=8,
        types=dict(attn=Q.Q4_K, v=Q.Q6_K, ffn=Q.Q4_K, down=Q.Q6_K),
        rope_factor=8.0,
    ),
    # a window of 100 over a prompt of 300: row windows start inside chunks past the first
    "q8_0-window-100-long": Shape(
        hidden=128,
        inner=256,
        layers=6,
        heads=2,
        kv_heads=1,
        head_dim=32,
        vocab=260,
        window=100,
        types=dict(attn=Q.Q8_0, v=Q.Q8_0, ffn=Q.Q4_0, down=Q.Q8_0),
        prompt=300,
    ),
    # no window in the file: every layer global; an untied head
    "untied-global": Shape(
        hidden=256,
        inner=512,
        layers=2,
        heads=8,
        kv_heads=4,
        head_dim=32,
        vocab=128,
        window=None,
        types=dict(attn=Q.Q5_K, v=Q.Q8_0, ffn=Q.Q5_0, down=Q.Q6_K),
        tied=False,
    ),
}


def assert_close(native: torch.Tensor, reference: torch.Tensor) -> None:
    """Within 1e-3 of the logits' largest: random K-quant blocks make large weights, and each of a
    Gemma layer's six norms rescales float32's rounding (an error of the model, a wrong window or
    rope, is far above it)."""
    scale = reference.abs().max().item()
    assert (native - reference).abs().max().item() <= 1e-3 * scale


def blocks_of(qtype, rows: int, inputs: int, seed: int) -> np.ndarray:
    if qtype in LEGACY:
        weights = np.random.default_rng(seed).normal(0, 0.05, (rows, inputs)).astype(np.float32)
        return quants.quantize(weights, qtype)
    return random_blocks(qtype, rows, inputs, seed)


def write_gemma3(path, shape: Shape, extra: dict | None = None) -> dict[str, torch.Tensor]:
    """A Gemma 3 GGUF as llama.cpp's converter writes one; returns transformers' weights by name
    (each norm's weight the file's minus 1, as Gemma3RMSNorm scales by 1 + its weight)."""
    writer = GGUFWriter(path, "gemma3")
    writer.add_context_length(4096)
    writer.add_embedding_length(shape.hidden)
    writer.add_block_count(shape.layers)
    writer.add_feed_forward_length(shape.inner)
    writer.add_head_count(shape.heads)
    writer.add_head_count_kv(shape.kv_heads)
    writer.add_key_length(shape.head_dim)
    writer.add_value_length(shape.head_dim)
    writer.add_layer_norm_rms_eps(1e-6)
    writer.add_rope_freq_base(1_000_000.0)
    writer.add_vocab_size(shape.vocab)
    if shape.window is not None:
        writer.add_sliding_window(shape.window)
    if shape.rope_factor is not None:
        writer.add_rope_scaling_type(RopeScalingType.LINEAR)
        writer.add_rope_scaling_factor(shape.rope_factor)
    for key, value in (extra or {}).items():
        writer.add_tensor(key, value)
    hf, seed = {}, 0

    def matrix(name: str, qtype, rows: int, inputs: int, hf_name: str) -> None:
        nonlocal seed
        seed += 1
        raw = blocks_of(qtype, rows, inputs, seed)
        writer.add_tensor(name, raw, raw_dtype=qtype)
        hf[hf_name] = torch.from_numpy(quants.dequantize(raw, qtype).copy())

    def norm(name: str, size: int, hf_name: str) -> None:
        stored = (1 + 0.1 * np.random.default_rng(seed + len(hf)).normal(size=size)).astype(
            np.float32
        )
        writer.add_tensor(name, stored)
        hf[hf_name] = torch.from_numpy(stored) - 1

    h, d, t = shape.hidden, shape.head_dim, shape.types
    matrix("token_embd.weight", Q.Q8_0, shape.vocab, h, "model.embed_tokens.weight")
    if not shape.tied:
        matrix("output.weight", Q.Q6_K, shape.vocab, h, "lm_head.weight")
    norm("output_norm.weight", h, "model.norm.weight")
    for i in range(shape.layers):
        b, m = f"blk.{i}.", f"model.layers.{i}."
        norm(f"{b}attn_norm.weight", h, f"{m}input_layernorm.weight")
        for x, rows, qtype in (
            ("q", shape.heads * d, t["attn"]),
            ("k", shape.kv_heads * d, t["attn"]),
            ("v", shape.kv_heads * d, t["v"]),
        ):
            matrix(f"{b}attn_{x}.weight", qtype, rows, h, f"{m}self_attn.{x}_proj.weight")
        norm(f"{b}attn_q_norm.weight", d, f"{m}self_attn.q_norm.weight")
        norm(f"{b}attn_k_norm.weight", d, f"{m}self_attn.k_norm.weight")
        matrix(
            f"{b}attn_output.weight", t["attn"], h, shape.heads * d, f"{m}self_attn.o_proj.weight"
        )
        norm(f"{b}post_attention_norm.weight", h, f"{m}post_attention_layernorm.weight")
        norm(f"{b}ffn_norm.weight", h, f"{m}pre_feedforward_layernorm.weight")
        matrix(f"{b}ffn_gate.weight", t["ffn"], shape.inner, h, f"{m}mlp.gate_proj.weight")
        matrix(f"{b}ffn_up.weight", t["ffn"], shape.inner, h, f"{m}mlp.up_proj.weight")
        matrix(f"{b}ffn_down.weight", t["down"], h, shape.inner, f"{m}mlp.down_proj.weight")
        norm(f"{b}post_ffw_norm.weight", h, f"{m}post_feedforward_layernorm.weight")
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return hf


@pytest.fixture(scope="module", params=list(VARIANTS))
def written(tmp_path_factory, request):
    """(shape, GGUF path, config folder, transformers' weights)"""
    folder = tmp_path_factory.mktemp("gemma3")
    shape = VARIANTS[request.param]
    path = folder / "gemma3.gguf"
    hf = write_gemma3(path, shape)
    gguf_config(path).save_pretrained(folder)
    return shape, path, folder, hf


def test_the_config_is_read_as_llama_cpp_reads_the_file(written):
    shape, _, folder, _ = written
    config = empty_model(folder, False).config
    assert config.model_type == "gemma3_text" and config.head_dim == shape.head_dim
    assert config.query_pre_attn_scalar == shape.head_dim
    expected = [
        "sliding_attention" if shape.window and (i + 1) % 6 else "full_attention"
        for i in range(shape.layers)
    ]
    assert config.layer_types == expected
    ropes = config.rope_parameters
    assert ropes["sliding_attention"]["rope_theta"] == 10_000.0
    assert ropes["full_attention"]["rope_theta"] == 1_000_000.0
    assert ropes["full_attention"].get("factor") == shape.rope_factor
    assert config.tie_word_embeddings is shape.tied


def reference(folder, hf: dict) -> Gemma3ForCausalLM:
    """transformers' Gemma 3 over the file's floats."""
    model = Gemma3ForCausalLM(empty_model(folder, False).config).eval()
    missing = set(model.load_state_dict(hf, strict=False).missing_keys) - {"lm_head.weight"}
    assert not missing
    return model


def test_the_logits_are_transformers_gemma3s(written):
    shape, path, folder, hf = written
    model = empty_model(folder, False)
    gguf_weights(model, path)
    runtime = NativeRuntime(model, 512)
    assert runtime.decoder is not None  # the whole pass in pld's C kernels
    ids = torch.randint(0, shape.vocab, (shape.prompt,), generator=torch.Generator().manual_seed(1))
    with torch.inference_mode():
        expected = reference(folder, hf)(ids[None]).logits[0]
    assert_close(runtime.forward(ids.tolist()), expected)
    # and one row at a time, as decoding runs (each row then sees its window alone)
    runtime.rollback(0)
    runtime.prefill(ids[:-3].tolist())
    rows = torch.cat([runtime.forward([token]) for token in ids[-3:].tolist()])
    assert_close(rows, expected[-3:])


def test_the_torch_forward_gives_the_same_logits(written):
    """The native runtime's torch path (where the C decoder does not take the weights) agrees."""
    shape, path, folder, hf = written
    model = empty_model(folder, False)
    gguf_weights(model, path)
    runtime = NativeRuntime(model, 512)
    runtime.decoder = None
    ids = torch.randint(0, shape.vocab, (shape.prompt,), generator=torch.Generator().manual_seed(2))
    with torch.inference_mode():
        expected = reference(folder, hf)(ids[None]).logits[0]
    runtime.prefill(ids[:-2].tolist())
    assert_close(runtime.forward(ids[-2:].tolist()), expected[-2:])


def decode(model, prompt: list[int], config: DecodeConfig) -> tuple[list[int], Stats]:
    tokens, stats = [], Stats()
    for event in generate(NativeRuntime(model, 512), prompt, set(), config):
        stats.add(event)
        if isinstance(event, Pass):
            tokens.extend(event.emitted)
    return tokens, stats


def test_pld_equals_plain_decoding_bit_for_bit(written):
    shape, path, folder, _ = written
    model = empty_model(folder, False)
    gguf_weights(model, path)
    prompt = repetitive_prompt(0, shape.vocab)
    plain, _ = decode(model, prompt, DecodeConfig(max_new_tokens=60, use_pld=False))
    pld, stats = decode(model, prompt, DecodeConfig(max_new_tokens=60))
    assert pld == plain
    assert stats.drafted_tokens > 0


def test_a_vision_tower_is_refused_in_one_line(tmp_path):
    shape = VARIANTS["untied-global"]
    write_gemma3(tmp_path / "v.gguf", shape, {"v.blk.0.attn_q.weight": np.zeros(4, np.float32)})
    assert blocks_refusal(tmp_path / "v.gguf") == (
        "its vision tower (v.* tensors) is beyond pld's forward, which is text only"
    )
    writer = GGUFWriter(tmp_path / "mmproj.gguf", "clip")
    writer.add_tensor("mm.input_projection.weight", np.zeros(4, np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    assert "vision projector (mmproj)" in blocks_refusal(tmp_path / "mmproj.gguf")
    write_gemma3(tmp_path / "t.gguf", shape)
    assert blocks_refusal(tmp_path / "t.gguf") is None
