"""Every option of pld's commands, declared once.

The options edit, summarize and bench share are the fields of `Settings` (and `Drafting` and
`Display` for the two that print a result); `with_options` adds them to a command's parameters, so
typer validates and lists them, and hands the command one `Settings` object instead of twenty
arguments. Defaults come from the core's configs; choices are enums. Nothing here imports torch or
transformers: `pld --help` reads this module and no model library.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import typing
from collections.abc import Callable
from enum import Enum
from typing import Annotated

import typer

from pld_cli.core.config import DecodeConfig, SamplingConfig
from pld_cli.errors import ExitStatus, PldError
from pld_cli.runtime.names import RuntimeName
from pld_cli.runtime.native.quantized.scheme import Scheme

MODEL, SERVER, DECODING, SAMPLING, DISPLAY = "Model", "Server", "Decoding", "Sampling", "Display"
NO_PROMPT_CACHE_HELP = (
    "Neither read nor keep prompts' keys and values in the user cache (kept, a second run on "
    "the same file prefills only what differs, its output bit for bit the same)."
)


class Dtype(str, Enum):
    AUTO = "auto"
    FLOAT32 = "float32"
    BFLOAT16 = "bfloat16"
    FLOAT16 = "float16"


# The command line's choices: a scheme or a runtime name, or what pld picks (auto, none).
Quantize = Enum("Quantize", {c.upper(): c for c in ("auto", "none", *Scheme)}, type=str)
RuntimeChoice = Enum("RuntimeChoice", {c.upper(): c for c in ("auto", *RuntimeName)}, type=str)


class DraftMode(str, Enum):
    ADAPTIVE = "adaptive"
    FIXED = "fixed"


def option(*names: str, panel: str, help: str, **kwargs) -> typer.models.OptionInfo:
    return typer.Option(*names, help=help, rich_help_panel=panel, **kwargs)


# Help too long for one line: its first sentence (or clause) is the option's line under -h
# (brief.py), the whole text shows under --help.
RUNTIME_HELP = (
    "Which forward runs the model. native: pld's own Llama-family forward; static: transformers' "
    "forward on a preallocated KV cache (both with CUDA graphs on CUDA); dynamic: transformers' "
    "growing cache; auto: native where the model is covered, else static where the model allows, "
    "else dynamic."
)
QUANTIZE_HELP = (
    "Weights for pld's own forward (CPU). gguf: a GGUF's own blocks, each type held exactly in "
    "pld's C kernels (4-bit types stay 4 bits); int8 or int4 in groups of 32: quantized at load "
    "(once: the copy is cached); pld's output still equals --no-pld's. auto: a GGUF's own blocks, "
    "a float checkpoint as float; float on a GPU. Never chosen from free memory: a model that does "
    "not fit is refused."
)
SERVER_HELP = (
    "Decode on an OpenAI-compatible server (vLLM: its batching and n-gram drafting) instead of on "
    "this machine; -m then names the served model (default: the first it lists)."
)
JOBS_HELP = (
    "Documents decoded at once (files, and chunks of long ones): on this machine each pass "
    "shares the weights among them, each output exactly as alone; with --server, calls in "
    "flight that the server batches."
)
TOKENIZER_HELP = (
    "With --server: the served model's tokenizer (a folder or hub id; default: the model's path "
    "on the server if it is on this machine, else the served name)."
)
TOKEN_TIMEOUT_HELP = (
    "With --server: seconds a stream may stay silent after its first token, even while the "
    "server reports itself healthy (a stalled engine); raise it for a server that may hold a "
    "started answer back (preempted under load)."
)
NUM_DRAFT_HELP = (
    "Most draft tokens verified per pass (adaptive drafting verifies fewer when they do not pay)."
)
DRAFT_HELP = (
    "How many draft tokens to verify each pass. adaptive: as many as pay off under measured pass "
    "costs; fixed: always up to --num-draft."
)
CHUNK_TOKENS_HELP = (
    "Cut documents over this many tokens into parts (long documents are cut anyway where they "
    "exceed the context)."
)
REPETITION_PENALTY_HELP = (
    "Penalize tokens already in the text. Their scores are divided by this, as in transformers' "
    "generate (1 is off; default: the model's generation_config, else 1)."
)
ALLOW_REPETITION_HELP = (
    "Let a summary go on when it repeats itself (by default it stops at a "
    f"{DecodeConfig.loop_span}-token span's second repeat)."
)
SEED_HELP = (
    "Random seed: the same seed and settings give the same text, with or without drafting "
    "(default: a fresh one, shown by --json and --stats)."
)
VERBOSE_HELP = (
    "More detail on stderr (which runtime runs and why, each pass's draft length and why; library "
    "warnings)."
)


@dataclasses.dataclass(frozen=True)
class ModelChoice:
    """Which model runs on this machine and how: the options every command takes first (and
    all that `pld serve` shares with edit, summarize and bench)."""

    model: Annotated[
        str | None,
        option(
            "-m",
            "--model",
            panel=MODEL,
            envvar="PLD_MODEL",
            show_default=False,
            help="Hub id, local folder or .gguf file (default: the embedded SmolLM2-135M-Instruct)",
        ),
    ] = None
    revision: Annotated[str | None, option(panel=MODEL, help="Hub revision.")] = None
    device: Annotated[str, option(panel=MODEL, help="auto | cpu | cuda | cuda:N")] = "auto"
    dtype: Annotated[
        Dtype, option(panel=MODEL, help="auto: bfloat16 on CUDA, float32 on a CPU.")
    ] = Dtype.AUTO
    runtime: Annotated[RuntimeChoice, option(panel=MODEL, help=RUNTIME_HELP)] = RuntimeChoice.AUTO
    quantize: Annotated[Quantize, option(panel=MODEL, help=QUANTIZE_HELP)] = Quantize.AUTO
    trust_remote_code: Annotated[
        bool, option(panel=MODEL, help="Allow the model's own code from the hub.")
    ] = False

    def model_spec(self):  # -> ModelSpec; its module imports torch, so only when a command runs
        from pld_cli.loading.models import ModelSpec

        return ModelSpec(
            self.model,
            self.revision,
            self.device,
            self.dtype.value,
            self.trust_remote_code,
            None if self.runtime.value == "auto" else RuntimeName(self.runtime.value),
            self.quantize.value
            if self.quantize.value in ("auto", "none")
            else Scheme(self.quantize.value),
        )


@dataclasses.dataclass(frozen=True)
class Settings(ModelChoice):
    """The model and decoding options every command takes, with their one set of defaults."""

    server: Annotated[
        str | None,
        option("--server", panel=SERVER, envvar="PLD_SERVER", show_default=False, help=SERVER_HELP),
    ] = None
    api_key: Annotated[
        str | None,
        option(
            "--api-key",
            panel=SERVER,
            envvar="OPENAI_API_KEY",
            show_default=False,
            show_envvar=True,
            help="The server's API key (if it wants one).",
        ),
    ] = dataclasses.field(default=None, repr=False)
    jobs: Annotated[int, option("-j", "--jobs", min=1, panel=DECODING, help=JOBS_HELP)] = 1
    no_prompt_cache: Annotated[
        bool, option("--no-prompt-cache", panel=DECODING, help=NO_PROMPT_CACHE_HELP)
    ] = False
    tokenizer: Annotated[
        str | None, option(panel=SERVER, show_default=False, help=TOKENIZER_HELP)
    ] = None
    timeout: Annotated[
        float,
        option(min=1.0, panel=SERVER, help="With --server: seconds to wait for its next word."),
    ] = 600.0
    token_timeout: Annotated[float, option(min=1.0, panel=SERVER, help=TOKEN_TIMEOUT_HELP)] = 60.0
    max_new_tokens: Annotated[
        int, option(min=1, panel=DECODING, help="Most tokens to generate.")
    ] = DecodeConfig.max_new_tokens
    ngram_max: Annotated[int, option(min=1, panel=DECODING, help="Longest n-gram to match.")] = (
        DecodeConfig.ngram_max
    )
    ngram_min: Annotated[int, option(min=1, panel=DECODING, help="Shortest n-gram to match.")] = (
        DecodeConfig.ngram_min
    )
    num_draft: Annotated[int, option(min=0, panel=DECODING, help=NUM_DRAFT_HELP)] = (
        DecodeConfig.num_draft
    )
    draft: Annotated[
        DraftMode,
        option(panel=DECODING, help=DRAFT_HELP),
    ] = DraftMode(DecodeConfig.draft)
    chunk_tokens: Annotated[
        int | None, option(min=1, panel=DECODING, show_default=False, help=CHUNK_TOKENS_HELP)
    ] = None
    repetition_penalty: Annotated[
        float | None,
        option(min=0.0, panel=DECODING, show_default=False, help=REPETITION_PENALTY_HELP),
    ] = None
    allow_repetition: Annotated[
        bool, option("--allow-repetition", panel=DECODING, help=ALLOW_REPETITION_HELP)
    ] = False
    temperature: Annotated[
        float, option(min=0.0, panel=SAMPLING, help="Sampling temperature (0 decodes greedily).")
    ] = SamplingConfig.temperature
    top_p: Annotated[
        float, option(min=0.0, max=1.0, panel=SAMPLING, help="Nucleus sampling mass (above 0).")
    ] = SamplingConfig.top_p
    top_k: Annotated[
        int, option(min=0, panel=SAMPLING, help="Sample among the k likeliest (0: all).")
    ] = SamplingConfig.top_k
    seed: Annotated[
        int | None,
        option(panel=SAMPLING, help=SEED_HELP),
    ] = SamplingConfig.seed
    quiet: Annotated[
        bool, option("-q", "--quiet", panel=DISPLAY, help="Nothing on stderr but errors.")
    ] = False
    verbose: Annotated[bool, option("--verbose", panel=DISPLAY, help=VERBOSE_HELP)] = False
    debug: Annotated[
        bool, option("--debug", panel=DISPLAY, help="Show the traceback of any error.")
    ] = False

    def __post_init__(self) -> None:
        if self.ngram_min > self.ngram_max:
            raise PldError("--ngram-min must not exceed --ngram-max", code=ExitStatus.USAGE)
        if self.top_p <= 0:
            raise PldError("--top-p must be above 0", code=ExitStatus.USAGE)
        if self.repetition_penalty is not None and self.repetition_penalty <= 0:
            raise PldError("--repetition-penalty must be above 0", code=ExitStatus.USAGE)

    def seeded(self, seed: int) -> Settings:
        """These settings with `seed` where sampling was asked for without --seed: one seed for
        the whole run (its --compare twin too), shown by --json and --stats."""
        if self.temperature > 0 and self.seed is None:
            return dataclasses.replace(self, seed=seed)
        return self

    def decode_config(
        self, use_pld: bool = True, model_penalty: float | None = None
    ) -> DecodeConfig:
        """The loop's settings; model_penalty is the model's own repetition penalty, if any.
        The loop stop is on unless --allow-repetition (DecodeConfig.for_task keeps it to
        summaries)."""
        sampling = SamplingConfig(self.temperature, self.top_p, self.top_k, self.seed)
        penalty = self.repetition_penalty or model_penalty or 1.0  # None: not set
        return DecodeConfig(
            max_new_tokens=self.max_new_tokens,
            num_draft=self.num_draft,
            ngram_max=self.ngram_max,
            ngram_min=self.ngram_min,
            use_pld=use_pld,
            draft=self.draft.value,
            sampling=sampling,
            repetition_penalty=penalty,
            stop_loops=not self.allow_repetition,
        )


@dataclasses.dataclass(frozen=True)
class Drafting:
    """Whether edit and summarize draft at all (the bench compares methods instead)."""

    no_pld: Annotated[
        bool, option("--no-pld", panel=DECODING, help="Plain decoding through the same loop.")
    ] = False


@dataclasses.dataclass(frozen=True)
class Display:
    """What edit and summarize print besides the result."""

    live: Annotated[bool, option(panel=DISPLAY, help="Live view on a terminal.")] = True
    stats: Annotated[
        bool, option("--stats", panel=DISPLAY, help="A stats table on stderr at the end.")
    ] = False
    compare: Annotated[
        bool,
        option(
            "--compare",
            panel=DISPLAY,
            help="Also decode without drafting; report the measured speedup.",
        ),
    ] = False
    json: Annotated[
        bool, option("--json", panel=DISPLAY, help="One JSON object on stdout instead of text.")
    ] = False


def with_options(**defaults) -> Callable[[Callable], Callable]:
    """Give a command the fields of each dataclass parameter (`settings: Settings`) as options,
    with `defaults` replacing the shared ones, and call it with one instance per dataclass."""

    def decorate(command: Callable) -> Callable:
        hints = typing.get_type_hints(command, include_extras=True)
        params, groups = [], {}
        for param in inspect.signature(command).parameters.values():
            hint = hints[param.name]
            if dataclasses.is_dataclass(hint):
                groups[param.name] = hint
                params += group_parameters(hint, defaults)
            else:
                params.append(param.replace(annotation=hint))

        @functools.wraps(command)
        def run(**kwargs):
            for name, group in groups.items():
                values = {f.name: kwargs.pop(f.name) for f in dataclasses.fields(group)}
                kwargs[name] = group(**values)
            return command(**kwargs)

        run.__signature__ = inspect.Signature(params)
        run.__annotations__ = {p.name: p.annotation for p in params}
        return run

    return decorate


def group_parameters(group: type, defaults: dict) -> list[inspect.Parameter]:
    hints = typing.get_type_hints(group, include_extras=True)
    return [
        inspect.Parameter(
            field.name,
            inspect.Parameter.KEYWORD_ONLY,
            default=defaults.get(field.name, field.default),
            annotation=hints[field.name],
        )
        for field in dataclasses.fields(group)
    ]
