"""The whole flow of one job: source → prompt → tokens → draft/verify loop → spans → output."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pld_cli.core.config import DecodeConfig
from pld_cli.core.decode import Pass, generate
from pld_cli.core.stats import Stats, measured_speedup
from pld_cli.errors import PldError
from pld_cli.runtime.base import Runtime, context_limit
from pld_cli.runtime.choice import Report, runtime_for
from pld_cli.runtime.costs import CALIBRATION_POSITIONS, cost_key, pass_costs
from pld_cli.tasks.models import LoadedModel, cache_dir
from pld_cli.tasks.prompts import Task, finish, prompt_ids


@dataclass(frozen=True)
class Span:
    text: str
    copied: bool  # accepted draft tokens (copied) or the model's own tokens


@dataclass
class Result:
    text: str
    token_ids: list[int]
    stats: Stats

    def speedup_over(self, plain: Result) -> float:
        """Measured in this process against plain decoding of the same input (stats.py)."""
        return measured_speedup(self.stats.tokens_per_s, plain.stats.tokens_per_s) or 0.0

    @property
    def complete(self) -> bool:
        """The text ended (EOS, or a summary's loop stop), rather than running out of tokens."""
        return self.stats.stop in ("eos", "repetition")


Observer = Callable[[Pass, list[Span], Stats], None]


def run(
    loaded: LoadedModel, task: Task, config: DecodeConfig, observe: Observer | None = None
) -> Result:
    ids = task_ids(loaded, task, config)
    spans = SpanDecoder(loaded.tokenizer)

    def show(step: Pass, stats: Stats) -> None:
        new_spans = spans.feed(step)
        if observe:
            observe(step, new_spans, stats)

    tokens, stats = decode_ids(loaded, ids, config, show)
    text = loaded.tokenizer.decode(tokens, skip_special_tokens=True)
    return Result(finish(task, text), tokens, stats)


def task_ids(loaded: LoadedModel, task: Task, config: DecodeConfig) -> list[int]:
    """The prompt's token ids, checked to leave room for --max-new-tokens."""
    ids = prompt_ids(loaded.tokenizer, task)
    check_fits(len(ids), config.max_new_tokens, context_limit(loaded.model))
    return ids


def decode_ids(
    loaded: LoadedModel,
    ids: list[int],
    config: DecodeConfig,
    on_pass: Callable[[Pass, Stats], None] | None = None,
    runtime_kind: str | None = None,
) -> tuple[list[int], Stats]:
    """The draft/verify loop over prompt ids: the new tokens (EOS included) and their stats."""
    runtime, costs = ready(loaded, len(ids) + config.max_new_tokens, config, runtime_kind)
    stats, tokens = Stats(costs=costs), []
    for event in generate(runtime, ids, loaded.eos_ids, config, costs):
        stats.add(event)
        if isinstance(event, Pass):
            tokens.extend(event.emitted)
            if on_pass:
                on_pass(event, stats)
    return tokens, stats


def ready(
    loaded: LoadedModel,
    positions: int,
    config: DecodeConfig,
    runtime_kind: str | None = None,
    report: Report = lambda _: None,
    note: Report = lambda _: None,
) -> tuple[Runtime, list[float] | None]:
    """A runtime with room for `positions` and, for adaptive drafting, its t(q): calibrated once
    per model, device, dtype and runtime, then read from the cache. Call it ahead of a decode to
    do that work (and graph capture) outside the timed loop. `report` shows progress, `note`
    says which runtime runs and why."""
    runtime = runtime_for(loaded, max(positions, CALIBRATION_POSITIONS), runtime_kind, note)
    refusal = getattr(runtime, "refusal", None)  # why this runtime cannot draft exactly
    if config.use_pld and refusal:
        raise PldError(f"{refusal}; rerun with --no-pld")
    # A runtime with kernel paths is calibrated for plain decoding too: that chooses the paths.
    # One that cannot roll back (the refusal) is not: a calibration rolls back after each pass.
    if refusal or not (config.adaptive or getattr(runtime, "paths", None)):
        return runtime, None
    key = cost_key(loaded.name, loaded.device, loaded.dtype, runtime.name)
    vocab_size = loaded.model.config.vocab_size
    cache_file = cache_dir() / "pass-costs.json"
    costs = pass_costs(runtime, vocab_size, key, cache_file, config.num_draft + 1, report)
    return runtime, costs if config.adaptive else None


def check_fits(prompt_tokens: int, max_new_tokens: int, context: int) -> None:
    if prompt_tokens + max_new_tokens > context:
        raise PldError(
            f"input too long: {prompt_tokens} prompt tokens + {max_new_tokens} new tokens "
            f"(--max-new-tokens) exceed the model's context of {context} tokens"
        )


class SpanDecoder:
    """Turns each pass's tokens into new text, split into copied and model-produced spans.

    Decodes only a short window (the tokens since the previous span plus the one span before, for
    context), so the cost per pass does not grow with the length of the output.
    """

    def __init__(self, tokenizer) -> None:
        self.tokenizer = tokenizer
        self.ids: list[int] = []
        self.prefix_offset = 0  # start of the context window
        self.read_offset = 0  # tokens before this are already shown

    def feed(self, step: Pass) -> list[Span]:
        spans = []
        parts = ((step.emitted[: step.accepted], True), (step.emitted[step.accepted :], False))
        for tokens, copied in parts:
            if not tokens:
                continue
            self.ids.extend(tokens)
            shown = self.decode(self.prefix_offset, self.read_offset)
            text = self.decode(self.prefix_offset, len(self.ids))
            if text.endswith("\ufffd") or len(text) <= len(shown):
                continue  # a character split across tokens, or nothing visible yet: wait
            spans.append(Span(text[len(shown) :], copied))
            self.prefix_offset, self.read_offset = self.read_offset, len(self.ids)
        return spans

    def decode(self, start: int, end: int) -> str:
        return self.tokenizer.decode(self.ids[start:end], skip_special_tokens=True)
