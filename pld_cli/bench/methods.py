"""The methods a benchmark compares, each a runner (model, prompt ids, config) -> MethodRun.

`greedy`, `pld` and `pld-fixed` are pld's own loop with drafting off, adaptive and fixed-length;
`hf-pld` is transformers' built-in prompt lookup and `hf-greedy` its plain `generate()`, timed
from outside with a forward hook; `server` is an OpenAI-compatible server (vLLM, its own n-gram
drafting) on the same prompt ids, when the bench is given --server. A new method is one more
entry in RUNNERS. pld's own methods take a runtime suffix (`pld@dynamic`) to run on another
runtime than the bench's --runtime, side by side.
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch
from transformers import StoppingCriteria, StoppingCriteriaList

from pld_cli.core.config import DecodeConfig
from pld_cli.core.decode import Pass, Stop
from pld_cli.core.repetition import LoopStop
from pld_cli.engines.local import decode_ids
from pld_cli.loading.models import LoadedModel
from pld_cli.runtime.names import RuntimeName
from pld_cli.tasks.engine import Engine
from pld_cli.tasks.loops import loop_cut

HF_LOOKUP_TOKENS = 10  # prompt_lookup_num_tokens for transformers' generate

RUNTIME_NAMES = {name.value for name in RuntimeName}  # METHOD@NAME


@dataclass(frozen=True)
class MethodRun:
    """What one decode produced. None where a method cannot tell (see run_hf_generate)."""

    token_ids: list[int]  # the new tokens, EOS included
    prompt_tokens: int
    passes: int
    drafted_tokens: int | None
    accepted_tokens: int
    passes_accepting: int | None
    decode_s: float
    trace: list[dict] | None = None  # pld's loop: per pass, the draft length chosen and why
    acceptance_histogram: list[dict] | None = None  # pld's loop: acceptance per draft position
    delivered: int | None = None  # of token_ids, what a user gets (a loop's repeats cut); None: all

    @property
    def new_tokens(self) -> int:
        return len(self.token_ids)

    @property
    def delivered_ids(self) -> list[int]:
        return self.token_ids if self.delivered is None else self.token_ids[: self.delivered]


Runner = Callable[[LoadedModel, list[int], DecodeConfig], MethodRun]


def run_loop(
    loaded: LoadedModel,
    ids: list[int],
    config: DecodeConfig,
    runtime_name: RuntimeName | None = None,
    **changes,
) -> MethodRun:
    """pld's own decode loop with the config changed as given (only tokens and timings)."""
    trace = []
    config = dataclasses.replace(config, **changes)
    tokens, stats = decode_ids(
        loaded, ids, config, lambda step, _: trace.append(pass_record(step)), runtime_name
    )
    counts = (stats.passes, stats.drafted_tokens, stats.accepted_tokens, stats.passes_accepting)
    kept = delivered(loaded, tokens, stats.stop == Stop.REPETITION)
    if not config.use_pld:
        return MethodRun(tokens, len(ids), *counts, stats.decode_s, delivered=kept)
    histogram = stats.acceptance_histogram()
    return MethodRun(tokens, len(ids), *counts, stats.decode_s, trace, histogram, kept)


def delivered(loaded: LoadedModel, tokens: list[int], looped: bool) -> int | None:
    """What of a method's tokens the user gets: a loop stop's output cut to one copy (tasks'
    rule), else all (None)."""
    return loop_cut(tokens, loaded.tokenizer) if looped else None


def run_engine(
    loaded: LoadedModel, ids: list[int], config: DecodeConfig, engine: Engine
) -> MethodRun:
    """Another engine (a server) on the same prompt ids; what it does not report stays None."""
    tokens, stats = engine.decode(ids, config)
    drafted = stats.drafted_tokens if stats.drafts_known else None
    return MethodRun(
        tokens,
        len(ids),
        stats.passes,
        drafted,
        stats.accepted_tokens,
        stats.passes_accepting,
        stats.decode_s,
        delivered=delivered(loaded, tokens, stats.stop == Stop.REPETITION),
    )


def pass_record(step: Pass) -> dict:
    return {
        "verified": len(step.drafted),
        "offered": step.candidates,
        "accepted": step.accepted,
        "why": step.reason,
    }


def run_hf_generate(
    loaded: LoadedModel, ids: list[int], config: DecodeConfig, lookup: int | None = None
) -> MethodRun:
    """transformers' generate (with prompt lookup of `lookup` tokens), timed by a forward hook.

    Every forward call emits tokens, the first too: it prefills the prompt and verifies a first
    draft, as pld's first pass does after its prefill of all but the last prompt token. So passes
    are all the calls, counted like pld's (plain generate: one per token). decode_s runs from the
    end of the first call to the end of generate, which leaves out one pass of generate's time.
    generate does not report its drafts: each call emits its accepted draft tokens plus one, so
    accepted = new_tokens - passes. How many tokens were drafted and how many passes accepted any
    are unknown: drafted_tokens and passes_accepting are None (null).
    """
    model, ends = loaded.model, []
    device = model.get_input_embeddings().weight.device

    def hook(*_) -> None:
        # Only the first call (the prefill) is waited for: later calls are counted, not timed,
        # so generate keeps queueing work on the GPU as it does untimed.
        if not ends and device.type == "cuda":
            torch.cuda.synchronize(device)
        ends.append(time.perf_counter())

    x = torch.tensor([ids], device=device)
    sampling = config.sampling
    if sampling.temperature > 0:
        torch.manual_seed(0 if sampling.seed is None else sampling.seed)
        options = dict(
            do_sample=True,
            temperature=sampling.temperature,
            top_p=sampling.top_p,
            top_k=sampling.top_k,
        )
    else:
        options = dict(do_sample=False)
    options["repetition_penalty"] = config.repetition_penalty
    pad = loaded.tokenizer.pad_token_id
    eos = sorted(loaded.eos_ids)
    if config.stop_loops:  # the same loop stop as pld's, so both end at the same token
        options["stopping_criteria"] = StoppingCriteriaList([LoopCriteria(len(ids), config)])
    handle = model.register_forward_hook(hook)
    try:
        out = model.generate(
            x,
            attention_mask=torch.ones_like(x),
            prompt_lookup_num_tokens=lookup,
            **options,
            return_dict_in_generate=False,
            max_new_tokens=config.max_new_tokens,
            eos_token_id=eos,
            pad_token_id=eos[0] if pad is None else pad,
        )
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        end = time.perf_counter()
    finally:
        handle.remove()
    tokens = out[0, len(ids) :].tolist()
    looped = LoopStop(config.loop_span).extend(tokens) if config.stop_loops else None
    tokens = tokens[:looped] if looped else tokens  # prompt lookup may go past the loop's token
    accepted = max(len(tokens) - len(ends), 0)
    seconds = end - ends[0] if ends else 0.0
    kept = delivered(loaded, tokens, looped is not None)
    return MethodRun(tokens, len(ids), len(ends), None, accepted, None, seconds, delivered=kept)


class LoopCriteria(StoppingCriteria):
    """generate() stops where pld's loop stop (core/repetition.py) would: at the token where a
    span of its output comes back for the second time."""

    def __init__(self, prompt_tokens: int, config: DecodeConfig) -> None:
        self.prompt_tokens, self.loops = prompt_tokens, LoopStop(config.loop_span)
        self.seen = 0  # output tokens already fed to the stop

    def __call__(self, input_ids: torch.Tensor, scores, **kwargs) -> torch.Tensor:
        new = input_ids[0, self.prompt_tokens + self.seen :].tolist()
        self.seen += len(new)
        stop = self.loops.extend(new) is not None
        return torch.full((input_ids.shape[0],), stop, dtype=torch.bool, device=input_ids.device)


# A method is one entry: a function (model, prompt ids, config) -> MethodRun.
LOOP_RUNNERS: dict[str, Runner] = {
    "greedy": functools.partial(run_loop, use_pld=False),
    "pld": functools.partial(run_loop, use_pld=True),
    # Fixed-length drafting at transformers' length: what the adaptive policy adds, like for like.
    "pld-fixed": functools.partial(
        run_loop, use_pld=True, draft="fixed", num_draft=HF_LOOKUP_TOKENS
    ),
}
RUNNERS: dict[str, Runner] = LOOP_RUNNERS | {
    "hf-pld": functools.partial(run_hf_generate, lookup=HF_LOOKUP_TOKENS),
    "hf-greedy": run_hf_generate,
}


def runner(method: str, server: Engine | None = None) -> Runner | None:
    """The runner of a method name such as `pld` or `greedy@dynamic`; None if there is none."""
    if method == "server":
        return None if server is None else functools.partial(run_engine, engine=server)
    base, _, name = method.partition("@")
    if not name:
        return RUNNERS.get(base)
    if base in LOOP_RUNNERS and name in RUNTIME_NAMES:
        return functools.partial(LOOP_RUNNERS[base], runtime_name=RuntimeName(name))
    return None
