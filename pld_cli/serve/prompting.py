"""A request as the loop takes it: prompt ids, the prediction's ids, and the decode's settings.

The chat template is the one pld's own tasks use (tasks/prompts.chat_ids), so a chat request with
pld's messages gets the ids `pld summarize` decodes. A text prompt is tokenized as vLLM does (with
the tokenizer's special tokens); token ids go in as they are, each checked against the vocabulary.
The prediction is tokenized without special tokens: it is a guess at the answer's own tokens.
The context is checked before anything is decoded, as vLLM's 400 does.
"""

from __future__ import annotations

from dataclasses import dataclass
from http import HTTPStatus

from jinja2 import TemplateError

from pld_cli.core.config import DecodeConfig
from pld_cli.serve.errors import ApiError, invalid
from pld_cli.serve.requests import Endpoint, Request
from pld_cli.tasks.prompts import chat_ids

TEXT_MAX_TOKENS = 16  # OpenAI's default max_tokens for /v1/completions


@dataclass(frozen=True)
class Prepared:
    """A request ready to decode."""

    ids: list[int]
    prediction: list[int]
    config: DecodeConfig


def prepare(
    request: Request,
    tokenizer,
    context: int,
    model_penalty: float | None,
    use_pld: bool = True,
) -> Prepared:
    """The request's ids and settings (`use_pld`: draft, or decode plainly as pld serve --no-pld
    does, the prediction unused); ApiError where they do not fit the context."""
    ids = prompt_ids(request, tokenizer)
    room = context - len(ids)
    wanted = request.max_tokens
    if wanted is None:
        wanted = TEXT_MAX_TOKENS if request.endpoint is Endpoint.TEXT else room
    if room < 1 or wanted > room:
        asked = f" + {wanted} new tokens (max_tokens)" if request.max_tokens else ""
        raise ApiError(
            f"{len(ids)} prompt tokens{asked} exceed this model's context of {context} tokens",
            HTTPStatus.BAD_REQUEST,
            param="messages" if request.endpoint is Endpoint.CHAT else "prompt",
            code="context_length_exceeded",
        )
    predicted = tokenizer(request.prediction, add_special_tokens=False)["input_ids"]
    config = DecodeConfig(
        use_pld=use_pld,
        max_new_tokens=wanted,
        sampling=request.sampling,
        repetition_penalty=request.repetition_penalty or model_penalty or 1.0,
    )
    return Prepared(ids, list(predicted) if request.prediction else [], config)


def prompt_ids(request: Request, tokenizer) -> list[int]:
    if request.endpoint is Endpoint.CHAT:
        chat = [message.as_chat() for message in request.messages]
        start = ""
        if request.continued:  # the answer's start, as pld's tasks write it (tasks/prompts.py)
            chat, start = chat[:-1], chat[-1]["content"]
        try:
            return chat_ids(tokenizer, chat, start)
        except TemplateError as exc:  # a template that wants roles alternating, say
            raise invalid("messages", f"the model's chat template refused them ({exc})") from None
    if isinstance(request.prompt, str):
        return list(tokenizer(request.prompt)["input_ids"])
    vocabulary = len(tokenizer)
    beyond = [token for token in request.prompt if token >= vocabulary]
    if beyond:
        raise invalid("prompt", f"token id {beyond[0]} is beyond the vocabulary ({vocabulary})")
    return list(request.prompt)
