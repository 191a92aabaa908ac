"""The decode loop: draft by prompt lookup, verify in one pass, repeat; one event per pass.

Plain greedy decoding is the same loop with drafting off, so both are measured on equal terms.
With `draft="adaptive"` each pass verifies only as many of the candidate draft tokens as maximise
expected tokens per second under the measured pass costs (policy.py); "fixed" verifies them all.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass
from enum import Enum

from pld_cli.core.config import DecodeConfig
from pld_cli.core.drafter import NO_DRAFT, Draft, Drafter, NgramIndex
from pld_cli.core.pass_costs import ObservedCosts
from pld_cli.core.policy import AcceptanceModel, choose_length
from pld_cli.core.repetition import LoopStop, PenalizedRuntime
from pld_cli.core.runtime import Runtime
from pld_cli.core.sampling import Sampler, verify_sampled
from pld_cli.core.verify import accepted_prefix, verify_greedy


class Stop(str, Enum):
    """Why decoding ended, on the last pass (and in a run's stats and JSON)."""

    EOS = "eos"  # the model's end-of-sequence token
    MAX_NEW_TOKENS = "max_new_tokens"  # --max-new-tokens reached
    CONTEXT = "context"  # the model's context is full
    REPETITION = "repetition"  # the loop stop: the output began to repeat itself

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class Prefill:
    """The prompt (all but its last token) entered the KV cache."""

    prompt_tokens: int
    seconds: float
    cached: int = 0  # positions copied from a kept prompt, not computed (runtime/prefix/)


@dataclass(frozen=True)
class Pass:
    """One verify pass: what was drafted, how much the model accepted, what it emitted."""

    drafted: tuple[int, ...]
    accepted: int
    emitted: tuple[int, ...]  # accepted draft tokens, then the model's own token (unless cut)
    source: int | None  # position the draft was copied from: in the sequence, or the prediction
    from_prompt: bool | None  # whether that position lies in the prompt (None: not the sequence)
    seconds: float  # drafting + forward + acceptance
    stop: Stop | None = None  # on the last pass only
    candidates: int = 0  # draft tokens the lookup offered, before the policy cut them
    reason: str = ""  # why this many were verified
    predicted: bool = False  # the draft was copied from the caller's prediction (drafter.py)


Event = Prefill | Pass


def generate(
    runtime: Runtime,
    prompt_ids: Sequence[int],
    eos_ids: Collection[int],
    config: DecodeConfig,
    costs: Sequence[float] | None = None,
    prediction: Sequence[int] = (),
) -> Iterator[Event]:
    """Decoding of prompt_ids (greedy, or sampled): a Prefill event, then one Pass per pass.

    costs[q] is the measured seconds of a pass over q positions, or what q rows add to a pass
    shared with other documents (adaptive drafting only); without it every pass size is taken
    to cost the same; `ObservedCosts` are told what each pass took (pass_costs.py).
    `prediction`, the caller's guess of the output, is a draft source only: it never enters the
    runtime, so the tokens are those decoding gives without it.
    """
    if not prompt_ids:
        raise ValueError("empty prompt")
    if config.repetition_penalty != 1.0:
        runtime = PenalizedRuntime(runtime, config.repetition_penalty)
    loops = LoopStop(config.loop_span) if config.stop_loops else None
    start = time.perf_counter()
    cached = runtime.prefill(prompt_ids[:-1]) or 0
    yield Prefill(len(prompt_ids), time.perf_counter() - start, cached)

    index = NgramIndex(prompt_ids, config.ngram_max, config.ngram_min)
    drafter = Drafter(index, follow_copies=config.adaptive, prediction=prediction)
    acceptance = AcceptanceModel()
    if config.sampling.temperature > 0:
        verify = functools.partial(verify_sampled, sampler=Sampler(config.sampling))
    else:
        verify = verify_greedy
    costs = costs or [1.0] * (config.num_draft + 2)
    pending = prompt_ids[-1]  # the newest token, not yet in the cache
    produced = 0
    while True:
        start = time.perf_counter()
        # A pass over 1 + k positions emits at most k + 1 tokens and fills 1 + k cache slots.
        room = min(config.max_new_tokens - produced, runtime.context_limit - runtime.length)
        candidate = drafter.draft(min(config.num_draft, room - 1)) if config.use_pld else NO_DRAFT
        draft, reason = candidate.tokens, "fixed length" if candidate.tokens else "no match"
        if config.adaptive and draft:
            length = choose_length(
                len(draft), candidate.run, acceptance, costs, candidate.ambiguous
            )
            draft, reason = draft[: length.k], length.reason
        accepted, emitted = verify(runtime, pending, draft)
        # The model's own token also tells whether the next, unverified candidate token was right.
        observed = candidate.tokens[: len(draft) + 1]
        acceptance.update(
            candidate.run, len(observed), accepted_prefix(observed, emitted), candidate.ambiguous
        )
        emitted = cut_after_eos(emitted, eos_ids)
        # Token by token, as plain decoding would see them, so both stop at the same token.
        looped = loops.extend(emitted) if loops else None
        emitted = emitted[:looped] if looped else emitted
        drafter.extend(emitted)
        produced += len(emitted)
        pending = emitted[-1]
        stop = (
            Stop.REPETITION if looped else stop_reason(pending, eos_ids, produced, runtime, config)
        )
        seconds = time.perf_counter() - start
        if isinstance(costs, ObservedCosts):
            costs.observe(1 + len(draft), seconds)
        yield Pass(
            drafted=tuple(draft),
            accepted=min(accepted, len(emitted)),
            emitted=tuple(emitted),
            source=candidate.source,
            from_prompt=from_prompt(candidate, len(prompt_ids)),
            seconds=seconds,
            stop=stop,
            candidates=len(candidate.tokens),
            reason=reason,
            predicted=candidate.predicted,
        )
        if stop:
            return


def from_prompt(candidate: Draft, prompt_tokens: int) -> bool | None:
    """Whether a draft was copied from the prompt; None where it came from no position of the
    sequence (no draft, or the prediction)."""
    if candidate.source is None or candidate.predicted:
        return None
    return candidate.source < prompt_tokens


def cut_after_eos(tokens: list[int], eos_ids: Collection[int]) -> list[int]:
    for i, token in enumerate(tokens):
        if token in eos_ids:
            return tokens[: i + 1]
    return tokens


def stop_reason(
    last: int, eos_ids: Collection[int], produced: int, runtime: Runtime, config: DecodeConfig
) -> Stop | None:
    if last in eos_ids:
        return Stop.EOS
    if produced >= config.max_new_tokens:
        return Stop.MAX_NEW_TOKENS
    if runtime.length >= runtime.context_limit:
        return Stop.CONTEXT
    return None
