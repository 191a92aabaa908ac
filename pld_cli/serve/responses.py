"""The JSON objects OpenAI's API answers with, built from an answer or one pass's delta.

Chat: `chat.completion` (a message), streamed as `chat.completion.chunk` (a first chunk with the
role, then content deltas). Completions: `text_completion`, streamed as the same object with text
deltas. Where asked (vLLM's `return_token_ids`) each choice carries its token ids, so
`pld --server` counts exactly what this server decoded. Usage follows OpenAI, with the predicted
output's counts in `completion_tokens_details` (see `usage`); `metrics.speculative_decoding` says
how many tokens were drafted and kept, as vLLM's per-request metrics do, for `pld --server`'s
stats.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from pld_cli.core.stats import Stats
from pld_cli.serve.answer import Answer, Delta
from pld_cli.serve.holder import Served
from pld_cli.serve.requests import Endpoint, Request

OWNER = "pld"


@dataclass(frozen=True)
class Reply:
    """What every object of one answer shares."""

    id: str
    created: int
    model: str
    endpoint: Endpoint
    token_ids: bool  # the choices carry their token ids

    @property
    def chat(self) -> bool:
        return self.endpoint is Endpoint.CHAT

    def head(self, streamed: bool) -> dict:
        kind = "chat.completion" if self.chat else "text_completion"
        kind += ".chunk" if streamed and self.chat else ""
        return {"id": self.id, "object": kind, "created": self.created, "model": self.model}


def reply_for(request: Request, model: str, now: float) -> Reply:
    prefix = "chatcmpl-" if request.endpoint is Endpoint.CHAT else "cmpl-"
    return Reply(prefix + uuid.uuid4().hex, int(now), model, request.endpoint, request.token_ids)


def completion(reply: Reply, answer: Answer) -> dict:
    """The whole answer at once (stream: false)."""
    choice: dict = {"index": 0, "finish_reason": answer.finish.value, "logprobs": None}
    if reply.chat:
        choice["message"] = {"role": "assistant", "content": answer.text}
    else:
        choice["text"] = answer.text
    if reply.token_ids:
        choice["token_ids"] = answer.token_ids
    return reply.head(streamed=False) | {
        "choices": [choice],
        "usage": usage(answer.stats),
        "metrics": metrics(answer.stats),
    }


def role_chunk(reply: Reply) -> dict | None:
    """A chat stream's first chunk: who speaks (completions have none)."""
    if not reply.chat:
        return None
    choice = {"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}
    return reply.head(streamed=True) | {"choices": [choice]}


def chunk(reply: Reply, delta: Delta) -> dict | None:
    """One pass's chunk; None where it adds nothing the client would see."""
    carries_ids = reply.token_ids and delta.token_ids
    if not (delta.text or delta.finish or carries_ids):
        return None
    finish = delta.finish.value if delta.finish else None
    choice: dict = {"index": 0, "finish_reason": finish, "logprobs": None}
    if reply.chat:
        choice["delta"] = {"content": delta.text} if delta.text else {}
    else:
        choice["text"] = delta.text
    if reply.token_ids:
        choice["token_ids"] = list(delta.token_ids)
    return reply.head(streamed=True) | {"choices": [choice]}


def usage_chunk(reply: Reply, stats: Stats) -> dict:
    """The stream's last chunk where stream_options.include_usage asks for it."""
    return reply.head(streamed=True) | {
        "choices": [],
        "usage": usage(stats),
        "metrics": metrics(stats),
    }


def usage(stats: Stats) -> dict:
    """OpenAI's usage. accepted_prediction_tokens: draft tokens copied from the prediction that
    the model kept (they are in the completion); rejected_prediction_tokens: draft tokens copied
    from the prediction that a pass verified and did not keep. Prediction tokens never drafted
    count in neither (OpenAI counts the whole prediction; pld counts what it tried).
    cached_tokens: prompt tokens whose keys and values were copied from a kept prompt
    (runtime/prefix/), not computed."""
    details = {
        "accepted_prediction_tokens": stats.prediction_accepted,
        "rejected_prediction_tokens": stats.prediction_rejected,
        "reasoning_tokens": 0,
    }
    return {
        "prompt_tokens": stats.prompt_tokens,
        "completion_tokens": stats.new_tokens,
        "total_tokens": stats.prompt_tokens + stats.new_tokens,
        "prompt_tokens_details": {"cached_tokens": stats.cached_tokens},
        "completion_tokens_details": details,
    }


def metrics(stats: Stats) -> dict:
    drafted = {"num_draft_tokens": stats.drafted_tokens}
    return {"speculative_decoding": drafted | {"num_accepted_draft_tokens": stats.accepted_tokens}}


def model_entry(served: Served) -> dict:
    """/v1/models' entry: OpenAI's fields, and vLLM's root and max_model_len, which
    `pld --server` reads (its tokenizer's folder, the context)."""
    return {
        "id": served.name,
        "object": "model",
        "created": served.created,
        "owned_by": OWNER,
        "root": served.root,
        "max_model_len": served.context,
    }


def model_list(served: Served) -> dict:
    return {"object": "list", "data": [model_entry(served)]}
