"""Prompts' keys and values on disk, for the next `pld edit` or `pld summarize` on a document.

One file per prompt in the user cache (prompts/), bounded (`budget` bytes in all, the least
recently used file deleted first: each use touches its time). A file holds a header (the
identity, the tokens, the shape and dtype of the keys and values, a CRC-32 of them) and then the
keys and values. `identity` names the model, its weights, the kernels' revision and library: a
file of another is never used. A file that cannot be read whole (truncated, corrupt, another
format) is deleted with one warning, and the prompt is prefilled in full: never a crash, never
bits that are not the ones written.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import struct
import threading
import zlib
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import numpy as np
import torch

from pld_cli.runtime.prefix.store import Prefix, as_tokens, common_length

MAGIC = b"PLD-KV-1\n"
SUFFIX = ".kv"
LENGTH = struct.Struct("<Q")  # the header's length


class Unreadable(ValueError):
    """A file that is not a whole prompt file."""


class DiskPrefixes:
    """The prompts kept in `folder` under one identity; thread-safe within a process (files are
    replaced whole, so other processes see a file complete or not at all)."""

    def __init__(
        self, folder: Path, identity: str, budget: int, warn: Callable[[str], None]
    ) -> None:
        self.folder, self.identity, self.budget, self.warn = folder, identity, budget, warn
        self.lock = threading.Lock()

    def match(self, ids: Sequence[int]) -> tuple[int, Prefix | None]:
        """The kept prompt sharing the longest prefix with ids, read whole, and how many
        positions it gives; (0, None) where none shares one or it cannot be read."""
        tokens = as_tokens(ids)
        with self.lock:
            best, length = None, 0
            for path, header in self.headers():
                shared = common_length(header["ids"], tokens)
                if shared > length:
                    best, length = (path, header), shared
            if best is None:
                return 0, None
            prefix = self.read(*best)
            return (length, prefix) if prefix is not None else (0, None)

    def wants(self, ids: Sequence[int]) -> bool:
        tokens = as_tokens(ids)
        with self.lock:
            return not any(
                common_length(h["ids"], tokens) == len(tokens) for _, h in self.headers()
            )

    def keep(self, prefix: Prefix) -> None:
        if prefix.nbytes > self.budget:
            return
        with self.lock:
            for path, header in list(self.headers()):
                if common_length(header["ids"], prefix.tokens) == len(header["ids"]):
                    remove(path)  # this prompt extends it
            self.write(prefix)
            self.evict()

    def headers(self) -> Iterator[tuple[Path, dict]]:
        """(file, header) of every readable file of this identity."""
        for path in sorted(self.folder.glob(f"*{SUFFIX}")):
            try:
                header = read_header(path)
            except FileNotFoundError:
                continue  # deleted meanwhile by another process
            except (OSError, Unreadable) as why:
                self.drop(path, why)
                continue
            if header.get("identity") == self.identity:
                yield path, header

    def read(self, path: Path, header: dict) -> Prefix | None:
        try:
            with path.open("rb") as file:
                file.seek(header["offset"])
                payload = file.read()
            shape, dtype = tuple(header["shape"]), getattr(torch, header["dtype"])
            half = len(payload) // 2
            size = int(np.prod(shape)) * torch.empty((), dtype=dtype).element_size()
            if len(payload) != 2 * size or zlib.crc32(payload) != header["crc"]:
                raise Unreadable("its keys and values are not those written")
            os.utime(path)  # used: the last to go
        except FileNotFoundError:
            return None
        except (OSError, Unreadable, KeyError, TypeError, AttributeError) as why:
            self.drop(path, why)
            return None
        keys = torch.frombuffer(bytearray(payload[:half]), dtype=dtype).view(shape)
        values = torch.frombuffer(bytearray(payload[half:]), dtype=dtype).view(shape)
        return Prefix(header["ids"], keys, values)

    def write(self, prefix: Prefix) -> None:
        keys, values = prefix.keys.contiguous().numpy(), prefix.values.contiguous().numpy()
        payload = keys.tobytes() + values.tobytes()
        header = {
            "identity": self.identity,
            "tokens": prefix.tokens.tolist(),
            "shape": list(keys.shape),
            "dtype": str(prefix.keys.dtype).removeprefix("torch."),
            "crc": zlib.crc32(payload),
        }
        head = json.dumps(header).encode()
        name = hashlib.sha256(self.identity.encode() + prefix.tokens.tobytes()).hexdigest()[:32]
        path = self.folder / f"{name}{SUFFIX}"
        partial = path.with_suffix(f".{os.getpid()}.{threading.get_ident()}.part")
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            with partial.open("wb") as file:
                file.write(MAGIC + LENGTH.pack(len(head)) + head + payload)
            os.replace(partial, path)
        except OSError as why:
            remove(partial)
            self.warn(f"prompt cache: cannot write {path}: {why}")

    def evict(self) -> None:
        """Deletes the least recently used files (of any identity) past the budget."""
        files = []
        for path in self.folder.glob(f"*{SUFFIX}"):
            try:
                stat = path.stat()
            except OSError:
                continue
            files.append((stat.st_mtime_ns, stat.st_size, path))
        total = sum(size for _, size, _ in files)
        for _, size, path in sorted(files):
            if total <= self.budget:
                break
            remove(path)
            total -= size

    def drop(self, path: Path, why: Exception) -> None:
        self.warn(f"prompt cache: {path.name} ignored and deleted: {why}")
        remove(path)


def read_header(path: Path) -> dict:
    with path.open("rb") as file:
        magic = file.read(len(MAGIC))
        if magic != MAGIC:
            raise Unreadable("not a prompt file of this pld")
        raw = file.read(LENGTH.size)
        if len(raw) != LENGTH.size:
            raise Unreadable("truncated")
        (length,) = LENGTH.unpack(raw)
        head = file.read(length)
    if len(head) != length:
        raise Unreadable("truncated")
    try:
        header = json.loads(head)
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise Unreadable("its header is not JSON") from None
    try:
        header["ids"] = as_tokens(header["tokens"])
        shape = [int(n) for n in header["shape"]]
    except (TypeError, ValueError, KeyError, OverflowError):
        raise Unreadable("its header has no tokens or shape") from None
    if header["ids"].ndim != 1 or len(shape) != 4 or shape[2] != len(header["ids"]):
        raise Unreadable("its shape is not its tokens'")
    header["offset"] = len(MAGIC) + LENGTH.size + length
    return header


def remove(path: Path) -> None:
    with contextlib.suppress(OSError):
        path.unlink()
