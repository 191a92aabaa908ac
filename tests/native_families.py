"""The Llama-family settings pld's own forward covers, on tiny random weights: the real
checkpoints' rope, tying, biases and norms."""

import torch
from families import COMMON
from transformers import (
    LlamaConfig,
    LlamaForCausalLM,
    MistralConfig,
    MistralForCausalLM,
    Qwen2Config,
    Qwen2ForCausalLM,
    Qwen3Config,
    Qwen3ForCausalLM,
)

# The families' common tiny shape, wider (6 query heads over 2 KV heads, hidden 96).
SHAPE = {k: v for k, v in COMMON.items() if k != "tie_word_embeddings"} | {
    "vocab_size": 96,
    "hidden_size": 96,
    "intermediate_size": 96,
    "num_attention_heads": 6,
    "max_position_embeddings": 512,
}
LLAMA31_ROPE = {
    "rope_type": "llama3",
    "factor": 8.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
    "original_max_position_embeddings": 64,
    "rope_theta": 500000.0,
}
LLAMA32_ROPE = LLAMA31_ROPE | {"factor": 32.0}


def rope(parameters: dict) -> dict:
    """Config arguments for a rope setting: `rope_parameters` (transformers 5), or `rope_scaling`
    beside `rope_theta` (4.x, which would ignore `rope_parameters` and test the default rope)."""
    if "rope_parameters" in LlamaConfig().to_dict():
        return {"rope_parameters": parameters}
    scaling = {k: v for k, v in parameters.items() if k != "rope_theta"}
    return {"rope_scaling": scaling, "rope_theta": parameters["rope_theta"]}


# The real checkpoints' settings, on tiny random weights.
FAMILIES = {
    "smollm2": lambda: LlamaForCausalLM(LlamaConfig(**SHAPE, tie_word_embeddings=True)),
    "llama-3.1": lambda: LlamaForCausalLM(
        LlamaConfig(**SHAPE, **rope(LLAMA31_ROPE), tie_word_embeddings=False)
    ),
    "llama-3.2": lambda: LlamaForCausalLM(
        LlamaConfig(**SHAPE, **rope(LLAMA32_ROPE), tie_word_embeddings=True)
    ),
    "llama-2-linear": lambda: LlamaForCausalLM(
        LlamaConfig(**SHAPE, **rope({"rope_type": "linear", "factor": 2.0, "rope_theta": 10000.0}))
    ),
    "mistral": lambda: MistralForCausalLM(MistralConfig(**SHAPE, sliding_window=None)),
    "mistral-window": lambda: MistralForCausalLM(MistralConfig(**SHAPE, sliding_window=4096)),
    "qwen2": lambda: Qwen2ForCausalLM(Qwen2Config(**SHAPE, tie_word_embeddings=True)),
    "qwen3": lambda: Qwen3ForCausalLM(Qwen3Config(**SHAPE, head_dim=16, tie_word_embeddings=False)),
}


def assert_close(native: torch.Tensor, reference: torch.Tensor) -> None:
    scale = reference.abs().max().item()
    assert (native - reference).abs().max().item() <= 1e-4 * scale
