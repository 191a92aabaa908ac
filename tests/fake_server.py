"""A scripted OpenAI-compatible server on 127.0.0.1, for the logic of pld's server engine.

It streams `/v1/completions` as vLLM does (a chunk per step with its token ids, a usage chunk with
per-request drafting metrics, `[DONE]`), or fails as a test asks: an HTTP status, an error event,
a stream cut mid-answer, silence (before every chunk, or before one). The product is tested
against a real vLLM (tests/server/).
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Answer:
    """How the server answers one completion request."""

    chunks: list[list[int]] = field(default_factory=lambda: [[1], [2, 3, 4], [5]])
    finish: str = "stop"
    status: int = 200  # anything else: that status with an OpenAI-style error body
    message: str = "bad request"
    metrics: dict | None = field(
        default_factory=lambda: {"num_draft_tokens": 9, "num_accepted_draft_tokens": 2}
    )
    cut_after: int | None = None  # chunks sent before the connection drops
    error_after: int | None = None  # chunks sent before an error event
    delay: float = 0.0  # seconds before each chunk
    pauses: dict[int, float] = field(default_factory=dict)  # chunk index -> more silence before it
    retry_after: str | None = None


class FakeServer:
    def __init__(self, root: str, answer: Callable[[dict], Answer] | None = None) -> None:
        self.root = root  # the model folder /v1/models reports (its tokenizer is read there)
        self.queue: deque[Answer] = deque()  # answers for the next requests, then `answer`
        self.answer = answer or (lambda body: Answer())
        self.requests: list[dict] = []
        self.health: int | None = 200  # what /health answers (None: no such path, 404)
        self.headers: list[dict] = []
        self.lock = threading.Lock()
        self.in_flight = self.most_in_flight = 0
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), self.handler())
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def next_answer(self, body: dict) -> Answer:
        with self.lock:
            self.requests.append(body)
            return self.queue.popleft() if self.queue else self.answer(body)

    def handler(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:
                pass

            def do_GET(self) -> None:
                if self.path == "/health":
                    return self.send_json(server.health or 404, {})
                models = {"data": [{"id": "fake", "root": server.root, "max_model_len": 8192}]}
                self.send_json(200, models)

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.headers.append(dict(self.headers))
                answer = server.next_answer(body)
                if answer.status != 200:
                    extra = {"Retry-After": answer.retry_after} if answer.retry_after else {}
                    return self.send_json(
                        answer.status, {"error": {"message": answer.message}}, extra
                    )
                with server.lock:
                    server.in_flight += 1
                    server.most_in_flight = max(server.most_in_flight, server.in_flight)
                self.counted = True
                try:
                    self.stream(answer)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client went away (a test of cancelling)
                finally:
                    self.done()

            def done(self) -> None:
                """No longer in flight: before the last word, which frees the client's slot."""
                if self.counted:
                    self.counted = False
                    with server.lock:
                        server.in_flight -= 1

            def stream(self, answer: Answer) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Connection", "close")
                self.end_headers()
                last = len(answer.chunks) - 1
                for i, ids in enumerate(answer.chunks):
                    if answer.cut_after == i or answer.error_after == i:
                        break
                    time.sleep(answer.delay + answer.pauses.get(i, 0.0))
                    choice = {
                        "index": 0,
                        "text": "",
                        "token_ids": ids,
                        "finish_reason": answer.finish if i == last else None,
                    }
                    self.event({"choices": [choice]})
                if answer.cut_after is not None:
                    return  # the connection closes without [DONE]
                self.done()
                if answer.error_after is not None:
                    self.event({"error": {"message": "engine died", "code": 500}})
                else:
                    metrics = {"speculative_decoding": answer.metrics} if answer.metrics else None
                    self.event(
                        {"choices": [], "usage": {}} | ({"metrics": metrics} if metrics else {})
                    )
                self.wfile.write(b"data: [DONE]\n\n")

            def event(self, data: dict) -> None:
                self.wfile.write(f"data: {json.dumps(data)}\n\n".encode())
                self.wfile.flush()

            def send_json(self, status: int, data: dict, headers: dict | None = None) -> None:
                payload = json.dumps(data).encode()
                self.send_response(status)
                for key, value in {"Content-Type": "application/json", **(headers or {})}.items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        return Handler
