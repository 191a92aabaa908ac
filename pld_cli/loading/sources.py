"""What a -m/--model value names, told without importing torch, so a wrong one fails in a line.

A value is a .gguf file, a model folder (one with config.json) or a hub id. A path that names
nothing is not sent to the hub as an id; a hub id that is not in the local cache is fetched only
when the hub can be reached: offline (HF_HUB_OFFLINE) or unreachable, pld says so at once rather
than letting huggingface_hub retry for a minute and print its own lines.
"""

from __future__ import annotations

import os
import re
import socket
import threading
from pathlib import Path
from urllib.parse import urlparse

from pld_cli.errors import PldError

HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*(/[\w.-]+)?")
GGUF_MAGIC = b"GGUF"
REACH_TIMEOUT_S = 1.5


def check_source(name: str, revision: str | None = None) -> str:
    """'gguf', 'folder' or 'hub' for a model name that can be loaded; else a PldError."""
    path = Path(name).expanduser()
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise PldError(f"{name}: not a model folder (no config.json)")
        return "folder"
    if path.is_file():
        if path.suffix != ".gguf":
            raise PldError(f"{name}: not a model folder or .gguf file")
        with path.open("rb") as file:
            if file.read(4) != GGUF_MAGIC:
                raise PldError(f"{name}: not a GGUF file (it does not start with 'GGUF')")
        return "gguf"
    if name.endswith(".gguf") or not is_hub_id(name):
        raise PldError(f"{name}: no such model folder or file")
    check_hub(name, revision)
    return "hub"


def is_hub_id(name: str) -> bool:
    return bool(HUB_ID.fullmatch(name)) and ".." not in name and not name.endswith(".")


def check_hub(name: str, revision: str | None) -> None:
    """A hub id must be cached, or the hub reachable to fetch it."""
    if cached(name, revision):
        return
    if offline():
        raise PldError(
            f"{name}: no such model folder, and the hub id is not in the local cache "
            "(HF_HUB_OFFLINE is set, so it is not fetched)"
        )
    host = urlparse(os.environ.get("HF_ENDPOINT") or "https://huggingface.co")
    if not reachable(host.hostname or "huggingface.co", host.port or 443):
        raise PldError(
            f"{name}: no such model folder, the hub id is not in the local cache, and the hub "
            f"({host.hostname}) cannot be reached to fetch it"
        )


def cached(name: str, revision: str | None) -> bool:
    from huggingface_hub import try_to_load_from_cache  # light: no torch

    try:
        return isinstance(try_to_load_from_cache(name, "config.json", revision=revision), str)
    except ValueError:  # not a valid repo id
        return False


def offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")


def reachable(host: str, port: int) -> bool:
    """Whether a TCP connection opens within REACH_TIMEOUT_S (name lookup included: a thread,
    since getaddrinfo has no timeout of its own)."""
    result: list[bool] = []

    def connect() -> None:
        try:
            socket.create_connection((host, port), timeout=REACH_TIMEOUT_S).close()
            result.append(True)
        except OSError:
            result.append(False)

    thread = threading.Thread(target=connect, daemon=True)
    thread.start()
    thread.join(REACH_TIMEOUT_S)
    return bool(result and result[0])
