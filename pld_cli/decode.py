"""The decode loop: draft by prompt lookup, verify in one pass, repeat; one event per pass.

Plain greedy decoding is the same loop with drafting off, so both are measured on equal terms.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass

from .drafter import NO_DRAFT, NgramIndex
from .runtime import Runtime
from .verify import verify_greedy


@dataclass(frozen=True)
class DecodeConfig:
    max_new_tokens: int = 1024
    num_draft: int = 10  # k, the most draft tokens verified in one pass
    ngram_max: int = 3
    ngram_min: int = 1
    use_pld: bool = True


@dataclass(frozen=True)
class Prefill:
    """The prompt (all but its last token) entered the KV cache."""

    prompt_tokens: int
    seconds: float


@dataclass(frozen=True)
class Pass:
    """One verify pass: what was drafted, how much the model accepted, what it emitted."""

    drafted: tuple[int, ...]
    accepted: int
    emitted: tuple[int, ...]  # accepted draft tokens, then the model's own token (unless cut)
    source: int | None  # sequence position the draft was copied from
    from_prompt: bool | None  # whether that position lies in the prompt
    seconds: float  # drafting + forward + acceptance
    stop: str | None = None  # 'eos' | 'max_new_tokens' | 'context' on the last pass


Event = Prefill | Pass


def generate(
    runtime: Runtime, prompt_ids: Sequence[int], eos_ids: Collection[int], config: DecodeConfig
) -> Iterator[Event]:
    """Greedy decoding of prompt_ids: a Prefill event, then one Pass per forward pass."""
    if not prompt_ids:
        raise ValueError("empty prompt")
    start = time.perf_counter()
    runtime.prefill(prompt_ids[:-1])
    yield Prefill(len(prompt_ids), time.perf_counter() - start)

    index = NgramIndex(prompt_ids, config.ngram_max, config.ngram_min)
    pending = prompt_ids[-1]  # the newest token, not yet in the cache
    produced = 0
    while True:
        start = time.perf_counter()
        # A pass over 1 + k positions emits at most k + 1 tokens and fills 1 + k cache slots.
        room = min(config.max_new_tokens - produced, runtime.context_limit - runtime.length)
        k = min(config.num_draft, room - 1)
        draft = index.draft(k) if config.use_pld else NO_DRAFT
        accepted, emitted = verify_greedy(runtime, pending, draft.tokens)
        emitted = cut_after_eos(emitted, eos_ids)
        index.extend(emitted)
        produced += len(emitted)
        pending = emitted[-1]
        stop = stop_reason(emitted[-1], eos_ids, produced, runtime, config)
        yield Pass(
            drafted=draft.tokens,
            accepted=min(accepted, len(emitted)),
            emitted=tuple(emitted),
            source=draft.source,
            from_prompt=None if draft.source is None else draft.source < len(prompt_ids),
            seconds=time.perf_counter() - start,
            stop=stop,
        )
        if stop:
            return


def cut_after_eos(tokens: list[int], eos_ids: Collection[int]) -> list[int]:
    for i, token in enumerate(tokens):
        if token in eos_ids:
            return tokens[: i + 1]
    return tokens


def stop_reason(
    last: int, eos_ids: Collection[int], produced: int, runtime: Runtime, config: DecodeConfig
) -> str | None:
    if last in eos_ids:
        return "eos"
    if produced >= config.max_new_tokens:
        return "max_new_tokens"
    if runtime.length >= runtime.context_limit:
        return "context"
    return None
