"""The rotary tables: within float32 rounding of transformers' own for every covered rope type,
and the same bits whichever vector width torch's CPU kernels take (a process per width)."""

import os
import subprocess
import sys

import pytest
import torch
from native_families import FAMILIES, SHAPE, rope
from transformers import LlamaConfig, LlamaForCausalLM

from pld_cli.runtime.native.rope import inverse_frequencies, rope_tables

POSITIONS = 4096
# A Qwen2.5-like rope (head_dim 128, base 10^6), where torch's power rounds one inverse frequency
# differently without AVX2 than with it; and a yarn rope, the one type FAMILIES lacks.
WIDE = {**SHAPE, "hidden_size": 256, "num_attention_heads": 2, "num_key_value_heads": 1}
ROPES = {
    "wide": {"rope_type": "default", "rope_theta": 1e6},
    "yarn": {
        "rope_type": "yarn",
        "factor": 4.0,
        "original_max_position_embeddings": 128,
        "rope_theta": 1e6,
    },
}
MODELS = {
    **FAMILIES,
    **{
        name: lambda p=p: LlamaForCausalLM(LlamaConfig(**WIDE, **rope(p)))
        for name, p in ROPES.items()
    },
}


def transformers_tables(model, positions: int) -> tuple[torch.Tensor, torch.Tensor]:
    embed = model.model.embed_tokens.weight
    cos, sin = model.model.rotary_emb(embed[:1], torch.arange(positions)[None])
    return cos[0, :, None], sin[0, :, None]


@pytest.mark.parametrize("name", MODELS)
def test_the_tables_are_within_float32_rounding_of_transformers(name):
    """One rounding of the inverse frequencies apart at most, so of the angles too (twice their
    size's step: the inverse frequency's and the product's), and of each cosine and sine."""
    torch.manual_seed(0)
    model = MODELS[name]().eval()
    inv_freq, scaling = inverse_frequencies(model)
    theirs = model.model.rotary_emb.inv_freq
    eps = torch.finfo(torch.float32).eps
    assert ((inv_freq - theirs).abs() <= eps * theirs).all()
    assert scaling == model.model.rotary_emb.attention_scaling
    angles = torch.arange(POSITIONS, dtype=torch.float32)[:, None] * inv_freq
    bound = (eps * (2 * torch.cat([angles, angles], -1) + 1) * scaling)[:, None]
    ours = rope_tables(model, POSITIONS)
    for table, reference in zip(ours, transformers_tables(model, POSITIONS), strict=True):
        assert table.shape == reference.shape and table.dtype == reference.dtype
        assert ((table - reference).abs() <= bound).all()


BUILD = """
import sys, torch
from transformers import LlamaConfig, LlamaForCausalLM
from pld_cli.runtime.native.rope import rope_tables
model = LlamaForCausalLM(LlamaConfig.from_json_file(sys.argv[1]))
torch.save(rope_tables(model, int(sys.argv[2])), sys.argv[3])
"""


@pytest.mark.parametrize("capability", ["default", "avx2"])
def test_the_tables_are_the_same_bits_under_any_torch_vector_width(tmp_path, capability):
    """Built in a process whose torch runs `capability`'s kernels (plain C, AVX2), they equal
    this process's (the best this CPU runs)."""
    torch.manual_seed(0)
    model = MODELS["wide"]()
    model.config.to_json_file(tmp_path / "config.json")
    env = os.environ | {"ATEN_CPU_CAPABILITY": capability}
    args = [str(tmp_path / "config.json"), str(POSITIONS), str(tmp_path / "tables.pt")]
    subprocess.run([sys.executable, "-c", BUILD, *args], env=env, check=True)
    theirs = torch.load(tmp_path / "tables.pt")
    for table, other in zip(rope_tables(model, POSITIONS), theirs, strict=True):
        assert torch.equal(table, other)
