"""pld's C kernels (`csrc/`), compiled for this machine on first use and loaded with ctypes.

They are built with `-march=native`, so the library is cached per source, compiler and CPU (its
flags from /proc/cpuinfo) in the user cache, written atomically. OpenMP comes from the libgomp
torch has already loaded (the library asks for the same soname), so the kernels share torch's
threads and their count. Where no compiler, no OpenMP or no AVX-512 is at hand, or PLD_C_KERNELS=0,
`loaded()` is None and says why in `unavailable()`: the callers keep torch's kernels.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import platform
import shutil
import subprocess
import tempfile
from functools import cache
from pathlib import Path

import torch  # noqa: F401  (loads torch's libgomp first, which the library then shares)

from pld_cli.cache import cache_dir

SOURCES = sorted((Path(__file__).parent / "csrc").glob("*.c"))
HEADERS = sorted((Path(__file__).parent / "csrc").glob("*.h"))  # included by the sources
FLAGS = ["-O3", "-march=native", "-fopenmp", "-shared", "-fPIC"]
PTR, INT, FLOAT = ctypes.c_void_p, ctypes.c_int64, ctypes.c_float
# Each kernel and its arguments; a kernel the CPU lacks instructions for is left out of the build.
SIGNATURES = {
    "attend_rows": ([PTR, PTR, PTR, INT, INT, INT, INT, INT, INT, FLOAT, PTR], ctypes.c_int),
    "grouped_int8_mm": ([PTR, INT, PTR, PTR, PTR, INT, INT, PTR], ctypes.c_int),
    "decode_rows": ([PTR, PTR, INT, INT], ctypes.c_int),
}

_why: list[str] = []


def loaded() -> ctypes.CDLL | None:
    """The compiled kernels, or None (see `unavailable`)."""
    return _load()


def kernel(name: str):
    """One kernel of the library, or None where the library or that kernel was not built."""
    lib = _load()
    return getattr(lib, name) if lib is not None and hasattr(lib, name) else None


def unavailable() -> str | None:
    """Why the kernels are not in use, or None when they are."""
    _load()
    return _why[0] if _why else None


@cache
def _load() -> ctypes.CDLL | None:
    if os.environ.get("PLD_C_KERNELS", "1") == "0":
        return _refuse("PLD_C_KERNELS=0")
    compiler = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if compiler is None or platform.system() != "Linux":
        return _refuse("no C compiler on Linux")
    try:
        path = _built(compiler)
        lib = ctypes.CDLL(str(path))
    except (OSError, subprocess.SubprocessError) as why:
        return _refuse(f"not built: {str(why).splitlines()[0] if str(why) else type(why).__name__}")
    for name, (argtypes, restype) in SIGNATURES.items():
        if hasattr(lib, name):
            getattr(lib, name).argtypes, getattr(lib, name).restype = argtypes, restype
    return lib


def _refuse(why: str) -> None:
    _why.append(why)
    return None


def _built(compiler: str) -> Path:
    """The library for these sources on this compiler and CPU, compiled once."""
    version = subprocess.run([compiler, "--version"], capture_output=True, text=True, timeout=30)
    key = hashlib.sha256()
    for part in [
        *(s.read_bytes() for s in SOURCES + HEADERS),
        version.stdout.encode(),
        _cpu_flags(),
    ]:
        key.update(part)
    path = cache_dir() / "kernels" / f"pld-kernels-{key.hexdigest()[:16]}.so"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=path.parent) as folder:
            built = Path(folder) / path.name
            command = [compiler, *FLAGS, "-o", str(built), *map(str, SOURCES), "-lm"]
            done = subprocess.run(command, capture_output=True, text=True, timeout=300)
            if done.returncode != 0:
                raise subprocess.SubprocessError(_first_error(done.stderr))
            os.replace(built, path)  # another process may have built it too: same bytes
    return path


def _first_error(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if "error" in line]
    return (lines or stderr.splitlines() or ["the compiler failed"])[0].strip()


def _cpu_flags() -> bytes:
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return b""
    return next((line for line in lines if line.startswith("flags")), "").encode()
