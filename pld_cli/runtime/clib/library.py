"""pld's C kernels (`csrc/`), built at install once per instruction set (setup.py), one of them
loaded with ctypes when first asked for.

Like ggml's CPU backend and numpy, the library comes in variants: AVX-512 VNNI, AVX-VNNI (the
same dot-product instruction on 256-bit registers: Intel's AVX2 CPUs since Alder Lake), AVX2 and
plain C,
each the same source compiled for its instructions and each computing the same bits (csrc/simd.h),
so the choice changes the speed, never the output. The best variant that was built and that this
CPU runs is taken (the portable library, which uses no special instruction, is asked what the CPU
runs); `PLD_KERNELS` names one (`avx2`, `portable`, ...) or `off`. A variant whose tables differ
from pld's (a stale build) is refused. OpenMP comes from the libgomp torch has already loaded (the
library asks for the same soname), so the kernels share torch's threads and their count. Where no
variant can be had, `loaded()` is None and `unavailable()` says why, once for the process.
"""

from __future__ import annotations

import ctypes
import importlib.machinery
import os
from enum import Enum
from functools import cache
from pathlib import Path

import torch  # noqa: F401  (loads torch's libgomp first, which the library then shares)

from pld_cli.runtime.clib.tables import FLOAT, INT, PTR, layout_mismatch

# Each kernel and its arguments; then the OpenMP runtime's own functions that pld calls through
# the library (threads.py), which links it.
SIGNATURES = {
    "attend_rows": ([PTR, PTR, PTR, INT, INT, INT, INT, INT, INT, FLOAT, PTR], ctypes.c_int),
    "grouped_mm": ([PTR, INT, PTR, PTR], ctypes.c_int),
    "decode_rows": ([PTR, PTR, PTR, INT], ctypes.c_int),
    "gguf_unpack": ([PTR, INT], ctypes.c_int),
    "pld_peak": ([INT, INT], INT),
    "omp_set_num_threads": ([ctypes.c_int], None),
    "omp_get_max_threads": ([], ctypes.c_int),
    "omp_pause_resource_all": ([ctypes.c_int], ctypes.c_int),
}
WRONG_SIZES = -2  # what a kernel returns for sizes it does not take (csrc/)


class Variant(str, Enum):
    """A build of the library for one instruction set, best first."""

    AVX512_VNNI = "avx512-vnni"
    AVX_VNNI = "avx-vnni"
    AVX2 = "avx2"
    PORTABLE = "portable"

    def __str__(self) -> str:
        return self.value

    @property
    def path(self) -> Path | None:
        """The built library, or None where it was not built (setup.py names it _<variant>)."""
        stem = Path(__file__).parent / f"_{self.value.replace('-', '_')}"
        for suffix in importlib.machinery.EXTENSION_SUFFIXES:
            if stem.with_name(stem.name + suffix).exists():
                return stem.with_name(stem.name + suffix)
        return None


def loaded() -> ctypes.CDLL | None:
    """The chosen variant's library, or None (see `unavailable`)."""
    return _load()[0]


def variant() -> Variant | None:
    """The variant that runs, or None where none does."""
    return _load()[1]


def kernel(name: str):
    """One function of the library (a kernel, or OpenMP's in SIGNATURES), or None where no library
    is loaded."""
    lib = loaded()
    return getattr(lib, name) if lib is not None else None


def unavailable() -> str | None:
    """Why the kernels are not in use, or None when they are."""
    return _load()[2]


def runnable() -> list[Variant]:
    """The variants built here that this CPU runs, best first."""
    portable = _open(Variant.PORTABLE)
    if portable is None:
        return []
    portable.pld_cpu_runs.argtypes, portable.pld_cpu_runs.restype = [ctypes.c_char_p], ctypes.c_int
    return [v for v in Variant if v.path is not None and portable.pld_cpu_runs(v.value.encode())]


@cache
def _load() -> tuple[ctypes.CDLL | None, Variant | None, str | None]:
    asked = os.environ.get("PLD_KERNELS", "auto")
    if asked == "off":
        return None, None, "PLD_KERNELS=off"
    if asked not in ("auto", *Variant._value2member_map_):
        names = ", ".join(["auto", "off", *Variant._value2member_map_])
        return None, None, f"PLD_KERNELS={asked}: expected one of {names}"
    runs = runnable()
    if not runs:
        return None, None, "not built when pld was installed (no C compiler with OpenMP?)"
    chosen = runs[0] if asked == "auto" else Variant(asked)
    if chosen not in runs:
        return None, None, f"PLD_KERNELS={asked}: not built here or not run by this CPU"
    lib = _open(chosen)
    why = layout_mismatch(lib) if lib is not None else "it does not load"
    if why is not None:
        return None, None, f"the {chosen} build is stale: {why}; reinstall pld"
    for name, (argtypes, restype) in SIGNATURES.items():
        getattr(lib, name).argtypes, getattr(lib, name).restype = argtypes, restype
    return lib, chosen, None


@cache
def _open(variant: Variant) -> ctypes.CDLL | None:
    """A variant's library, loaded (not yet called), or None where it was not built."""
    try:
        return ctypes.CDLL(str(variant.path)) if variant.path is not None else None
    except OSError:
        return None
