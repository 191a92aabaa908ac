"""The whole flow of one job: source → prompt → tokens → draft/verify loop → spans → output."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .costs import cost_key, pass_costs
from .decode import DecodeConfig, Pass, generate
from .errors import PldError
from .models import LoadedModel, cache_dir
from .prompts import Task, finish, prompt_ids
from .runtime import DynamicRuntime, Runtime
from .stats import Stats


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
        """Measured: plain decoding's decode time over this run's, same input, same process."""
        return plain.stats.decode_s / self.stats.decode_s if self.stats.decode_s else 0.0

    @property
    def complete(self) -> bool:
        """The model ended the text itself (EOS), rather than running out of tokens."""
        return self.stats.stop == "eos"


Observer = Callable[[Pass, list[Span], Stats], None]


def run(
    loaded: LoadedModel,
    task: Task,
    config: DecodeConfig,
    runtime: Runtime | None = None,
    observe: Observer | None = None,
    costs: Sequence[float] | None = None,
) -> Result:
    runtime = runtime or DynamicRuntime(loaded.model)
    ids = prompt_ids(loaded.tokenizer, task)
    check_fits(len(ids), config.max_new_tokens, runtime.context_limit)
    spans = SpanDecoder(loaded.tokenizer)

    def show(step: Pass, stats: Stats) -> None:
        new_spans = spans.feed(step)
        if observe:
            observe(step, new_spans, stats)

    tokens, stats = decode_ids(loaded, ids, config, costs, runtime, show)
    text = loaded.tokenizer.decode(tokens, skip_special_tokens=True)
    return Result(finish(task, text), tokens, stats)


def decode_ids(
    loaded: LoadedModel,
    ids: list[int],
    config: DecodeConfig,
    costs: Sequence[float] | None = None,
    runtime: Runtime | None = None,
    on_pass: Callable[[Pass, Stats], None] | None = None,
) -> tuple[list[int], Stats]:
    """The draft/verify loop over prompt ids: the new tokens (EOS included) and their stats."""
    stats, tokens = Stats(costs=costs), []
    for event in generate(
        runtime or DynamicRuntime(loaded.model), ids, loaded.eos_ids, config, costs
    ):
        stats.add(event)
        if isinstance(event, Pass):
            tokens.extend(event.emitted)
            if on_pass:
                on_pass(event, stats)
    return tokens, stats


def measured_costs(
    loaded: LoadedModel, config: DecodeConfig, report: Callable[[str], None] = lambda _: None
) -> list[float] | None:
    """t(q) for adaptive drafting on this model, device, dtype and runtime (None when not needed):
    calibrated once, then read from the cache."""
    if not config.adaptive:
        return None
    runtime = DynamicRuntime(loaded.model)
    key = cost_key(loaded.name, loaded.device, loaded.dtype, type(runtime).__name__)
    vocab_size = loaded.model.config.vocab_size
    cache_file = cache_dir() / "pass-costs.json"
    return pass_costs(runtime, vocab_size, key, cache_file, config.num_draft + 1, report)


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
