"""`pld serve`: the model loaded once, behind an OpenAI-compatible HTTP API (pld_cli/serve/).

The model options are edit's and summarize's (options.ModelChoice); the rest say where to listen,
how many requests decode at once and how long an idle model is kept. The URL it listens on goes
to stdout once it serves (with --port 0, the port the system chose); everything else, one line
per answer included, goes to stderr. Ctrl-C exits 130, SIGTERM 0, both after stopping cleanly.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Annotated

from pld_cli.cli.options import MODEL, ModelChoice, option, with_options
from pld_cli.errors import ExitStatus, PldError
from pld_cli.loading.sources import check_source

SERVE, DISPLAY = "Serving", "Display"
UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
FOREVER = ("forever", "-1")
JOBS_HELP = (
    "Requests decoded at once, each in its own slot of shared passes and each answer exactly as "
    "alone; more wait for a slot (float weights decode one at a time)."
)
KEEP_ALIVE_HELP = (
    "How long the model stays loaded with no request (30s, 5m, 1h; 0: let go at once; forever); "
    "the next request loads it again."
)
CACHE_RAM_HELP = (
    "MiB of RAM for the keys and values of recent prompts: a request beginning with a kept "
    "prompt's tokens prefills only the rest, its answer bit for bit the same (0: none kept)."
)
CONTEXT_HELP = (
    "Most tokens of one request, prompt and answer (default: the model's context); each slot's "
    "KV cache is sized for it."
)


@dataclasses.dataclass(frozen=True)
class ServeSettings(ModelChoice):
    """pld serve's options: the model's, then the server's."""

    host: Annotated[str, option(panel=SERVE, help="Address to listen on.")] = "127.0.0.1"
    port: Annotated[int, option(min=0, max=65535, panel=SERVE, help="Port (0: any free one).")] = (
        8080
    )
    jobs: Annotated[int, option("-j", "--jobs", min=1, panel=SERVE, help=JOBS_HELP)] = 4
    keep_alive: Annotated[str, option(panel=SERVE, help=KEEP_ALIVE_HELP)] = "5m"
    no_pld: Annotated[
        bool,
        option(
            "--no-pld",
            panel=SERVE,
            help="Plain decoding through the same loop, predictions unused (a baseline).",
        ),
    ] = False
    context: Annotated[
        int | None, option(min=16, panel=MODEL, show_default=False, help=CONTEXT_HELP)
    ] = None
    cache_ram: Annotated[int, option(min=0, panel=SERVE, help=CACHE_RAM_HELP)] = 2048
    quiet: Annotated[
        bool, option("-q", "--quiet", panel=DISPLAY, help="Nothing on stderr but errors.")
    ] = False
    verbose: Annotated[
        bool, option("--verbose", panel=DISPLAY, help="Which runtime runs and why.")
    ] = False
    debug: Annotated[
        bool, option("--debug", panel=DISPLAY, help="Show the traceback of any error.")
    ] = False


@with_options()
def serve(*, settings: ServeSettings) -> ExitStatus:
    """Serve the model over an OpenAI-compatible API: /v1/chat/completions, /v1/completions.

    Requests decode together on this machine, each answer the one it gets alone (greedy unless
    the request sets a temperature); a request's `prediction` speeds it up without changing it.
    """
    keep_alive = seconds_of(settings.keep_alive)
    if settings.model is not None:
        check_source(settings.model, settings.revision)
    from pld_cli.cli.render import Ui
    from pld_cli.serve.app import Server, load_engine, run
    from pld_cli.serve.holder import ModelHolder

    ui = Ui(quiet=settings.quiet, live=False, verbose=settings.verbose)
    ui.quiet_libraries()
    spec, jobs, context = settings.model_spec(), settings.jobs, settings.context
    load = load_engine(spec, jobs, context, ui.note, ui.detail, settings.cache_ram)
    holder = ModelHolder(load, keep_alive, ui.note)
    try:
        server = Server(settings.host, settings.port, holder, ui.note, not settings.no_pld)
    except OSError as exc:
        where = f"{settings.host}:{settings.port}"
        raise PldError(f"cannot listen on {where}: {exc.strerror or exc}") from None
    served = holder.open()
    print(server.url, flush=True)
    kept = "forever" if keep_alive is None else f"{keep_alive:g} s idle"
    at_once = f"{served.parallel} request{'s' if served.parallel > 1 else ''} at once"
    ui.note(
        f"serving {served.name} at {server.url}: {at_once}, {served.context} tokens each, "
        f"kept {kept}; Ctrl-C stops"
    )
    interrupted = run(server)
    ui.note("stopped")
    return ExitStatus.INTERRUPTED if interrupted else ExitStatus.OK


def seconds_of(text: str) -> float | None:
    """--keep-alive in seconds (None: forever): 30s, 5m, 1h, 250ms, a bare number of seconds."""
    value = text.strip().lower()
    if value in FOREVER:
        return None
    match = re.fullmatch(r"(\d+(?:\.\d+)?)(ms|s|m|h)?", value)
    if match is None:
        raise PldError(
            f"--keep-alive {text}: expected a duration (30s, 5m, 1h), 0 or forever",
            code=ExitStatus.USAGE,
        )
    return float(match[1]) * UNITS[match[2] or "s"]
