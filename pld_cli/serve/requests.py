"""A request's JSON read once into typed values, every fault a 400 naming its field.

Both endpoints share one `Request`: /v1/chat/completions brings messages, /v1/completions a prompt
(text, or token ids as vLLM takes them and `pld --server` sends them). Greedy is the default (a
request without `temperature` decodes greedily, unlike OpenAI's 1): greedy is pld's exact path.
Sampling fields are honoured through pld's own speculative sampling (core/sampling.py): a `seed`
gives the tokens of plain sampling with that seed (a fresh seed without one). A field
that would change the answer in a way pld does not do (n > 1, logprobs, tools, penalties, stop
sequences...) is refused, never ignored; a field pld knows nothing of is ignored, as vLLM does.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import Enum

from pld_cli.core.config import SamplingConfig
from pld_cli.serve.errors import ApiError, invalid, unsupported


class Endpoint(str, Enum):
    CHAT = "/v1/chat/completions"
    TEXT = "/v1/completions"


class Role(str, Enum):
    SYSTEM = "system"
    USER = "user"
    ASSISTANT = "assistant"


ROLES = {"system": Role.SYSTEM, "developer": Role.SYSTEM, "user": Role.USER}
ROLES |= {"assistant": Role.ASSISTANT}

# Fields refused unless they hold the value that changes nothing (None always changes nothing).
NEUTRAL = {
    "n": (1,),
    "best_of": (1,),
    "echo": (False,),
    "logprobs": (False, 0),
    "top_logprobs": (0,),
    "presence_penalty": (0, 0.0),
    "frequency_penalty": (0, 0.0),
    "logit_bias": ({},),
    "tools": ([],),
    "functions": ([],),
    "suffix": ("",),
    "stop": ("", []),
    "tool_choice": ("none", "auto"),
}


@dataclass(frozen=True)
class Message:
    role: Role
    content: str

    def as_chat(self) -> dict[str, str]:
        """As a chat template takes it."""
        return {"role": self.role.value, "content": self.content}


@dataclass(frozen=True)
class Request:
    """What a completion request asks, either endpoint."""

    endpoint: Endpoint
    model: str | None  # None: the served one
    messages: tuple[Message, ...] = ()  # chat
    continued: bool = False  # vLLM's continue_final_message: the last (assistant) message goes on
    prompt: str | tuple[int, ...] = ""  # completions: text, or token ids
    max_tokens: int | None = None  # None: chat up to the context, completions OpenAI's 16
    sampling: SamplingConfig = SamplingConfig()
    repetition_penalty: float | None = None  # None: the model's own (vLLM's extra field)
    stream: bool = False
    include_usage: bool = False  # stream_options.include_usage: a last chunk with the usage
    prediction: str = ""  # the predicted output: a draft source only
    token_ids: bool = False  # vLLM's return_token_ids: each choice carries its token ids


def parse(endpoint: Endpoint, data: bytes) -> Request:
    """The request in `data` (a JSON object), or ApiError naming what is wrong."""
    try:
        body = json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ApiError(f"the body is not valid JSON ({exc})", code="invalid_json") from None
    if not isinstance(body, dict):
        raise ApiError("the body must be a JSON object", code="invalid_json")
    refuse_what_changes_the_answer(body)
    fields = Fields(body)
    stream = fields.get("stream", bool, False)
    options = fields.get("stream_options", dict, {})
    limit = fields.get("max_tokens", int, None)
    if endpoint is Endpoint.CHAT:
        limit = fields.get("max_completion_tokens", int, limit)
    if limit is not None and limit < 1:
        raise invalid("max_tokens", "must be at least 1")
    penalty = fields.get("repetition_penalty", float, None)
    if penalty is not None and penalty <= 0:
        raise invalid("repetition_penalty", "must be above 0")
    return Request(
        endpoint=endpoint,
        model=fields.get("model", str, None) or None,
        messages=messages(body) if endpoint is Endpoint.CHAT else (),
        continued=continued(fields, body) if endpoint is Endpoint.CHAT else False,
        prompt=prompt(body) if endpoint is Endpoint.TEXT else "",
        max_tokens=limit,
        sampling=sampling(fields),
        repetition_penalty=penalty,
        stream=stream,
        include_usage=stream and bool(options.get("include_usage")),
        prediction=prediction(body.get("prediction")),
        token_ids=fields.get("return_token_ids", bool, False),
    )


class Fields:
    """A JSON object's fields read with their type checked (a bool is no number here)."""

    def __init__(self, body: dict) -> None:
        self.body = body

    def get(self, name: str, kind: type, default):
        value = self.body.get(name)
        if value is None:
            return default
        if kind is float and isinstance(value, int) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, kind) and not (isinstance(value, bool) and kind is not bool):
            return value
        raise invalid(name, f"expected {TYPE_NAMES[kind]}, got {json.dumps(value)[:60]}")


TYPE_NAMES = {bool: "a boolean", int: "an integer", float: "a number", str: "a string"}
TYPE_NAMES |= {dict: "an object", list: "an array"}


def refuse_what_changes_the_answer(body: dict) -> None:
    for name, neutral in NEUTRAL.items():
        value = body.get(name)
        if value is not None and not any(value == n and type(value) is type(n) for n in neutral):
            raise unsupported(name, f"{name} = {json.dumps(value)[:60]}")
    response_format = body.get("response_format")
    if response_format not in (None, {"type": "text"}):
        raise unsupported("response_format", "a response_format other than text")


def sampling(fields: Fields) -> SamplingConfig:
    """Greedy unless temperature > 0; then top_p, top_k (vLLM's; -1 or 0: all) and seed."""
    temperature = fields.get("temperature", float, 0.0)
    if not 0 <= temperature <= 2:
        raise invalid("temperature", "must be between 0 and 2")
    top_p = fields.get("top_p", float, 1.0)
    if not 0 < top_p <= 1:
        raise invalid("top_p", "must be above 0 and at most 1")
    top_k = fields.get("top_k", int, 0)
    if top_k < -1:
        raise invalid("top_k", "must be -1 (all), 0 (all) or above")
    seed = fields.get("seed", int, None)
    return SamplingConfig(temperature, top_p, max(top_k, 0), seed)


def messages(body: dict) -> tuple[Message, ...]:
    listed = body.get("messages")
    if not isinstance(listed, list) or not listed:
        raise invalid("messages", "expected a non-empty array of messages")
    return tuple(message(item, f"messages[{i}]") for i, item in enumerate(listed))


def continued(fields: Fields, body: dict) -> bool:
    """vLLM's continue_final_message: the answer starts with the last message, the assistant's
    (as pld's own edit prompt starts it with a code fence)."""
    if not fields.get("continue_final_message", bool, False):
        return False
    if body["messages"][-1].get("role") != "assistant":
        raise invalid("continue_final_message", "the last message must be the assistant's")
    return True


def message(item: object, where: str) -> Message:
    if not isinstance(item, dict):
        raise invalid(where, "expected an object with a role and a content")
    role = item.get("role")
    if role not in ROLES:
        if role in ("tool", "function"):
            raise unsupported(f"{where}.role", f"the role {role!r}")
        raise invalid(f"{where}.role", f"expected one of {', '.join(ROLES)}, got {role!r}")
    return Message(ROLES[role], text_of(item.get("content"), f"{where}.content"))


def text_of(content: object, where: str) -> str:
    """A content: a string, or an array of text parts joined (an image part is refused)."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise invalid(where, "expected a string or an array of text parts")
    texts = []
    for i, part in enumerate(content):
        if not isinstance(part, dict) or part.get("type") != "text":
            raise unsupported(f"{where}[{i}]", "a content part other than text")
        if not isinstance(part.get("text"), str):
            raise invalid(f"{where}[{i}].text", "expected a string")
        texts.append(part["text"])
    return "".join(texts)


def prompt(body: dict) -> str | tuple[int, ...]:
    """One prompt: text, token ids, or an array holding exactly one of them."""
    value = body.get("prompt")
    if isinstance(value, list) and value and isinstance(value[0], (str, list)):
        if len(value) > 1:
            raise unsupported("prompt", "more than one prompt in a request")
        value = value[0]
    if isinstance(value, str) and value:
        return value
    if isinstance(value, list) and value and all(is_token(t) for t in value):
        return tuple(value)
    raise invalid("prompt", "expected a non-empty string or array of token ids")


def is_token(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def prediction(value: object) -> str:
    """OpenAI's predicted output, {"type": "content", "content": text or text parts}."""
    if value is None:
        return ""
    if not isinstance(value, dict) or value.get("type") != "content":
        raise invalid("prediction", 'expected {"type": "content", "content": ...}')
    return text_of(value.get("content"), "prediction.content")
