"""What edit and summarize do once their options are read: load, decode, show, save.

Imported only when a command runs (it pulls in torch and transformers), so `pld --help` is fast.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from pld_cli.cli.options import Display, Settings
from pld_cli.cli.render import Ui
from pld_cli.errors import PldError
from pld_cli.files import atomic_write
from pld_cli.tasks.models import load_model
from pld_cli.tasks.pipeline import Result, ready, run, task_ids
from pld_cli.tasks.prompts import Task


def execute(task: Task, settings: Settings, display: Display, destination: Path | None) -> None:
    ui = Ui(quiet=settings.quiet, live=display.live, verbose=settings.verbose)
    ui.quiet_libraries()
    config = settings.decode_config(use_pld=not display.no_pld)
    with ui.progress("loading model") as report:
        loaded = load_model(settings.model_spec(), report)
        positions = len(task_ids(loaded, task, config)) + config.max_new_tokens
        ready(loaded, positions, config, report=report, note=ui.detail)
    with ui.live() as observe:
        result = run(loaded, task, config, observe=observe)
    plain = None
    if display.compare:
        with ui.progress("decoding again without drafting (--compare)"):
            plain = run(loaded, task, settings.decode_config(use_pld=False))
        ui.comparison(result, plain)
    if display.stats:
        label = "pld" if config.use_pld else "plain"
        ui.stats_table({label: result.stats} | ({"plain": plain.stats} if plain else {}))
    if destination is not None:
        save(result, destination, config.max_new_tokens)
        ui.note(f"wrote {destination}")
    if display.json:
        print(json.dumps(as_json(result, loaded.name, plain), ensure_ascii=False))
    elif destination is None:
        sys.stdout.write(result.text)
        sys.stdout.flush()


def save(result: Result, destination: Path, max_new_tokens: int) -> None:
    if not result.complete:
        raise PldError(
            f"{destination} left untouched: generation stopped at {result.stats.stop} "
            f"({result.stats.new_tokens} tokens) before the model finished; "
            f"raise --max-new-tokens (now {max_new_tokens})"
        )
    atomic_write(destination, result.text)


def as_json(result: Result, model: str, plain: Result | None) -> dict:
    out = {"text": result.text, "model": model, "stats": result.stats.as_dict(),
           "stop": result.stats.stop}  # fmt: skip
    if plain is not None:
        out["compare"] = {
            "plain": plain.stats.as_dict(),
            "speedup": round(result.speedup_over(plain), 3),
            "identical": plain.token_ids == result.token_ids,
        }
    return out
