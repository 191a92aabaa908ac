"""A Llama GGUF of random quantized blocks at a realistic size, written by gguf-py alone (no
llama.cpp), to time pld's load: each matrix's blocks are random bytes with small finite float16
fields (tests/random_blocks.py), in Q4_K_M's two types: Q4_K, and Q6_K for attn_v, ffn_down and
the output (llama.cpp's Q4_K_M keeps Q6_K for half of the layers' attn_v and ffn_down; here all,
so the file is a little larger). Shapes and tokenizer as make_ggufs.py's.

    .venv/bin/python scripts/random_block_gguf.py 1.5b /tmp/ggufs --tokenizer-from SmolLM2.gguf

The weights are noise: good for load time and memory, not for output.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
from gguf import GGMLQuantizationType, LlamaFileType
from make_ggufs import SHAPES, llama_writer

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from random_blocks import random_blocks  # noqa: E402  (the tests' own valid random blocks)

Q = GGMLQuantizationType
SIX_BITS = ("attn_v.weight", "ffn_down.weight", "output.weight")  # Q6_K; every other matrix Q4_K


def kind(name: str) -> GGMLQuantizationType:
    return Q.Q6_K if name.endswith(SIX_BITS) else Q.Q4_K


def write(path: Path, shape: str, tokenizer: Path) -> None:
    writer, specs = llama_writer(path, shape, tokenizer)
    writer.add_file_type(LlamaFileType.MOSTLY_Q4_K_M)
    data = []
    for seed, (name, dims) in enumerate(specs):
        if len(dims) == 1:
            data.append(np.ones(dims, np.float32))
            writer.add_tensor_info(name, dims, np.dtype(np.float32), data[-1].nbytes)
            continue
        data.append(random_blocks(kind(name), *dims, seed=seed))
        writer.add_tensor_info(name, data[-1].shape, data[-1].dtype, data[-1].nbytes, kind(name))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    for tensor in data:
        writer.write_tensor_data(tensor)
    writer.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("shape", choices=SHAPES)
    parser.add_argument("folder", type=Path)
    parser.add_argument("--tokenizer-from", type=Path, required=True)
    args = parser.parse_args()
    args.folder.mkdir(parents=True, exist_ok=True)
    path = args.folder / f"random-blocks-{args.shape}-Q4_K_M.gguf"
    write(path, args.shape, args.tokenizer_from)
    print(f"{path}: {path.stat().st_size / 1e9:.2f} GB")


if __name__ == "__main__":
    main()
