"""Server-sent events as OpenAI streams them: `data: {json}` and a blank line each, `[DONE]` last.

Each event is written and flushed at once, so a client sees every pass's text as it comes. A
write to a client that has gone raises ClientGone: the decode stops and frees its slot.
"""

from __future__ import annotations

import json
from typing import BinaryIO

from pld_cli.serve.errors import ClientGone


class EventStream:
    def __init__(self, out: BinaryIO) -> None:
        self.out = out

    def send(self, data: dict) -> None:
        self.write(f"data: {json.dumps(data, ensure_ascii=False)}\n\n".encode())

    def done(self) -> None:
        self.write(b"data: [DONE]\n\n")

    def write(self, payload: bytes) -> None:
        try:
            self.out.write(payload)
            self.out.flush()
        except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError):
            raise ClientGone() from None
