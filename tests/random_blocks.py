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
