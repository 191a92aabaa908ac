"""The live view's text: each pass's tokens as new text, copied spans apart from the model's own."""

from __future__ import annotations

from dataclasses import dataclass

from pld_cli.core.decode import Pass


@dataclass(frozen=True)
class Fragment:
    """New text of one pass: accepted draft tokens (copied) or the model's own tokens."""

    text: str
    copied: bool


class FragmentDecoder:
    """Turns each pass's tokens into new text, split into copied and model-produced fragments.

    Decodes only a short window (the tokens since the previous fragment plus the one before, for
    context), so the cost per pass does not grow with the length of the output.
    """

    def __init__(self, tokenizer) -> None:
        self.tokenizer = tokenizer
        self.ids: list[int] = []
        self.prefix_offset = 0  # start of the context window
        self.read_offset = 0  # tokens before this are already shown

    def feed(self, step: Pass) -> list[Fragment]:
        fragments = []
        parts = ((step.emitted[: step.accepted], True), (step.emitted[step.accepted :], False))
        for tokens, copied in parts:
            if not tokens:
                continue
            self.ids.extend(tokens)
            shown = self.decode(self.prefix_offset, self.read_offset)
            text = self.decode(self.prefix_offset, len(self.ids))
            if text.endswith("\ufffd") or len(text) <= len(shown):
                continue  # a character split across tokens, or nothing visible yet: wait
            fragments.append(Fragment(text[len(shown) :], copied))
            self.prefix_offset, self.read_offset = self.read_offset, len(self.ids)
        return fragments

    def decode(self, start: int, end: int) -> str:
        return self.tokenizer.decode(self.ids[start:end], skip_special_tokens=True)
