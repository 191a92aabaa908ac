"""A GGUF tensor's quantized blocks as pld's grouped layout, exactly: unsigned u, and per group a
float32 scale and offset, so that a weight is scale * u + offset (runtime/native/quantized/
grouped.py). Nothing is converted to float but the scales.

Each type, as ggml lays out its blocks (gguf-py's `quants.py` is the reference the tests hold
these to, to the bit):

| type | group | bits | u            | scale    | offset       |
|------|-------|------|--------------|----------|--------------|
| Q8_0 | 32    | 8    | q + 128      | d        | -128 d       |
| Q4_0 | 32    | 4    | q (0..15)    | d        | -8 d         |
| Q4_1 | 32    | 4    | q            | d        | m            |
| Q5_0 | 32    | 8    | q (0..31)    | d        | -16 d        |
| Q5_1 | 32    | 8    | q            | d        | m            |
| Q4_K | 32    | 4    | q            | d sc     | (-dmin) m    |
| Q5_K | 32    | 8    | q            | d sc     | (-dmin) m    |
| Q6_K | 16    | 8    | q (0..63)    | d sc     | -32 d sc     |
| Q3_K | 16    | 4    | q + 4 (0..7) | d (sc-32)| -4 d (sc-32) |
| Q2_K | 16    | 4    | q (0..3)     | d sc     | (-dmin) m    |

Each product and sum above is exact in float32 (at most 24 significant bits), so scale * u +
offset gives ggml's own dequantized floats bit for bit. The K-quants' sub-blocks of 16 keep their
own scales in groups of 16; 2- and 3-bit values are held as nibbles.

A load writes these layouts from the file's blocks in C (gguf_unpack.py, the same table); the
numpy decoders here are the reference the C ones are tested against, and build the matrices C
does not (a fused matrix with a float part).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType

from pld_cli.errors import Unsupported

Q = GGMLQuantizationType
K_BLOCK = 256  # weights in a K-quant block: one d (and dmin) per output and block
FLOATS = (Q.F32, Q.F16, Q.BF16)


@dataclass
class Blocks:
    """A matrix [rows, in] as u (uint8, below 2 ** bits) and float32 scales and offsets [rows,
    in / group], in row order."""

    values: torch.Tensor
    scales: torch.Tensor
    offsets: torch.Tensor
    bits: int

    @property
    def group(self) -> int:
        return self.values.shape[1] // self.scales.shape[1]

    def widened(self, group: int, bits: int) -> Blocks:
        """The same weights in smaller groups or more bits (repeated scales, the same u)."""
        repeat = self.group // group
        scales, offsets = (t.repeat_interleave(repeat, 1) for t in (self.scales, self.offsets))
        return Blocks(self.values, scales, offsets, bits)


def stacked(parts: list[Blocks]) -> Blocks:
    """Matrices over the same inputs, one under the other (q/k/v, gate/up), in the layout that
    holds them all: the smallest group and the most bits among them."""
    group, bits = min(p.group for p in parts), max(p.bits for p in parts)
    parts = [p.widened(group, bits) for p in parts]
    return Blocks(
        *(torch.cat([getattr(p, f) for p in parts]) for f in ("values", "scales", "offsets")), bits
    )


def layout_bytes(qtype: GGMLQuantizationType, count: int) -> int:
    """Bytes `count` weights of a type take in pld's layout (float types: float32): a legacy
    type's float32 scale and offset per group; a K-quant's byte each per group and float32
    factors per 256 weights (its scales in the file's form, gguf_unpack.allocated)."""
    if qtype not in LAYOUTS:
        return 4 * count
    group, bits = LAYOUTS[qtype]
    if GGML_QUANT_SIZES[qtype][0] == K_BLOCK:
        return count * bits // 8 + 2 * count // group + 8 * count // K_BLOCK
    return count * bits // 8 + 8 * count // group


def blocks(data: np.ndarray, qtype: GGMLQuantizationType, rows: int, inputs: int) -> Blocks:
    """A quantized tensor's raw bytes [rows, bytes per row] as Blocks; Unsupported (naming the
    type) for a type with no exact layout here (IQ, ternary, MXFP4...)."""
    if qtype not in DECODERS:
        raise Unsupported(f"GGUF tensors of type {qtype.name} have no exact layout in pld")
    raw = np.asarray(data).reshape(-1, GGML_QUANT_SIZES[qtype][1])
    values, scales, offsets = DECODERS[qtype](raw)
    return Blocks(
        torch.from_numpy(np.ascontiguousarray(values).reshape(rows, inputs)),
        torch.from_numpy(np.ascontiguousarray(scales, dtype=np.float32).reshape(rows, -1)),
        torch.from_numpy(np.ascontiguousarray(offsets, dtype=np.float32).reshape(rows, -1)),
        LAYOUTS[qtype][1],
    )


def halves(raw: np.ndarray) -> np.ndarray:
    """Bytes of two nibbles [n, k] as [n, 2 k]: the low nibbles, then the high ones."""
    return np.concatenate([raw & 0x0F, raw >> 4], axis=-1)


def bit_planes(raw: np.ndarray, count: int) -> np.ndarray:
    """Bytes [n, k] as their `count` bit planes [n, count, k]: plane j holds bit j of each."""
    shifts = np.arange(count, dtype=np.uint8).reshape(1, count, 1)
    return (raw[:, None, :] >> shifts) & 1


def half(raw: np.ndarray) -> np.ndarray:
    """float16 pairs of bytes [n, 2] as float32 [n, 1]."""
    return np.ascontiguousarray(raw).view(np.float16).astype(np.float32)


def q8_0(raw: np.ndarray) -> tuple:
    d = half(raw[:, :2])
    return raw[:, 2:] ^ 0x80, d, -128 * d  # ^ 0x80: the int8 byte + 128


def q4_0(raw: np.ndarray) -> tuple:
    d = half(raw[:, :2])
    return halves(raw[:, 2:]), d, -8 * d


def q4_1(raw: np.ndarray) -> tuple:
    return halves(raw[:, 4:]), half(raw[:, :2]), half(raw[:, 2:4])


def five_bits(low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """Q5's 32 values from 16 bytes of nibbles and 4 bytes of fifth bits (bit i: value i)."""
    fifth = np.unpackbits(np.ascontiguousarray(high), axis=-1, bitorder="little")
    return halves(low) | (fifth << 4)


def q5_0(raw: np.ndarray) -> tuple:
    d = half(raw[:, :2])
    return five_bits(raw[:, 6:], raw[:, 2:6]), d, -16 * d


def q5_1(raw: np.ndarray) -> tuple:
    return five_bits(raw[:, 8:], raw[:, 4:8]), half(raw[:, :2]), half(raw[:, 2:4])


def k_scales(packed: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Q4_K's and Q5_K's eight 6-bit scales and mins from their 12 bytes (as ggml packs them)."""
    d, m, both = np.split(packed.reshape(-1, 3, 4), 3, axis=1)
    scales = np.concatenate([d & 0x3F, (both & 0x0F) | ((d >> 2) & 0x30)], axis=-1)
    mins = np.concatenate([m & 0x3F, (both >> 4) | ((m >> 2) & 0x30)], axis=-1)
    return scales.reshape(-1, 8).astype(np.float32), mins.reshape(-1, 8).astype(np.float32)


def k_nibbles(qs: np.ndarray) -> np.ndarray:
    """The K-quants' 256 low nibbles from 128 bytes: per 32 bytes, 32 low then 32 high."""
    return halves(qs.reshape(-1, 4, 32)).reshape(-1, 256)


def q4_k(raw: np.ndarray) -> tuple:
    d, dmin = half(raw[:, :2]), half(raw[:, 2:4])
    scales, mins = k_scales(raw[:, 4:16])
    return k_nibbles(raw[:, 16:]), d * scales, -dmin * mins


def q5_k(raw: np.ndarray) -> tuple:
    d, dmin = half(raw[:, :2]), half(raw[:, 2:4])
    scales, mins = k_scales(raw[:, 4:16])
    fifth = bit_planes(raw[:, 16:48], 8).reshape(-1, 256)  # sub-block j: bit j of the 32 bytes
    return k_nibbles(raw[:, 48:]) | (fifth << 4), d * scales, -dmin * mins


def q6_k(raw: np.ndarray) -> tuple:
    low = halves(raw[:, :128].reshape(-1, 2, 64)).reshape(-1, 2, 128)  # per 128 values
    shifts = np.array([0, 2, 4, 6], dtype=np.uint8).reshape(1, 1, 4, 1)
    high = (raw[:, 128:192].reshape(-1, 2, 1, 32) >> shifts) & 3
    values = (low | (high.reshape(-1, 2, 128) << 4)).reshape(-1, 256)
    scales = half(raw[:, 208:210]) * raw[:, 192:208].view(np.int8).astype(np.float32)
    return values, scales, -32 * scales


def two_bit_planes(qs: np.ndarray) -> np.ndarray:
    """Q2_K's and Q3_K's 256 2-bit values from 64 bytes: per 32 bytes, bits 0-1, 2-3, 4-5, 6-7."""
    shifts = np.array([0, 2, 4, 6], dtype=np.uint8).reshape(1, 1, 4, 1)
    return ((qs.reshape(-1, 2, 1, 32) >> shifts) & 3).reshape(-1, 256)


def q2_k(raw: np.ndarray) -> tuple:
    d, dmin = half(raw[:, 80:82]), half(raw[:, 82:84])
    packed = raw[:, :16]
    scales, mins = (packed & 0x0F).astype(np.float32), (packed >> 4).astype(np.float32)
    return two_bit_planes(raw[:, 16:80]), d * scales, -dmin * mins


def q3_k(raw: np.ndarray) -> tuple:
    d = half(raw[:, 108:110])
    low, high = raw[:, 96:104], raw[:, 104:108]
    low = np.concatenate([low & 0x0F, low >> 4], axis=-1)
    high = (high.reshape(-1, 1, 4) >> np.array([0, 2, 4, 6], dtype=np.uint8).reshape(1, 4, 1)) & 3
    sixes = (low | (high.reshape(-1, 16) << 4)).astype(np.float32)
    scales = d * (sixes - 32)
    high_bits = bit_planes(raw[:, :32], 8).reshape(-1, 256)  # set: the value is not lowered by 4
    return two_bit_planes(raw[:, 32:96]) | (high_bits << 2), scales, -4 * scales


# (group, bits) of each type's layout, as the table above gives them
LAYOUTS = {Q.Q8_0: (32, 8), Q.Q4_0: (32, 4), Q.Q4_1: (32, 4), Q.Q5_0: (32, 8), Q.Q5_1: (32, 8)}
LAYOUTS |= {Q.Q4_K: (32, 4), Q.Q5_K: (32, 8), Q.Q6_K: (16, 8), Q.Q3_K: (16, 4), Q.Q2_K: (16, 4)}

DECODERS = {
    Q.Q8_0: q8_0,
    Q.Q4_0: q4_0,
    Q.Q4_1: q4_1,
    Q.Q5_0: q5_0,
    Q.Q5_1: q5_1,
    Q.Q4_K: q4_k,
    Q.Q5_K: q5_k,
    Q.Q6_K: q6_k,
    Q.Q3_K: q3_k,
    Q.Q2_K: q2_k,
}
