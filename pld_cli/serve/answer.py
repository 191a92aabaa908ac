"""One request decoded on the local engine, pass by pass: each pass's new text and token ids.

The engine's loop runs unchanged (in a slot of its batch with -j N, each answer the one it gets
alone); each pass becomes a `Delta`: the text its tokens add (tasks/fragments.py decodes a short
window, holding back a character split across tokens) and the tokens themselves. The last pass's
delta carries the finish reason and whatever text was held back, so the deltas join into exactly
the text of all the tokens decoded at once: the answer `pld` gives for the same ids. Before each
pass is handed on, `check` may stop the decode (the client gone, the server stopping): the
exception leaves the loop, and the slot is free for the next request.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum

from pld_cli.core.decode import Pass, Stop
from pld_cli.core.stats import Stats
from pld_cli.engines.local import LocalEngine
from pld_cli.serve.prompting import Prepared
from pld_cli.tasks.fragments import FragmentDecoder


class Finish(str, Enum):
    """OpenAI's finish_reason."""

    STOP = "stop"  # the model's end of sequence
    LENGTH = "length"  # max_tokens, or the context, reached


FINISHES = {Stop.EOS: Finish.STOP, Stop.MAX_NEW_TOKENS: Finish.LENGTH, Stop.CONTEXT: Finish.LENGTH}


@dataclass(frozen=True)
class Delta:
    """What one pass adds to the answer."""

    text: str
    token_ids: tuple[int, ...]
    finish: Finish | None = None  # on the last pass only


@dataclass(frozen=True)
class Answer:
    text: str
    token_ids: list[int]  # EOS included, as vLLM's
    finish: Finish
    stats: Stats


class Detokenizer:
    """Each pass's new text; the last one also brings what was held back."""

    def __init__(self, tokenizer) -> None:
        self.tokenizer = tokenizer
        self.fragments = FragmentDecoder(tokenizer)
        self.ids: list[int] = []
        self.sent: list[str] = []

    def feed(self, step: Pass) -> str:
        text = "".join(fragment.text for fragment in self.fragments.feed(step))
        self.ids.extend(step.emitted)
        self.sent.append(text)
        if step.stop is not None:
            rest = self.whole()[len("".join(self.sent)) :]
            self.sent.append(rest)
            text += rest
        return text

    def whole(self) -> str:
        return self.tokenizer.decode(self.ids, skip_special_tokens=True)


def decode(
    engine: LocalEngine,
    prepared: Prepared,
    on_delta: Callable[[Delta], None],
    check: Callable[[], None] = lambda: None,
) -> Answer:
    """The request decoded; `on_delta` gets each pass's delta as it comes, after `check()`."""
    text = Detokenizer(engine.tokenizer)

    def on_pass(step: Pass, _stats: Stats) -> None:
        check()
        finish = FINISHES[step.stop] if step.stop is not None else None
        on_delta(Delta(text.feed(step), step.emitted, finish))

    tokens, stats = engine.decode(
        prepared.ids, prepared.config, on_pass, prediction=prepared.prediction
    )
    return Answer(text.whole(), tokens, FINISHES[stats.stop], stats)
