"""The HTTP routes: /health, /v1/models, and the two completion endpoints, streamed or not.

Each request runs on its own thread (app.py): read and checked (every fault one 4xx JSON error,
before any decoding), then decoded on the held engine in a slot of its own. A streamed answer
sends one event per pass as it comes; a plain one waits for the whole. Between passes the
decode asks whether to go on: a client that closed its connection (a write fails, or the socket
reads as closed) stops it, and the slot goes to the next request; so does the server stopping.
"""

from __future__ import annotations

import contextlib
import json
import select
import socket
import time
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler
from urllib.parse import unquote, urlsplit

from pld_cli.errors import PldError
from pld_cli.runtime.batch.scheduler import Cancelled
from pld_cli.serve import responses
from pld_cli.serve.answer import Answer, decode
from pld_cli.serve.errors import ApiError, ClientGone, ErrorType, ShuttingDown
from pld_cli.serve.prompting import Prepared, prepare
from pld_cli.serve.requests import Endpoint, Request, parse
from pld_cli.serve.sse import EventStream

MAX_BODY = 64 * 2**20  # bytes: a request body beyond this is refused (413)
MODELS = "/v1/models"


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # persistent connections, as OpenAI's clients keep them
    server_version = "pld-serve"

    def log_message(self, format: str, *args) -> None:
        """http.server's own log is off: app.py notes one line per completion."""

    def do_GET(self) -> None:
        path = urlsplit(self.path).path.rstrip("/")
        served = self.server.holder.served
        if path == "/health":
            stopping = self.server.holder.stopping.is_set()
            status = HTTPStatus.SERVICE_UNAVAILABLE if stopping else HTTPStatus.OK
            self.send_json(status, {"status": "stopping" if stopping else "ok"})
        elif path == MODELS:
            self.send_json(HTTPStatus.OK, responses.model_list(served))
        elif unquote(path) == f"{MODELS}/{served.name}":
            self.send_json(HTTPStatus.OK, responses.model_entry(served))
        else:
            self.send_error_json(not_found(path))

    def do_POST(self) -> None:
        try:
            body = self.read_body()
            endpoint = endpoint_of(urlsplit(self.path).path.rstrip("/"))
            request = parse(endpoint, body)
            self.check_model(request)
            self.complete(request)
        except ApiError as exc:
            self.send_error_json(exc)
        except (ClientGone, BrokenPipeError, ConnectionResetError):
            self.close_connection = True
            self.server.note(f"{self.path}: the client went away; its decode stopped")
        except Exception as exc:  # noqa: BLE001 - a bug: one line here and a 500, the server goes on
            self.server.note(f"error: {self.path}: {type(exc).__name__}: {exc}")
            self.close_connection = True
            self.send_error_json(failed(f"{type(exc).__name__}: {exc}"))

    def read_body(self) -> bytes:
        length = self.headers.get("Content-Length")
        if length is None or not length.isdigit():
            self.close_connection = True
            raise ApiError("a request body needs a Content-Length", HTTPStatus.LENGTH_REQUIRED)
        if int(length) > MAX_BODY:
            self.close_connection = True
            raise ApiError(
                f"the body is over {MAX_BODY // 2**20} MiB", HTTPStatus.REQUEST_ENTITY_TOO_LARGE
            )
        return self.rfile.read(int(length))

    def check_model(self, request: Request) -> None:
        served = self.server.holder.served.name
        if request.model is not None and request.model != served:
            raise ApiError(
                f"the model {request.model!r} does not exist here; this server serves {served!r}",
                HTTPStatus.NOT_FOUND,
                ErrorType.INVALID_REQUEST,
                param="model",
                code="model_not_found",
            )

    def complete(self, request: Request) -> None:
        """Decode the request and answer it: at once, or as a stream."""
        holder = self.server.holder
        prepared = prepare(
            request, holder.tokenizer, holder.served.context, holder.penalty, self.server.use_pld
        )
        reply = responses.reply_for(request, holder.served.name, time.time())
        start = time.perf_counter()
        with holder.engine() as engine:
            if request.stream:
                answer = self.stream(engine, prepared, reply, request.include_usage)
            else:
                answer = self.decoded(engine, prepared)
                self.send_json(HTTPStatus.OK, responses.completion(reply, answer))
        if answer is not None:
            self.server.completed(request.endpoint, answer, time.perf_counter() - start)

    def decoded(self, engine, prepared: Prepared, on_delta=lambda _: None) -> Answer:
        """The whole answer (each pass's delta to `on_delta` on the way), or ApiError for
        whatever stopped it: the server stopping, pld's own error, anything unexpected."""
        try:
            return decode(engine, prepared, on_delta, self.check)
        except (ApiError, ClientGone):
            raise
        except Cancelled:
            raise ShuttingDown() from None
        except PldError as exc:
            raise failed(str(exc)) from None
        except Exception as exc:  # noqa: BLE001 - a bug: one line here, the server goes on
            self.server.note(f"error: {type(exc).__name__}: {exc}")
            raise failed(f"{type(exc).__name__}: {exc}") from None

    def stream(self, engine, prepared: Prepared, reply, include_usage: bool) -> Answer | None:
        """One event per pass; an error after the first event is an error event (then the
        stream's end), as vLLM sends it."""
        self.send_response(HTTPStatus.OK)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        events = EventStream(self.wfile)
        first = responses.role_chunk(reply)
        if first is not None:
            events.send(first)

        def send(delta) -> None:
            chunk = responses.chunk(reply, delta)
            if chunk is not None:
                events.send(chunk)

        try:
            answer = self.decoded(engine, prepared, send)
        except ApiError as exc:
            events.send(exc.body())
            events.done()
            return None
        if include_usage:
            events.send(responses.usage_chunk(reply, answer.stats))
        events.done()
        return answer

    def check(self) -> None:
        """Between passes: stop for a server stopping or a client gone."""
        if self.server.holder.stopping.is_set():
            raise ShuttingDown()
        if peer_closed(self.connection):
            raise ClientGone()

    def send_json(self, status: HTTPStatus, data: dict) -> None:
        payload = json.dumps(data, ensure_ascii=False).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def send_error_json(self, error: ApiError) -> None:
        self.send_json(error.status, error.body())


def endpoint_of(path: str) -> Endpoint:
    for endpoint in Endpoint:
        if path == endpoint.value:
            return endpoint
    raise not_found(path)


def not_found(path: str) -> ApiError:
    return ApiError(f"no such path: {path}", HTTPStatus.NOT_FOUND, ErrorType.NOT_FOUND)


def failed(message: str) -> ApiError:
    """An error while decoding, as a 500 that says it."""
    return ApiError(message, HTTPStatus.INTERNAL_SERVER_ERROR, ErrorType.SERVER)


def peer_closed(sock: socket.socket) -> bool:
    """Whether the client has closed its end: the socket reads as at its end (data it sent
    ahead, a next request, is only peeked at)."""
    try:
        readable, _, _ = select.select([sock], [], [], 0)
        if not readable:
            return False
        with contextlib.suppress(BlockingIOError):
            return sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
        return False
    except (OSError, ValueError):
        return True
