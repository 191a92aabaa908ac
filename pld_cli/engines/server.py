"""A server that speaks the OpenAI API (vLLM first) as the engine: its batching, its drafting.

The server gets exactly the prompt pld's own engine would decode: the same template and answer
start, as token ids (vLLM's `/v1/completions` takes them; a server that refuses them as invalid,
422, gets the same prompt rendered as text from then on), greedy unless sampling is asked for.
Its answer is always streamed. A streamed chunk carries the tokens of one engine step, so a chunk
of n tokens is one `Pass` that accepted n - 1 draft tokens (the live view marks them copied, as
pld's own). How many tokens the server drafted is known only where it says (vLLM's per-request
metrics, `--per-request-spec-decode-metrics`); otherwise it stays unknown (null), never guessed.
The loop stop of a summary is applied to the stream, so the server is cut off where pld's own
loop stops.

Calls go out from several threads at once, at most `parallel` in flight: the server batches them.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from pld_cli.core.config import DecodeConfig
from pld_cli.core.decode import Pass, Prefill, Stop
from pld_cli.core.repetition import LoopStop
from pld_cli.core.stats import Stats
from pld_cli.engines.http import Client, ServerError
from pld_cli.errors import ExitStatus, PldError
from pld_cli.tasks.engine import Note, OnPass

STOPS = {"stop": Stop.EOS, "length": Stop.MAX_NEW_TOKENS}  # finish_reason -> pld's stop
Tokenize = Callable[[str], list[int]]


class ServerEngine:
    """Decodes prompt ids on an OpenAI-compatible server."""

    drafts_itself = True

    def __init__(
        self,
        client: Client,
        model: str,
        tokenizer,
        context: int,
        eos_ids: frozenset[int],
        parallel: int = 1,
    ) -> None:
        self.client, self.name, self.tokenizer = client, model, tokenizer
        self.context, self.eos_ids, self.parallel = context, eos_ids, parallel
        self.limit = ""
        self.repetition_penalty = None  # the server applies the model's own generation_config
        self.weights = None  # the server's to choose and to say
        self.slots = threading.BoundedSemaphore(parallel)
        self.text_prompts = False  # the server takes only text: the prompt ids rendered

    def prepare(self, positions: int, config: DecodeConfig, report: Note, note: Note) -> None:
        note(
            f"engine: {self.name} on the server at {self.client.where}, "
            f"up to {self.parallel} calls at once"
        )

    def decode(
        self, ids: list[int], config: DecodeConfig, on_pass: OnPass | None = None
    ) -> tuple[list[int], Stats]:
        with self.slots:
            try:
                return self.stream(ids, config, on_pass)
            except ServerError as exc:
                if exc.status != 422 or self.text_prompts:
                    raise
                self.text_prompts = True
                return self.stream(ids, config, on_pass)

    def stream(
        self, ids: list[int], config: DecodeConfig, on_pass: OnPass | None
    ) -> tuple[list[int], Stats]:
        stats, tokens = Stats(drafts_known=False), []
        loops = LoopStop(config.loop_span) if config.stop_loops else None
        start = last = time.perf_counter()
        for event in self.client.stream("/v1/completions", self.request(ids, config)):
            spec = (event.get("metrics") or {}).get("speculative_decoding")
            if spec:
                reported(stats, spec)
            if not event.get("choices"):
                continue
            choice, now = event["choices"][0], time.perf_counter()
            step = chunk_tokens(choice, self.tokenizer)
            stop = finish(choice.get("finish_reason"))
            keep = loops.extend(step) if loops else None
            if keep is not None:
                step, stop = step[:keep], Stop.REPETITION
            if not stats.prompt_tokens:  # the first chunk comes with the prefill: timed with it
                stats.add(Prefill(len(ids), now - start))
            elif not step and stop is None:
                continue
            seconds, last = (now - last if tokens else 0.0), now
            tokens += step
            event_ = Pass((), max(len(step) - 1, 0), tuple(step), None, None, seconds, stop)
            stats.add(event_)
            if on_pass:
                on_pass(event_, stats)
            if stop == Stop.REPETITION:
                break  # closing the stream cancels the request on the server
        if stats.stop is None:
            raise ServerError("the server's stream ended without a finish reason")
        return tokens, stats

    def request(self, ids: list[int], config: DecodeConfig) -> dict:
        sampling = config.sampling
        body = {
            "model": self.name,
            "prompt": self.tokenizer.decode(ids) if self.text_prompts else ids,
            "max_tokens": config.max_new_tokens,
            "temperature": sampling.temperature,
            "stream": True,
            "stream_options": {"include_usage": True},
            "return_token_ids": True,  # vLLM: the ids of each chunk; others ignore it
            "skip_special_tokens": True,
        }
        if sampling.temperature > 0:
            body |= {"top_p": sampling.top_p, "seed": sampling.seed}
            body |= {"top_k": sampling.top_k} if sampling.top_k else {}
        if config.repetition_penalty != 1.0:
            body["repetition_penalty"] = config.repetition_penalty
        return body

    def close(self) -> None:
        self.client.close()


def chunk_tokens(choice: dict, tokenizer) -> list[int]:
    """The chunk's token ids: as the server sent them (vLLM), else its text tokenized again
    (a server that sends only text; the count may then differ a little from the server's)."""
    ids = choice.get("token_ids")
    if ids is not None:
        return list(ids)
    text = choice.get("text") or ""
    return list(tokenizer(text, add_special_tokens=False)["input_ids"]) if text else []


def finish(reason: str | None) -> Stop | None:
    if reason is None:
        return None
    if reason not in STOPS:
        raise ServerError(f"the server stopped the answer: finish_reason {reason!r}")
    return STOPS[reason]


def reported(stats: Stats, spec: dict) -> None:
    """vLLM's per-request drafting metrics in place of what the chunks tell."""
    drafted, accepted = spec.get("num_draft_tokens"), spec.get("num_accepted_draft_tokens")
    if isinstance(drafted, int) and isinstance(accepted, int):
        stats.drafts_known = True
        stats.drafted_tokens, stats.accepted_tokens = drafted, accepted


def open_engine(settings, report: Note) -> ServerEngine:
    """The engine for --server: the model it serves (-m, else its only or first one), that
    model's tokenizer and context."""
    from pld_cli.engines.tokenizers import served_tokenizer

    client = Client(settings.server, settings.api_key, settings.timeout, settings.token_timeout)
    report(f"asking the server at {client.where} what it serves")
    listed = client.get("/v1/models").get("data") or []
    names = [entry.get("id") for entry in listed if isinstance(entry, dict)]
    if not names:
        raise PldError(f"the server at {client.where} lists no model (/v1/models)")
    if settings.model and settings.model not in names:
        raise PldError(
            f"-m {settings.model}: the server at {client.where} serves {', '.join(names)}",
            code=ExitStatus.USAGE,
        )
    name = settings.model or names[0]
    entry = listed[names.index(name)]
    tokenizer, eos_ids, context = served_tokenizer(name, entry, settings.tokenizer)
    return ServerEngine(client, name, tokenizer, context, eos_ids, settings.jobs)
