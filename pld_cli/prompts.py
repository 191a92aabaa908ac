"""Task prompts: templates from prompts/ turned into token ids, and the model's text turned back.

A template holds a system message and a user message separated by a line `---`, with {document},
{instruction} and {name} placeholders. Edits ask for the whole updated file; when the model wraps it
in a code fence, the fence (and any remark after it) is stripped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources

SEPARATOR = "\n---\n"
PLACEHOLDER = re.compile(r"\{(document|instruction|name)\}")


@dataclass(frozen=True)
class Task:
    kind: str  # 'edit' | 'summarize'
    document: str
    instruction: str = ""
    name: str = "input"  # the file's name, shown to the model


def template(kind: str) -> tuple[str, str]:
    text = resources.files("pld_cli.templates").joinpath(f"{kind}.txt").read_text(encoding="utf-8")
    system, user = text.split(SEPARATOR, 1)
    return system.strip(), user.rstrip("\n")


def messages(task: Task) -> list[dict[str, str]]:
    system, user = template(task.kind)
    fields = {
        "document": task.document.rstrip("\n"),
        "instruction": task.instruction,
        "name": task.name,
    }
    # One substitution pass, so braces inside the document are never read as placeholders.
    user = PLACEHOLDER.sub(lambda match: fields[match.group(1)], user)
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def prompt_ids(tokenizer, task: Task) -> list[int]:
    chat = messages(task)
    if getattr(tokenizer, "chat_template", None):
        text = tokenizer.apply_chat_template(chat, add_generation_prompt=True, tokenize=False)
        return list(tokenizer(text, add_special_tokens=False)["input_ids"])
    plain = "\n\n".join(m["content"] for m in chat) + "\n\n"
    return list(tokenizer(plain)["input_ids"])


def finish(task: Task, text: str) -> str:
    """The result to hand the user: for an edit, the file as it should be saved."""
    if task.kind != "edit":
        return text.strip() + "\n"
    body = strip_fence(text)
    if task.document.endswith("\n") and not body.endswith("\n"):
        body += "\n"
    return body


def strip_fence(text: str) -> str:
    """The body of a code fence the answer opens with (up to its last closing fence), else text."""
    lines = text.strip("\n").split("\n")
    if not lines[0].startswith("```"):
        return text
    closing = [i for i, line in enumerate(lines) if i > 0 and line.strip() == "```"]
    if not closing:
        return text
    return "\n".join(lines[1 : closing[-1]]) + "\n"
