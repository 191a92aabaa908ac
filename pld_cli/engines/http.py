"""An OpenAI-compatible server over HTTP: JSON requests, server-sent event streams, faults named.

Standard library only (http.client): a JSON GET, and a POST whose answer is a stream of `data:`
events. Every way a call can fail becomes one `ServerError` line that names the cause: the server
unreachable or refusing, an HTTP status with the server's own message, an error event inside the
stream, a stream cut before its end, no answer within the timeout. 429 and 503 (busy, loading) are
retried a bounded number of times with backoff; nothing else is. `close()` cuts every connection in
flight (Ctrl-C). The API key goes in a header and never into a message.

A stream that falls silent is not simply waited on: a server whose engine died can keep its streams
open with nothing in them. After STALL seconds of silence the server's health is asked (vLLM's
/health, else /v1/models), and again every STALL seconds the silence lasts; an unwell or
unreachable server fails the call at once. A healthy one may stay silent before its first token
for the rest of --timeout (a long prefill, a busy queue), but once the stream has begun, silence
past the per-token limit (TOKEN_STALL, --token-timeout) fails the call even while /health answers
200: a running answer's tokens come steps apart, and an engine hung with its front end still up
would otherwise hold the call for all of --timeout.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from urllib.parse import urlsplit

from pld_cli.errors import PldError

RETRIED = (429, 503)  # busy or still loading: worth waiting for
RETRIES = 4
FIRST_DELAY = 1.0  # seconds; doubled each retry, or the server's Retry-After (up to MAX_DELAY)
MAX_DELAY = 30.0
STALL = 10.0  # seconds of silence in a stream before the server's health is asked
TOKEN_STALL = 60.0  # seconds of silence after a stream's first token that fail it, healthy or not
PROBE_TIMEOUT = 5.0  # seconds a health probe may take; a server that cannot answer is unwell


class ServerError(PldError):
    """A call to the server failed; the message names the cause (and the HTTP status, if any)."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class Client:
    """One server: its address, key and timeout; any number of calls at once, from any thread."""

    def __init__(
        self,
        url: str,
        api_key: str | None = None,
        timeout: float = 600.0,
        token_timeout: float | None = None,
    ) -> None:
        parts = urlsplit(url if "://" in url else f"http://{url}")
        try:
            port = parts.port
        except ValueError:
            port = -1
        if parts.scheme not in ("http", "https") or not parts.hostname or port == -1:
            raise PldError(f"--server {shown(url)}: expected http(s)://HOST[:PORT]")
        self.https = parts.scheme == "https"
        self.host, self.port = parts.hostname, port
        self.prefix = parts.path.rstrip("/").removesuffix("/v1")
        self.where = f"{parts.scheme}://{parts.hostname}" + (f":{port}" if port else "")
        self.api_key, self.timeout = api_key, timeout
        self.token_timeout = token_timeout  # None: TOKEN_STALL, read when a stream starts
        self.open: set[socket.socket] = set()  # sockets of the calls in flight
        self.lock = threading.Lock()
        self.closed = False

    def get(self, path: str) -> dict:
        with self.request("GET", path) as response:
            return self.json_of(response.read())

    def stream(self, path: str, body: dict) -> Iterator[dict]:
        """The JSON of each `data:` event until `[DONE]`; a stream that ends before is an error."""
        with self.request("POST", path, body) as response, Watchdog(self, response) as watchdog:
            try:
                for data in events(response, self.where, self.timeout, watchdog.heard):
                    if data == "[DONE]":
                        return
                    event = self.json_of(data.encode())
                    if "error" in event:  # vLLM reports a failure inside a stream this way
                        raise ServerError(f"the server failed mid-answer: {message_of(event)}")
                    yield event
            except ServerError:
                watchdog.explain()
                raise
            watchdog.explain()
        raise ServerError(f"the server at {self.where} ended the stream before the answer did")

    def unwell(self) -> str | None:
        """Why the server is not fit to finish an answer, or None: its /health (or /v1/models,
        where it has no /health) answered 200 within PROBE_TIMEOUT."""
        for path in ("/health", "/v1/models"):
            status = self.probe(path)
            if status == 200:
                return None
            if status != 404:
                break
        if isinstance(status, str):
            return status
        return f"its {path} answered {status}"

    def probe(self, path: str) -> int | str:
        """The HTTP status of a GET, or why there was none; no retries, a short timeout."""
        kind = http.client.HTTPSConnection if self.https else http.client.HTTPConnection
        connection = kind(self.host, self.port, timeout=PROBE_TIMEOUT)
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        try:
            connection.request("GET", self.prefix + path, headers=headers)
            return connection.getresponse().status
        except TimeoutError:
            return f"its {path} did not answer within {PROBE_TIMEOUT:g} s"
        except (OSError, http.client.HTTPException) as exc:
            return f"unreachable ({reason(exc)})"
        finally:
            connection.close()

    def close(self) -> None:
        """Cut every connection in flight: their readers fail at once (Ctrl-C)."""
        with self.lock:
            self.closed = True
            for sock in self.open:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)

    def request(self, method: str, path: str, body: dict | None = None) -> Response:
        delay = FIRST_DELAY
        for attempt in range(RETRIES + 1):
            response = self.attempt(method, path, body)
            if response.status < 400:
                return response
            text = response.read()
            response.close()
            if response.status not in RETRIED or attempt == RETRIES:
                message = status_message(response.status, response.reason, text)
                raise ServerError(message, response.status)
            wait = retry_after(response.headers.get("Retry-After")) or delay
            time.sleep(min(wait, MAX_DELAY))
            delay *= 2
        raise AssertionError("unreachable")

    def attempt(self, method: str, path: str, body: dict | None) -> Response:
        kind = http.client.HTTPSConnection if self.https else http.client.HTTPConnection
        connection = kind(self.host, self.port, timeout=self.timeout)
        headers = {"Accept": "application/json, text/event-stream"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        data = None if body is None else json.dumps(body).encode()
        if data is not None:
            headers["Content-Type"] = "application/json"
        sock = None
        try:
            connection.connect()
            sock = connection.sock  # the answer keeps reading it after the connection lets go
            with self.lock:
                if self.closed:
                    raise ServerError("cancelled")
                self.open.add(sock)
            connection.request(method, self.prefix + path, body=data, headers=headers)
            return Response(connection.getresponse(), connection, sock, self)
        except TimeoutError:
            self.forget(connection, sock)
            raise ServerError(
                f"no answer from the server at {self.where} within {self.timeout:g} s (--timeout)"
            ) from None
        except (OSError, http.client.HTTPException) as exc:
            self.forget(connection, sock)
            raise ServerError(f"cannot reach the server at {self.where}: {reason(exc)}") from None
        except ServerError:
            self.forget(connection, sock)
            raise

    def forget(self, connection: http.client.HTTPConnection, sock: socket.socket | None) -> None:
        with self.lock:
            self.open.discard(sock)
        connection.close()
        if sock is not None:
            sock.close()

    def json_of(self, data: bytes) -> dict:
        try:
            value = json.loads(data)
        except ValueError:
            raise ServerError(f"the server at {self.where} did not answer in JSON") from None
        if not isinstance(value, dict):
            raise ServerError(f"the server at {self.where} answered an unexpected JSON value")
        return value


class Response:
    """An answer and its connection, closed (and forgotten by the client) together."""

    def __init__(
        self,
        raw: http.client.HTTPResponse,
        connection: http.client.HTTPConnection,
        sock: socket.socket,
        client: Client,
    ) -> None:
        self.raw, self.connection, self.sock, self.client = raw, connection, sock, client
        self.status, self.reason, self.headers = raw.status, raw.reason, raw.headers

    def read(self) -> bytes:
        try:
            return self.raw.read()
        except (OSError, http.client.HTTPException) as exc:
            raise ServerError(
                f"the connection to {self.client.where} broke: {reason(exc)}"
            ) from None

    def readline(self) -> bytes:
        return self.raw.readline()

    def close(self) -> None:
        self.raw.close()
        self.client.forget(self.connection, self.sock)

    def __enter__(self) -> Response:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()


def events(
    response: Response, where: str, timeout: float, heard: Callable[[], None] = lambda: None
) -> Iterator[str]:
    """The data of each server-sent event (its `data:` lines joined), as text; `heard()` after
    every line read."""
    lines: list[str] = []
    while True:
        try:
            raw = response.readline()
            heard()
        except TimeoutError:
            raise ServerError(
                f"the server at {where} sent nothing for {timeout:g} s (--timeout)"
            ) from None
        except (OSError, http.client.HTTPException) as exc:
            raise ServerError(
                f"the connection to {where} broke mid-answer: {reason(exc)}"
            ) from None
        if not raw:  # the end of the stream
            if lines:
                yield "\n".join(lines)
            return
        line = raw.decode("utf-8", "replace").rstrip("\r\n")
        if line.startswith("data:"):
            lines.append(line[5:].removeprefix(" "))
        elif not line and lines:
            yield "\n".join(lines)
            lines = []


class Watchdog:
    """Watches one stream from a thread of its own, and cuts it where waiting longer is pointless;
    `explain()` then turns whatever the reader saw into one error naming the cause.

    Two limits on silence, one mechanism: after STALL seconds of it, and every STALL seconds it
    lasts, the server's health is asked, and an unwell server is cut off at once; once the stream
    has delivered its first line, silence past `token_limit` is cut off too, healthy or not (a
    token of a running answer is one engine step away; before the first one, a long prefill or a
    busy queue may keep a well server silent for all of --timeout)."""

    def __init__(self, client: Client, response: Response, every: float | None = None) -> None:
        self.client, self.response = client, response
        self.every = STALL if every is None else every
        limit = client.token_timeout
        self.token_limit = TOKEN_STALL if limit is None else limit
        self.last = self.asked = time.monotonic()  # last line heard, last health asked
        self.started = False  # a line of the stream has come: the first token's event
        self.why: str | None = None
        self.done = threading.Event()
        self.thread = threading.Thread(target=self.watch, daemon=True)

    def __enter__(self) -> Watchdog:
        self.thread.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self.done.set()

    def heard(self) -> None:
        self.last = time.monotonic()
        self.started = True

    def watch(self) -> None:
        """Look a few times per limit; cut the stream at the first verdict against it."""
        while not self.done.wait(min(self.every, self.token_limit) / 4):
            why = self.verdict(time.monotonic())
            if why is not None:
                self.why = why
                with contextlib.suppress(OSError):
                    self.response.sock.shutdown(socket.SHUT_RDWR)
                return

    def verdict(self, now: float) -> str | None:
        """Why the stream should be cut now, or None. The health is asked only when the silence
        calls for it (STALL since the last line or the last question, or the per-token limit
        passed), so that a stalled stream is blamed on an unwell server where it is one."""
        silent = now - self.last
        stalled = self.started and silent >= self.token_limit
        if not stalled and now - max(self.last, self.asked) < self.every:
            return None
        self.asked = now
        unwell, where = self.client.unwell(), self.client.where
        if unwell is not None:
            return (
                f"the server at {where} stopped answering mid-answer ({unwell}, "
                f"silent for {silent:.0f} s)"
            )
        if stalled:
            return (
                f"the server at {where} sent nothing for {self.token_limit:g} s after its first "
                "token (healthy by its health check, yet stalled; --token-timeout)"
            )
        return None

    def explain(self) -> None:
        """Raise the cause if the watchdog cut the stream."""
        if self.why is not None:
            raise ServerError(self.why)


def status_message(status: int, phrase: str, body: bytes) -> str:
    try:
        said = message_of(json.loads(body))
    except ValueError:
        said = body.decode("utf-8", "replace").strip()
    said = " ".join(said.split())[:300]
    return f"the server answered {status} {phrase}" + (f": {said}" if said else "")


def message_of(event: object) -> str:
    """The message of an OpenAI-style error object ({"error": {"message": ...}}) and its kin."""
    if isinstance(event, dict):
        for key in ("error", "message", "detail"):
            if key in event:
                return message_of(event[key])
        return json.dumps(event)[:300]
    if isinstance(event, list) and event:
        return message_of(event[0])
    return str(event)


def retry_after(value: str | None) -> float | None:
    try:
        return max(float(value), 0.0) if value else None
    except ValueError:
        return None


def reason(exc: BaseException) -> str:
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused (is it running?)"
    if isinstance(exc, socket.gaierror):
        return "unknown host"
    text = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
    return " ".join(str(text).split())


def shown(url: str) -> str:
    """A URL without the user and password it may carry (nor its path)."""
    parts = urlsplit(url if "://" in url else f"http://{url}")
    return f"{parts.scheme}://{parts.hostname or '?'}"
