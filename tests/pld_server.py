"""pld serve in this process, on an ephemeral port of 127.0.0.1, and small clients for it.

The server runs the real default model as `pld serve` does (its GGUF's own blocks, in a batch of
JOBS slots of CONTEXT positions: 2,048, as the vLLM the --server tests run against). Clients are
the standard library's, so a test sees the bytes the server sends.
"""

from __future__ import annotations

import http.client
import json
from urllib.parse import urlsplit

from pld_cli.loading.models import ModelSpec
from pld_cli.serve.app import CACHE_RAM, Server, load_engine
from pld_cli.serve.holder import ModelHolder

JOBS = 4
CONTEXT = 2048


class Notes(list):
    """What the server says on stderr, kept for the tests to read."""

    def __call__(self, message: str) -> None:
        self.append(message)


def start(
    jobs: int = JOBS,
    context: int = CONTEXT,
    keep_alive: float | None = None,
    use_pld: bool = True,
    cache_ram: int = CACHE_RAM,
) -> Server:
    notes = Notes()
    load = load_engine(ModelSpec(), jobs, context, notes, notes, cache_ram)
    holder = ModelHolder(load, keep_alive, notes)
    server = Server("127.0.0.1", 0, holder, notes, use_pld)
    holder.open()
    server.start()
    return server


def connection(url: str, timeout: float = 300) -> http.client.HTTPConnection:
    parts = urlsplit(url)
    return http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout)


def post(url: str, path: str, body: dict | bytes) -> tuple[int, dict]:
    """The status and JSON of a POST (a dict goes as JSON, bytes as they are)."""
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    client = connection(url)
    try:
        client.request("POST", path, data, {"Content-Type": "application/json"})
        response = client.getresponse()
        return response.status, json.loads(response.read())
    finally:
        client.close()


def get(url: str, path: str) -> tuple[int, dict]:
    client = connection(url)
    try:
        client.request("GET", path)
        response = client.getresponse()
        return response.status, json.loads(response.read())
    finally:
        client.close()


def events(url: str, path: str, body: dict) -> list[dict | str]:
    """Every event of a streamed answer, `[DONE]` as the string it is."""
    client = connection(url)
    try:
        client.request("POST", path, json.dumps(body | {"stream": True}).encode())
        response = client.getresponse()
        assert response.status == 200 and "text/event-stream" in response.headers["Content-Type"]
        found = []
        for line in response.read().decode().split("\n\n"):
            if line.startswith("data: "):
                data = line.removeprefix("data: ")
                found.append(data if data == "[DONE]" else json.loads(data))
        return found
    finally:
        client.close()


def streamed_text(found: list[dict | str]) -> str:
    """The text of a chat or completions stream's chunks, joined."""
    parts = []
    for event in found:
        for choice in event["choices"] if isinstance(event, dict) else []:
            parts.append(choice.get("text") or choice.get("delta", {}).get("content") or "")
    return "".join(parts)
