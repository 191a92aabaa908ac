"""Random-weight Llama GGUFs at a realistic size, for issue 34's load and pass-cost tables: an F16
file written by gguf-py (the default model's tokenizer, its metadata copied), then quantized by
llama.cpp's own quantizer to Q4_K_M and Q8_0: llama-cpp-python's llama_model_quantize, or with
--quantizer the `llama-quantize` tool built from llama.cpp's source.

Run with a Python that has gguf, and llama-cpp-python unless --quantizer is given:

    python scripts/make_ggufs.py 1.5b /tmp/ggufs --tokenizer-from path/to/SmolLM2.gguf \
        [--quantizer path/to/llama-quantize] [--types Q4_K_M]

The weights are N(0, 0.02) (the norms 1), so the files have the shapes and the types of real
ones, not their text: good for timing and memory, not for output quality.
"""

from __future__ import annotations

import argparse
import ctypes
import subprocess
import time
from pathlib import Path

import numpy as np
from gguf import GGUFReader, GGUFValueType, GGUFWriter

SHAPES = {  # hidden, layers, intermediate, heads, kv heads
    "1.5b": (2048, 24, 5632, 32, 4),
    "7b": (4096, 32, 11008, 32, 32),
}
TYPES = {"Q4_K_M": "LLAMA_FTYPE_MOSTLY_Q4_K_M", "Q8_0": "LLAMA_FTYPE_MOSTLY_Q8_0"}  # llama_cpp's


def copy_tokenizer(writer: GGUFWriter, source: Path) -> int:
    """The source GGUF's tokenizer.* metadata into `writer`; returns its vocabulary size."""
    reader = GGUFReader(source)
    vocab = 0
    for key, field in reader.fields.items():
        if not key.startswith("tokenizer."):
            continue
        kind = field.types[0]
        sub = field.types[1] if kind == GGUFValueType.ARRAY else None
        value = field.contents()
        writer.add_key_value(key, value, kind, sub)
        if key == "tokenizer.ggml.tokens":
            vocab = len(value)
    return vocab


def tensors(hidden: int, layers: int, inner: int, heads: int, kv_heads: int, vocab: int):
    """(name, shape [out, in] or [n]) of a Llama's tensors, in llama.cpp's names."""
    d = hidden // heads
    yield "token_embd.weight", (vocab, hidden)
    for i in range(layers):
        yield f"blk.{i}.attn_norm.weight", (hidden,)
        yield f"blk.{i}.attn_q.weight", (heads * d, hidden)
        yield f"blk.{i}.attn_k.weight", (kv_heads * d, hidden)
        yield f"blk.{i}.attn_v.weight", (kv_heads * d, hidden)
        yield f"blk.{i}.attn_output.weight", (hidden, heads * d)
        yield f"blk.{i}.ffn_norm.weight", (hidden,)
        yield f"blk.{i}.ffn_gate.weight", (inner, hidden)
        yield f"blk.{i}.ffn_up.weight", (inner, hidden)
        yield f"blk.{i}.ffn_down.weight", (hidden, inner)
    yield "output_norm.weight", (hidden,)
    yield "output.weight", (vocab, hidden)


def llama_writer(path: Path, shape: str, tokenizer: Path) -> tuple[GGUFWriter, list]:
    """A writer holding the metadata of a Llama of `shape` (the tokenizer's copied from
    `tokenizer`), and the model's tensors as (name, shape)."""
    hidden, layers, inner, heads, kv_heads = SHAPES[shape]
    writer = GGUFWriter(path, "llama")
    writer.add_name(f"random-llama-{shape}")
    vocab = copy_tokenizer(writer, tokenizer)
    writer.add_context_length(4096)
    writer.add_embedding_length(hidden)
    writer.add_block_count(layers)
    writer.add_feed_forward_length(inner)
    writer.add_head_count(heads)
    writer.add_head_count_kv(kv_heads)
    writer.add_rope_dimension_count(hidden // heads)
    writer.add_rope_freq_base(10000.0)
    writer.add_layer_norm_rms_eps(1e-5)
    return writer, list(tensors(hidden, layers, inner, heads, kv_heads, vocab))


def write_f16(path: Path, shape: str, tokenizer: Path) -> None:
    writer, specs = llama_writer(path, shape, tokenizer)
    writer.add_file_type(1)  # MOSTLY_F16
    for name, dims in specs:
        dtype = np.float32 if len(dims) == 1 else np.float16
        count = int(np.prod(dims))
        writer.add_tensor_info(name, dims, np.dtype(dtype), count * np.dtype(dtype).itemsize)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    rng = np.random.default_rng(0)
    for _, dims in specs:
        if len(dims) == 1:
            writer.write_tensor_data(np.ones(dims, np.float32))
        else:
            writer.write_tensor_data(rng.normal(0, 0.02, dims).astype(np.float16))
    writer.close()


def quantize(source: Path, target: Path, kind: str, threads: int, tool: Path | None) -> float:
    start = time.perf_counter()
    if tool is not None:
        subprocess.run([str(tool), str(source), str(target), kind, str(threads)], check=True)
        return time.perf_counter() - start
    import llama_cpp  # only here: the other scripts import this one's writer in pld's venv

    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = getattr(llama_cpp, TYPES[kind])
    params.nthread = threads
    code = llama_cpp.llama_model_quantize(
        str(source).encode(), str(target).encode(), ctypes.byref(params)
    )
    if code != 0:
        raise SystemExit(f"llama_model_quantize failed ({code})")
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("shape", choices=SHAPES)
    parser.add_argument("folder", type=Path)
    parser.add_argument("--tokenizer-from", type=Path, required=True)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--keep-f16", action="store_true")
    parser.add_argument("--quantizer", type=Path, help="llama.cpp's llama-quantize tool")
    parser.add_argument("--types", default=",".join(TYPES), help="of " + ", ".join(TYPES))
    args = parser.parse_args()
    args.folder.mkdir(parents=True, exist_ok=True)
    f16 = args.folder / f"random-{args.shape}-F16.gguf"
    start = time.perf_counter()
    write_f16(f16, args.shape, args.tokenizer_from)
    print(f"{f16.name}: {f16.stat().st_size / 1e9:.2f} GB in {time.perf_counter() - start:.0f} s")
    for kind in args.types.split(","):
        target = args.folder / f"random-{args.shape}-{kind}.gguf"
        took = quantize(f16, target, kind, args.threads, args.quantizer)
        print(f"{target.name}: {target.stat().st_size / 1e9:.2f} GB in {took:.0f} s")
    if not args.keep_f16:
        f16.unlink()


if __name__ == "__main__":
    main()
