"""pld's own engine: a model loaded on this machine, its runtime, and the draft/verify loop.

`decode_ids` is the loop over prompt ids on a runtime made ready by loading/ready.py; `LocalEngine`
is that loop behind the task-level `Engine` seam (tasks/engine.py). With -j N and pld's C decoder
it decodes up to N documents at once, each in a slot of one batch (runtime/batch/), exactly as
alone; otherwise one call at a time.
"""

from __future__ import annotations

from collections.abc import Sequence

from pld_cli.core.config import DecodeConfig
from pld_cli.core.decode import Pass, generate
from pld_cli.core.pass_costs import ObservedCosts
from pld_cli.core.runtime import Runtime
from pld_cli.core.stats import Stats
from pld_cli.loading.kept_prompts import disk_prompts
from pld_cli.loading.models import LoadedModel, load_model
from pld_cli.loading.ready import ready
from pld_cli.runtime.batch.costs import SharedCosts
from pld_cli.runtime.batch.opening import open_batch
from pld_cli.runtime.batch.scheduler import Batch
from pld_cli.runtime.context import context_limit
from pld_cli.runtime.names import RuntimeName
from pld_cli.runtime.prefix.reuse import Prefixes, with_prefixes
from pld_cli.tasks.engine import Note, OnPass


def decode_ids(
    loaded: LoadedModel,
    ids: list[int],
    config: DecodeConfig,
    on_pass: OnPass | None = None,
    runtime_name: RuntimeName | None = None,
    prediction: Sequence[int] = (),
    prompts: Prefixes | None = None,
) -> tuple[list[int], Stats]:
    """The draft/verify loop over prompt ids: the new tokens (EOS included) and their stats. The
    calibrated pass costs are corrected by the passes this decode runs (core/pass_costs.py).
    `prompts` keeps prompts' keys and values for later ones (runtime/prefix/), where exact."""
    runtime, costs = ready(loaded, len(ids) + config.max_new_tokens, config, runtime_name)
    observed = ObservedCosts(costs) if costs else None
    runtime = with_prefixes(runtime, prompts)
    return decode_on(runtime, observed, loaded.eos_ids, ids, config, on_pass, prediction)


def decode_on(
    runtime: Runtime,
    costs: Sequence[float] | None,
    eos_ids: frozenset[int],
    ids: list[int],
    config: DecodeConfig,
    on_pass: OnPass | None = None,
    prediction: Sequence[int] = (),
) -> tuple[list[int], Stats]:
    """The loop on a runtime made ready, with its pass costs (None: not adaptive) and the
    caller's prediction of the output, a draft source only (core/drafter.py)."""
    stats, tokens = Stats(costs=costs, runtime=runtime.name), []
    for event in generate(runtime, ids, eos_ids, config, costs, prediction):
        stats.add(event)
        if isinstance(event, Pass):
            tokens.extend(event.emitted)
            if on_pass:
                on_pass(event, stats)
    return tokens, stats


class LocalEngine:
    """A loaded model and pld's loop, as an `Engine`; `jobs` documents at once where it can."""

    drafts_itself = False

    def __init__(self, loaded: LoadedModel, jobs: int = 1) -> None:
        self.loaded, self.jobs = loaded, jobs
        self.name, self.tokenizer = loaded.name, loaded.tokenizer
        self.context = context_limit(loaded.model)
        self.eos_ids = loaded.eos_ids
        self.repetition_penalty = loaded.repetition_penalty
        self.parallel, self.limit = 1, ""
        self.batch: Batch | None = None
        self.prompts: Prefixes | None = None  # kept prompts (runtime/prefix/); None: none kept

    @property
    def weights(self) -> dict[str, str]:
        """The weights' format and why it was chosen (--json)."""
        return {"format": self.loaded.weights, "why": self.loaded.why}

    def prepare(self, positions: int, config: DecodeConfig, report: Note, note: Note) -> None:
        note(f"weights: {self.loaded.weights}: {self.loaded.why}")
        runtime, _ = ready(self.loaded, positions, config, report=report, note=note)
        if self.jobs > 1 and self.batch is None:
            self.batch, self.limit = open_batch(runtime, self.jobs, positions, note)
            self.parallel = self.batch.regions if self.batch else 1

    def decode(
        self,
        ids: list[int],
        config: DecodeConfig,
        on_pass: OnPass | None = None,
        prediction: Sequence[int] = (),
    ) -> tuple[list[int], Stats]:
        """The Engine's decode; `prediction` (pld serve's predicted output) is pld's own."""
        if self.batch is None:
            return decode_ids(
                self.loaded, ids, config, on_pass, prediction=prediction, prompts=self.prompts
            )
        _, costs = ready(self.loaded, len(ids) + config.max_new_tokens, config)
        with self.batch.slot() as slot:
            shared = SharedCosts(costs, self.batch, slot.region) if costs else None
            runtime = with_prefixes(slot, self.prompts)
            return decode_on(runtime, shared, self.eos_ids, ids, config, on_pass, prediction)

    def close(self) -> None:
        """Cuts the documents in flight (Ctrl-C, the end of a run): each raises Cancelled."""
        if self.batch is not None:
            self.batch.close()


def open_engine(settings, report: Note) -> LocalEngine:
    """The model -m names (else the default model), loaded on this machine, keeping prompts'
    keys and values in the user cache unless --no-prompt-cache (runtime/prefix/disk.py)."""
    spec = settings.model_spec()
    engine = LocalEngine(load_model(spec, report), settings.jobs)
    if not settings.no_prompt_cache:
        engine.prompts = disk_prompts(engine.loaded, spec)
    return engine
