"""The tables the C decoder reads (csrc/decoder.h), as ctypes structures, and the check that the
library in hand lays them out the same way (its `pld_abi`): a mismatch is refused, never called."""

from __future__ import annotations

import ctypes

ABI_VERSION = 7  # PLD_ABI_VERSION in csrc/decoder.h
PTR, INT, FLOAT = ctypes.c_void_p, ctypes.c_int64, ctypes.c_float
MATRICES = ("qkv", "out", "gate_up", "down")  # a layer's matrices, in decoder.h's Block order


class Scales(ctypes.Structure):
    """A grouped matrix's scales and offsets: float32 per group, or (sub_scales not NULL) a
    float32 factor per `super` groups times a signed byte per group."""

    _fields_ = [(name, PTR) for name in ("scales", "offsets", "sub_scales", "sub_offsets")]
    _fields_ += [("super", INT)]


class Matrix(ctypes.Structure):
    """A grouped matrix; `rest`: NULL, or the matrix of the rows after these (decoder.h)."""


Matrix._fields_ = [
    ("values", PTR),
    ("scales", Scales),
    ("bias", PTR),
    ("rest", ctypes.POINTER(Matrix)),
    *((name, INT) for name in ("rows", "cols", "group", "bits")),
]


class Block(ctypes.Structure):
    _fields_ = [(name, PTR) for name in ("attention_norm", "q_norm", "k_norm", "mlp_norm")]
    _fields_ += [(name, Matrix) for name in MATRICES]


class Decoder(ctypes.Structure):
    _fields_ = [(name, INT) for name in ("layers", "hidden", "heads", "kv_heads", "head_dim")]
    _fields_ += [
        ("slots", INT),
        ("eps", FLOAT),
        ("scaling", FLOAT),
        ("blocks", ctypes.POINTER(Block)),
        ("norm", PTR),
    ]
    _fields_ += [(name, PTR) for name in ("keys", "values", "cos", "sin")]


class Segment(ctypes.Structure):
    """One document's rows in a pass: how many, its cache region's first slot, its first
    position."""

    _fields_ = [(name, INT) for name in ("rows", "base", "start")]


def expected_layout() -> list[int]:
    """What `pld_abi` reports for these structures: the version, then per structure its size and
    each field's offset in declaration order."""
    layout = [ABI_VERSION]
    for table in (Scales, Matrix, Block, Decoder, Segment):
        layout.append(ctypes.sizeof(table))
        layout += [getattr(table, name).offset for name, _ in table._fields_]
    return layout


def layout_mismatch(lib: ctypes.CDLL) -> str | None:
    """Why `lib`'s tables differ from these (one line), or None where they agree."""
    expected = expected_layout()
    reported = (ctypes.c_int64 * len(expected))()
    lib.pld_abi.argtypes, lib.pld_abi.restype = [ctypes.c_void_p, ctypes.c_int64], ctypes.c_int64
    count = lib.pld_abi(reported, len(expected))
    if count != len(expected) or list(reported) != expected:
        found = list(reported)[: min(count, len(expected))]
        return f"its ABI {found[:1]} and layout differ from pld's (version {ABI_VERSION})"
    return None
