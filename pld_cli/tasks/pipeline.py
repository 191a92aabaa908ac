"""The whole flow of one call: task → prompt ids → draft/verify loop → text, shown as it comes.

`run_task` decodes one task (a whole document, or one chunk or piece of a long one, longdoc.py)
on a runtime made ready by ready.py, and turns the tokens back into the task's result.
"""

from __future__ import annotations

from collections.abc import Callable

from pld_cli.core.config import DecodeConfig
from pld_cli.core.decode import Pass, generate
from pld_cli.core.stats import Stats
from pld_cli.errors import PldError
from pld_cli.runtime.context import context_limit
from pld_cli.tasks.fragments import Fragment, FragmentDecoder
from pld_cli.tasks.kinds import kind_of
from pld_cli.tasks.models import LoadedModel
from pld_cli.tasks.prompts import Task, answer_start, prompt_ids
from pld_cli.tasks.ready import ready
from pld_cli.tasks.result import Result

Observer = Callable[[Pass, list[Fragment], Stats], None]  # the live view


def run_task(
    loaded: LoadedModel, task: Task, config: DecodeConfig, observe: Observer | None = None
) -> Result:
    kind = kind_of(task.kind)
    config = config.for_task(kind.stops_at_loops)
    ids = task_ids(loaded, task, config)
    fragments = FragmentDecoder(loaded.tokenizer)

    def show(step: Pass, stats: Stats) -> None:
        new = fragments.feed(step)
        if observe:
            observe(step, new, stats)

    tokens, stats = decode_ids(loaded, ids, config, show)
    text = loaded.tokenizer.decode(tokens, skip_special_tokens=True)
    return Result(kind.finish(task, answer_start(task) + text), tokens, stats)


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


def check_fits(prompt_tokens: int, max_new_tokens: int, context: int) -> None:
    if prompt_tokens + max_new_tokens > context:
        raise PldError(
            f"input too long: {prompt_tokens} prompt tokens + {max_new_tokens} new tokens "
            f"(--max-new-tokens) exceed the model's context of {context} tokens"
        )
