"""The engines a task can run on (tasks/engine.py says what one must do), one module each.

`local`: pld's own model and loop on this machine. `server`: an OpenAI-compatible server (vLLM),
chosen by --server / PLD_SERVER. Each module defines `open_engine(settings, report) -> Engine`;
a new engine is one module here and its name in ENGINES. Modules load only when their engine
opens (they import the model libraries).
"""

from __future__ import annotations

import importlib

from pld_cli.tasks.engine import Engine, Note

ENGINES = ("local", "server")


def engine_name(settings) -> str:
    """Which engine the command line's settings (cli/options.Settings) ask for."""
    return "server" if settings.server else "local"


def open_engine(settings, report: Note = lambda _: None) -> Engine:
    module = importlib.import_module(f"{__name__}.{engine_name(settings)}")
    return module.open_engine(settings, report)
