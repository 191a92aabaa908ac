"""The whole flow of one call: task → prompt ids → engine → text, shown as it comes.

`run_task` decodes one task (a whole document, or one chunk or piece of a long one, longdoc.py)
on an engine (engine.py: pld's own loop, or a server) and turns the tokens back into the task's
result.
"""

from __future__ import annotations

from collections.abc import Callable

from pld_cli.core.config import DecodeConfig
from pld_cli.core.decode import Pass, Stop
from pld_cli.core.stats import Stats
from pld_cli.errors import PldError
from pld_cli.tasks.engine import Engine
from pld_cli.tasks.fragments import Fragment, FragmentDecoder
from pld_cli.tasks.kinds import kind_of
from pld_cli.tasks.loops import loop_cut
from pld_cli.tasks.prompts import Task, answer_start, prompt_ids
from pld_cli.tasks.result import Result

Observer = Callable[[Pass, list[Fragment], Stats], None]  # the live view


def run_task(
    engine: Engine, task: Task, config: DecodeConfig, observe: Observer | None = None
) -> Result:
    kind = kind_of(task.kind)
    config = config.for_task(kind.stops_at_loops)
    ids = task_ids(engine, task, config)
    fragments = FragmentDecoder(engine.tokenizer)

    def show(step: Pass, stats: Stats) -> None:
        new = fragments.feed(step)
        if observe:
            observe(step, new, stats)

    tokens, stats = engine.decode(ids, config, show)
    if stats.stop == Stop.REPETITION:
        delivered = loop_cut(tokens, engine.tokenizer)
        stats.removed_tokens, tokens = len(tokens) - delivered, tokens[:delivered]
    text = engine.tokenizer.decode(tokens, skip_special_tokens=True)
    return Result(kind.finish(task, answer_start(task) + text), tokens, stats)


def task_ids(engine: Engine, task: Task, config: DecodeConfig) -> list[int]:
    """The prompt's token ids, checked to leave room for --max-new-tokens."""
    ids = prompt_ids(engine.tokenizer, task)
    check_fits(len(ids), config.max_new_tokens, engine.context)
    return ids


def check_fits(prompt_tokens: int, max_new_tokens: int, context: int) -> None:
    if prompt_tokens + max_new_tokens > context:
        raise PldError(
            f"input too long: {prompt_tokens} prompt tokens + {max_new_tokens} new tokens "
            f"(--max-new-tokens) exceed the model's context of {context} tokens"
        )
