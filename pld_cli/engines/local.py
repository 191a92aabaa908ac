"""pld's own engine: a model loaded on this machine, its runtime, and the draft/verify loop.

`decode_ids` is the loop over prompt ids on a runtime made ready by loading/ready.py; `LocalEngine`
is that loop behind the task-level `Engine` seam (tasks/engine.py). One call at a time: the model
and its KV cache are one.
"""

from __future__ import annotations

from pld_cli.core.config import DecodeConfig
from pld_cli.core.decode import Pass, generate
from pld_cli.core.stats import Stats
from pld_cli.loading.models import LoadedModel, load_model
from pld_cli.loading.ready import ready
from pld_cli.runtime.context import context_limit
from pld_cli.runtime.names import RuntimeName
from pld_cli.tasks.engine import Note, OnPass


def decode_ids(
    loaded: LoadedModel,
    ids: list[int],
    config: DecodeConfig,
    on_pass: OnPass | None = None,
    runtime_name: RuntimeName | None = None,
) -> tuple[list[int], Stats]:
    """The draft/verify loop over prompt ids: the new tokens (EOS included) and their stats."""
    runtime, costs = ready(loaded, len(ids) + config.max_new_tokens, config, runtime_name)
    stats, tokens = Stats(costs=costs, runtime=runtime.name), []
    for event in generate(runtime, ids, loaded.eos_ids, config, costs):
        stats.add(event)
        if isinstance(event, Pass):
            tokens.extend(event.emitted)
            if on_pass:
                on_pass(event, stats)
    return tokens, stats


class LocalEngine:
    """A loaded model and pld's loop, as an `Engine`."""

    parallel = 1
    drafts_itself = False

    def __init__(self, loaded: LoadedModel) -> None:
        self.loaded = loaded
        self.name, self.tokenizer = loaded.name, loaded.tokenizer
        self.context = context_limit(loaded.model)
        self.eos_ids = loaded.eos_ids
        self.repetition_penalty = loaded.repetition_penalty

    @property
    def weights(self) -> dict[str, str]:
        """The weights' format and why it was chosen (--json)."""
        return {"format": self.loaded.weights, "why": self.loaded.why}

    def prepare(self, positions: int, config: DecodeConfig, report: Note, note: Note) -> None:
        note(f"weights: {self.loaded.weights}: {self.loaded.why}")
        ready(self.loaded, positions, config, report=report, note=note)

    def decode(
        self, ids: list[int], config: DecodeConfig, on_pass: OnPass | None = None
    ) -> tuple[list[int], Stats]:
        return decode_ids(self.loaded, ids, config, on_pass)

    def close(self) -> None:
        """Nothing runs in the background: a Ctrl-C already stopped the loop."""


def open_engine(settings, report: Note) -> LocalEngine:
    """The model -m names (else the default model), loaded on this machine."""
    return LocalEngine(load_model(settings.model_spec(), report))
