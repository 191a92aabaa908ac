"""The disk cache of prompts (runtime/prefix/disk.py) for a loaded model: where, how large, and
the identity its files are kept under, so that a file of another model, other weights or other
kernels is never used."""

from __future__ import annotations

import hashlib
import sys
from functools import cache

from pld_cli.cache import cache_dir
from pld_cli.loading.models import LoadedModel, ModelSpec, gguf_file
from pld_cli.runtime.calibration.costs import KERNEL_REVISION
from pld_cli.runtime.clib import library
from pld_cli.runtime.prefix.disk import DiskPrefixes
from pld_cli.runtime.prefix.store import MIB

DISK_BUDGET = 2048 * MIB  # all kept prompts' files together


def disk_prompts(loaded: LoadedModel, spec: ModelSpec) -> DiskPrefixes:
    return DiskPrefixes(cache_dir() / "prompts", identity(loaded, spec), DISK_BUDGET, warn)


def identity(loaded: LoadedModel, spec: ModelSpec) -> str:
    """The model, its weights' file (path, size, time) or hub revision, how they run, and the
    kernels: their revision and the bytes of the C library that runs."""
    parts = [loaded.name, loaded.weights, loaded.dtype, loaded.device, weights_of(spec)]
    return "|".join([*parts, f"kernels={KERNEL_REVISION}", f"library={library_digest()}"])


def weights_of(spec: ModelSpec) -> str:
    path = gguf_file(spec)
    if path is None:
        return f"{spec.name}@{spec.revision}"
    stat = path.stat()
    return f"{path.resolve()}:{stat.st_size}:{stat.st_mtime_ns}"


@cache
def library_digest() -> str:
    """SHA-256 of the C library's file (a rebuilt kernel is another cache), or 'none'."""
    variant = library.variant()
    path = variant.path if variant is not None else None
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16] if path is not None else "none"


def warn(message: str) -> None:
    print(f"pld: warning: {message}", file=sys.stderr, flush=True)
