"""Task prompts: templates from prompts/ turned into token ids, and the model's text turned back.

A template holds a system message, a user message and optionally the start of the answer (which
pld writes for the model), separated by lines `---`, with {document}, {instruction} and {name}
placeholders ({outline} too, in edit_part.txt: one part of a long file and a map of the whole).
Edits ask for the whole updated file; when the model wraps it in a code fence, the fence (and any
remark after it) is stripped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources

SEPARATOR = "\n---\n"
PLACEHOLDER = re.compile(r"\{(document|instruction|name|outline)\}")


@dataclass(frozen=True)
class Task:
    kind: str  # 'edit' | 'summarize'
    document: str
    instruction: str = ""
    name: str = "input"  # the file's name, shown to the model
    outline: str = ""  # for one part of a long file: a map of the whole file

    @property
    def template(self) -> str:
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
    system, user, _ = template(task.template)
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
    """The chat (or, for a model without a chat template, plain text) ending in the answer start."""
    chat = messages(task)
    answer_start = template(task.template)[2]
    if getattr(tokenizer, "chat_template", None):
        text = tokenizer.apply_chat_template(chat, add_generation_prompt=True, tokenize=False)
        return list(tokenizer(text + answer_start, add_special_tokens=False)["input_ids"])
    plain = "\n\n".join(m["content"] for m in chat) + "\n\n" + answer_start
    return list(tokenizer(plain)["input_ids"])


def finish(task: Task, text: str) -> str:
    """The result to hand the user: for an edit, the file as it should be saved."""
    text = template(task.template)[2] + text
    if task.kind != "edit":
        return text.strip() + "\n"
    body = strip_fence(text, inner=sum(line.strip() == "```" for line in task.document.split("\n")))
    if task.document.endswith("\n") and not body.endswith("\n"):
        body += "\n"
    return body


def strip_fence(text: str, inner: int | None = None) -> str:
    """The body of a code fence the answer opens with, else text. The fence closes at its last
    closing line, or, when the file holds `inner` such lines of its own, at the one after them:
    a small model that goes on after the file (a remark, the file again) loses what follows.

    An answer cut short before its closing fence keeps everything after the opening line.
    """
    lines = text.strip("\n").split("\n")
    if not lines[0].startswith("```"):
        return text
    closing = [i for i, line in enumerate(lines) if i > 0 and line.strip() == "```"]
    end = closing[min(inner, len(closing) - 1) if inner is not None else -1] if closing else None
    return "\n".join(lines[1:end]) + "\n"
