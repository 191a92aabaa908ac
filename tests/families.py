"""Tiny random models of the families users bring, built from configs with the real checkpoints'
settings where they matter to a cache (sliding windows smaller than a test's sequence, layer kinds).
"""

from __future__ import annotations

import pytest
import torch
import transformers
from transformers import AutoModelForCausalLM

WINDOW = 8  # a sliding window well inside every test's sequence

COMMON = dict(
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=2048,
    bos_token_id=1,
    eos_token_id=2,
    pad_token_id=2,
    tie_word_embeddings=False,
)
SLIDING_THEN_FULL = ["sliding_attention", "full_attention"]

FAMILIES: dict[str, tuple[str, dict]] = {
    "llama": ("LlamaConfig", {}),
    "qwen2": ("Qwen2Config", {}),
    "mistral": ("MistralConfig", {"sliding_window": WINDOW}),
    "phi3": ("Phi3Config", {"sliding_window": WINDOW, "pad_token_id": 0}),
    "gemma2": ("Gemma2Config", {"sliding_window": WINDOW, "head_dim": 16}),
    "gemma3": (
        "Gemma3TextConfig",
        {"sliding_window": WINDOW, "head_dim": 16, "layer_types": SLIDING_THEN_FULL},
    ),
    "gpt_oss": (
        "GptOssConfig",
        {
            "sliding_window": WINDOW,
            "head_dim": 16,
            "num_local_experts": 2,
            "num_experts_per_tok": 1,
            "layer_types": SLIDING_THEN_FULL,
        },
    ),
    "lfm2": ("Lfm2Config", {"layer_types": ["conv", "full_attention"]}),
    "qwen3_next": (
        "Qwen3NextConfig",
        {
            "head_dim": 16,
            "num_experts": 2,
            "num_experts_per_tok": 1,
            "moe_intermediate_size": 32,
            "shared_expert_intermediate_size": 32,
            "linear_num_value_heads": 2,
            "linear_num_key_heads": 2,
            "linear_key_head_dim": 16,
            "linear_value_head_dim": 16,
            "layer_types": ["linear_attention", "full_attention"],
        },
    ),
    "mamba": ("MambaConfig", {"state_size": 8, "expand": 2, "conv_kernel": 4}),
    "gpt2": ("GPT2Config", {"n_embd": 64, "n_layer": 2, "n_head": 4, "n_positions": 2048}),
    "falcon": ("FalconConfig", {"num_kv_heads": 2, "new_decoder_architecture": True}),
}


def family_config(family: str, vocab_size: int):
    name, settings = FAMILIES[family]
    if not hasattr(transformers, name):
        pytest.skip(f"transformers {transformers.__version__} has no {name}")
    config_class = getattr(transformers, name)
    return config_class(**{**COMMON, "vocab_size": vocab_size, **settings})


def tiny_family_model(family: str, vocab_size: int = 64, seed: int = 0):
    """A 2-layer random model of `family` in float32 (sdpa attention where the family has it)."""
    torch.manual_seed(seed)
    return AutoModelForCausalLM.from_config(family_config(family, vocab_size)).eval()
