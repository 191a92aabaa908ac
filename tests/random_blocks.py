"""Random GGUF blocks of every type pld maps: every bit pattern is a valid block but for its
float16 fields (d, and m or dmin), which are set to small finite values."""

import numpy as np
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType

Q = GGMLQuantizationType
# Where each type keeps its float16 fields (d, and m or dmin), as byte offsets in a block.
HALVES = {
    Q.Q8_0: [0],
    Q.Q4_0: [0],
    Q.Q4_1: [0, 2],
    Q.Q5_0: [0],
    Q.Q5_1: [0, 2],
    Q.Q4_K: [0, 2],
    Q.Q5_K: [0, 2],
    Q.Q6_K: [208],
    Q.Q3_K: [108],
    Q.Q2_K: [80, 82],
}


def random_blocks(qtype: GGMLQuantizationType, rows: int, inputs: int, seed: int = 0):
    """Raw bytes [rows, bytes per row] of random blocks, their float16 fields finite."""
    block, size = GGML_QUANT_SIZES[qtype]
    rng = np.random.default_rng(seed)
    raw = rng.integers(0, 256, (rows * inputs // block, size), dtype=np.uint8)
    for at in HALVES[qtype]:
        field = rng.uniform(-0.05, 0.05, len(raw)).astype(np.float16)
        raw[:, at : at + 2] = field.view(np.uint8).reshape(-1, 2)
    return raw.reshape(rows, -1)


def factored_matrix(outputs: int, inputs: int, group: int, bits: int, seed: int = 0):
    """A random matrix twice, (per group, factored): scales and offsets as float32 per group, and
    the same in a K-quant's form (a float16 factor per 256 inputs times a byte per group)."""
    import torch

    from pld_cli.runtime.native.quantized.grouped import GroupedMatrix, blocked

    generator = torch.Generator().manual_seed(seed)
    groups, per_factor = inputs // group, 256 // group
    values = torch.randint(0, 2**bits, (outputs, inputs), generator=generator, dtype=torch.uint8)
    d, m = (0.01 * torch.rand(2, outputs, inputs // 256, generator=generator)).half().float()
    sc, mc = torch.randint(-32, 64, (2, outputs, groups), generator=generator, dtype=torch.int8)
    scales = d.repeat_interleave(per_factor, 1) * sc.float()
    offsets = -m.repeat_interleave(per_factor, 1) * mc.float()
    per_group = GroupedMatrix(values, scales, offsets, bits)
    factors = (blocked(t[..., None]) for t in (d, -m))
    subs = tuple(blocked(t[..., None]) for t in (sc, mc))
    return per_group, GroupedMatrix.from_blocked(per_group.values, *factors, bits, subs=subs)
