"""Task prompts: templates from prompts/ turned into token ids, and the model's text turned back.

A template holds a system message, a user message and optionally the start of the answer (which
pld writes for the model), separated by lines `---`, with {document}, {instruction} and {name}
placeholders ({outline} too, in edit_part.txt: one part of a long file and a map of the whole).
How the model's text becomes a result is each task kind's own (kinds/).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources

SEPARATOR = "\n---\n"
PLACEHOLDER = re.compile(r"\{(document|instruction|name|outline)\}")


@dataclass(frozen=True)
class Task:
    kind: str  # a registered task kind (kinds/): 'edit', 'summarize'
    document: str
    instruction: str = ""
    name: str = "input"  # the file's name, shown to the model
    outline: str = ""  # for one part of a long file: a map of the whole file

    @property
    def template_name(self) -> str:
        """prompts/<kind>.txt, or <kind>_part.txt for one piece of a long file."""
        return f"{self.kind}_part" if self.outline else self.kind


def template(kind: str) -> tuple[str, str, str]:
    """(system message, user message, the start of the answer) of a task's template."""
    text = (
        resources.files("pld_cli.tasks.templates")
        .joinpath(f"{kind}.txt")
        .read_text(encoding="utf-8")
    )
    system, user, *answer = text.split(SEPARATOR)
    return system.strip(), user.rstrip("\n"), "".join(answer).lstrip("\n")


def messages(task: Task) -> list[dict[str, str]]:
    system, user, _ = template(task.template_name)
    fields = {
        "outline": task.outline,
        "document": task.document.rstrip("\n"),
        "instruction": task.instruction,
        "name": task.name,
    }
    # One substitution pass, so braces inside the document are never read as placeholders.
    user = PLACEHOLDER.sub(lambda match: fields[match.group(1)], user)
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def prompt_ids(tokenizer, task: Task) -> list[int]:
    """The task's chat ending in its answer start."""
    return chat_ids(tokenizer, messages(task), answer_start(task))


def chat_ids(tokenizer, chat: list[dict[str, str]], start: str = "") -> list[int]:
    """A chat (or, for a model without a chat template, its plain text) ending in `start`, the
    answer's beginning: a task's prompt, and pld serve's chat completions."""
    if getattr(tokenizer, "chat_template", None):
        text = tokenizer.apply_chat_template(chat, add_generation_prompt=True, tokenize=False)
        return list(tokenizer(text + start, add_special_tokens=False)["input_ids"])
    plain = "\n\n".join(m["content"] for m in chat) + "\n\n" + start
    return list(tokenizer(plain)["input_ids"])


def answer_start(task: Task) -> str:
    """The start of the answer pld writes for the model (it belongs to the result)."""
    return template(task.template_name)[2]
