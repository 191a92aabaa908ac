"""What a task needs from an engine: the seam between documents and whatever decodes them.

Edit, summarize, long documents, many files, `--diff`, `--write`, the live view, `--json` and the
bench are written once against `Engine`. An engine tokenizes (prompts, chunk budgets, the text of
tokens), knows its context, and decodes prompt ids into a stream of `Pass` events with their
`Stats`. pld's own model and loop on this machine is one engine (engines/local.py); a server that
speaks the OpenAI API (vLLM) is another (engines/server.py). A new engine is one module there and
one entry in `engines.OPENERS`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from pld_cli.core.config import DecodeConfig
from pld_cli.core.decode import Pass
from pld_cli.core.stats import Stats

OnPass = Callable[[Pass, Stats], None]  # each pass as it comes, with the stats so far
Note = Callable[[str], None]


class Engine(Protocol):
    name: str  # the model, as shown and in JSON
    tokenizer: object  # a transformers tokenizer: prompt ids, token counts, text of tokens
    context: int  # tokens one call may hold, prompt and new tokens together
    eos_ids: frozenset[int]
    repetition_penalty: float | None  # the model's own, used unless --repetition-penalty is given
    parallel: int  # calls it takes at once: -j, where it can (known once prepared)
    limit: str  # why it takes fewer than -j at once ('' where it takes them all)
    drafts_itself: bool  # drafting is the engine's own (a server's --speculative-config)
    weights: dict[str, str] | None  # their format and why (the local engine), for JSON

    def prepare(self, positions: int, config: DecodeConfig, report: Note, note: Note) -> None:
        """Ready for calls of up to `positions` tokens (open, calibrate): work done once,
        outside any timed decode. `report` shows progress, `note` says what runs and why."""

    def decode(
        self, ids: list[int], config: DecodeConfig, on_pass: OnPass | None = None
    ) -> tuple[list[int], Stats]:
        """The new tokens for prompt ids (EOS included) and their stats; may be called from
        several threads at once up to `parallel`."""

    def close(self) -> None:
        """Cancel what is in flight and let go of what it holds (Ctrl-C, the end of a run)."""
