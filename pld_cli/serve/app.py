"""The server: a thread per connection over the held model, started and stopped cleanly.

Standard library HTTP (http.server's ThreadingHTTPServer): no web framework for four routes, and
`pld` stays free of heavy dependencies. `load_engine` opens the local engine as `pld -j N` does,
its KV caches sized for the served context. `run` serves until Ctrl-C or SIGTERM; either stops
the decodes in flight at their next pass (streams end with an error event, plain requests get
503), lets the model go, and returns.
"""

from __future__ import annotations

import signal
import socket
import threading
from collections.abc import Callable
from http.server import ThreadingHTTPServer

from pld_cli.core.config import DecodeConfig
from pld_cli.engines.local import LocalEngine
from pld_cli.loading.models import ModelSpec, load_model
from pld_cli.runtime.prefix.store import MIB, PrefixStore
from pld_cli.serve.answer import Answer
from pld_cli.serve.handler import Handler
from pld_cli.serve.holder import ModelHolder
from pld_cli.serve.requests import Endpoint

Note = Callable[[str], None]
CACHE_RAM = 2048  # MiB of kept prompts' keys and values (--cache-ram)


class Stopped(Exception):
    """SIGTERM arrived: serve_forever ends as for Ctrl-C."""


class Server(ThreadingHTTPServer):
    daemon_threads = True  # a connection left open (keep-alive) never holds the exit up
    allow_reuse_address = True

    def __init__(
        self, host: str, port: int, holder: ModelHolder, note: Note, use_pld: bool = True
    ) -> None:
        self.address_family = socket.AF_INET6 if ":" in host else socket.AF_INET
        super().__init__((host, port), Handler)
        self.holder, self.note, self.use_pld = holder, note, use_pld

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host if ':' not in host else f'[{host}]'}:{port}"

    def completed(self, endpoint: Endpoint, answer: Answer, seconds: float) -> None:
        """One line per answer on stderr."""
        stats = answer.stats
        predicted = stats.prediction_accepted + stats.prediction_rejected
        kept = f", prediction {stats.prediction_accepted}/{predicted} kept" if predicted else ""
        self.note(
            f"{endpoint.value}: {stats.prompt_tokens}{cached(stats.cached_tokens)} + "
            f"{stats.new_tokens} tokens "
            f"({answer.finish.value}) in {seconds:.2f} s, {stats.tokens_per_s:.1f} tok/s, "
            f"{stats.tokens_per_pass:.2f} per pass{kept}"
        )

    def start(self) -> threading.Thread:
        """Serve on a thread of its own (tests; `run` serves on the calling one)."""
        thread = threading.Thread(target=self.serve_forever, name="pld-serve", daemon=True)
        thread.start()
        return thread

    def stop(self) -> None:
        """Stop taking connections, end what is in flight, let the model go."""
        self.shutdown()
        self.close()

    def close(self) -> None:
        self.holder.close()
        self.server_close()


def cached(tokens: int) -> str:
    return f" ({tokens} cached)" if tokens else ""


def load_engine(
    spec: ModelSpec,
    jobs: int,
    context: int | None,
    note: Note,
    detail: Note,
    cache_ram: int = CACHE_RAM,
) -> Callable[[], LocalEngine]:
    """What opens the engine (once at start, again after --keep-alive let it go): the model,
    and `jobs` slots with room for `context` positions each (default and most: the model's),
    sharing `cache_ram` MiB of recent prompts' keys and values (runtime/prefix/; let go with
    the model). `note` says what loads, `detail` which runtime runs and why (--verbose)."""

    def load() -> LocalEngine:
        engine = LocalEngine(load_model(spec, note), jobs)
        engine.context = min(context or engine.context, engine.context)
        engine.prepare(engine.context, DecodeConfig(), note, detail)
        if engine.parallel < jobs:
            note(f"-j {jobs}: {engine.limit}")
        engine.prompts = PrefixStore(cache_ram * MIB) if cache_ram else None
        return engine

    return load


def run(server: Server) -> bool:
    """Serve until Ctrl-C (True) or SIGTERM (False), then stop cleanly."""
    previous = signal.signal(signal.SIGTERM, terminate)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        return True
    except Stopped:
        return False
    finally:
        signal.signal(signal.SIGTERM, previous)
        server.note("stopping")
        server.close()
    return False


def terminate(signum, frame) -> None:
    raise Stopped()
