"""Command-line options shared by pld's commands, declared once and turned into core configs."""

from __future__ import annotations

import dataclasses
from typing import Annotated

import typer

from pld_cli.cli.render import Ui
from pld_cli.core.decode import DecodeConfig
from pld_cli.core.sampling import SamplingConfig
from pld_cli.errors import PldError
from pld_cli.runtime.choice import KINDS
from pld_cli.tasks.models import ModelSpec

MODEL = "Model"
DECODING = "Decoding"
DISPLAY = "Display"
ModelOpt = Annotated[
    str | None,
    typer.Option(
        "-m",
        "--model",
        help="Hub id, local folder or .gguf file [default: embedded SmolLM2-135M-Instruct]",
        rich_help_panel=MODEL,
    ),
]
RevisionOpt = Annotated[str | None, typer.Option(help="Hub revision.", rich_help_panel=MODEL)]
DeviceOpt = Annotated[str, typer.Option(help="auto | cpu | cuda | cuda:N", rich_help_panel=MODEL)]
DtypeOpt = Annotated[
    str, typer.Option(help="auto | float32 | bfloat16 | float16", rich_help_panel=MODEL)
]
RuntimeOpt = Annotated[
    str,
    typer.Option(
        help="auto | native | static | dynamic: native is pld's own Llama-family forward, static "
        "preallocates the KV cache (CUDA graphs on CUDA); auto uses native on a CPU where the "
        "model is covered, else static where the model allows.",
        rich_help_panel=MODEL,
    ),
]
RemoteCodeOpt = Annotated[
    bool, typer.Option(help="Allow the model's own code from the hub.", rich_help_panel=MODEL)
]
MaxNewOpt = Annotated[
    int, typer.Option(min=1, help="Most tokens to generate.", rich_help_panel=DECODING)
]
NgramMaxOpt = Annotated[
    int, typer.Option(min=1, help="Longest n-gram to match.", rich_help_panel=DECODING)
]
NgramMinOpt = Annotated[
    int, typer.Option(min=1, help="Shortest n-gram to match.", rich_help_panel=DECODING)
]
NumDraftOpt = Annotated[
    int,
    typer.Option(
        min=0,
        help="Most draft tokens verified per pass (adaptive drafting verifies fewer when they "
        "do not pay).",
        rich_help_panel=DECODING,
    ),
]
DraftOpt = Annotated[
    str,
    typer.Option(
        help="adaptive: verify as many draft tokens as pay off under measured pass costs; "
        "fixed: always up to --num-draft.",
        rich_help_panel=DECODING,
    ),
]
SAMPLING = "Sampling"
TemperatureOpt = Annotated[
    float, typer.Option(min=0.0, help="0 decodes greedily.", rich_help_panel=SAMPLING)
]
TopPOpt = Annotated[
    float,
    typer.Option(min=0.0, max=1.0, help="Nucleus sampling mass (above 0).",
                 rich_help_panel=SAMPLING),
]  # fmt: skip
TopKOpt = Annotated[
    int,
    typer.Option(min=0, help="Sample among the k likeliest (0: all).", rich_help_panel=SAMPLING),
]
SeedOpt = Annotated[
    int | None,
    typer.Option(help="Random seed: the same seed and settings give the same text.",
                 rich_help_panel=SAMPLING),
]  # fmt: skip
NoPldOpt = Annotated[
    bool,
    typer.Option("--no-pld", help="Plain greedy decoding, no drafting.", rich_help_panel=DECODING),
]
LiveOpt = Annotated[bool, typer.Option(help="Live view on a terminal.", rich_help_panel=DISPLAY)]
QuietOpt = Annotated[
    bool,
    typer.Option("-q", "--quiet", help="Nothing on stderr but errors.", rich_help_panel=DISPLAY),
]
StatsOpt = Annotated[
    bool,
    typer.Option("--stats", help="A stats table on stderr at the end.", rich_help_panel=DISPLAY),
]
CompareOpt = Annotated[
    bool,
    typer.Option(
        "--compare",
        help="Also decode without drafting; report the measured speedup.",
        rich_help_panel=DISPLAY,
    ),
]
JsonOpt = Annotated[
    bool,
    typer.Option(
        "--json", help="One JSON object on stdout instead of text.", rich_help_panel=DISPLAY
    ),
]
VerboseOpt = Annotated[
    bool, typer.Option("--verbose", help="Library warnings on stderr.", rich_help_panel=DISPLAY)
]


@dataclasses.dataclass(frozen=True)
class Options:
    model: ModelSpec
    decode: DecodeConfig
    ui: Ui
    stats: bool
    compare: bool
    json: bool


def model_spec(params: dict) -> ModelSpec:
    if params["runtime"] not in KINDS:
        raise PldError(f"--runtime {params['runtime']}: expected {', '.join(KINDS)}", code=2)
    return ModelSpec(
        params["model"],
        params["revision"],
        params["device"],
        params["dtype"],
        params["trust_remote_code"],
        params["runtime"],
    )


def decode_config(params: dict) -> DecodeConfig:
    if params["ngram_min"] > params["ngram_max"]:
        raise PldError("--ngram-min must not exceed --ngram-max", code=2)
    if params["top_p"] <= 0:
        raise PldError("--top-p must be above 0", code=2)
    if params["draft"] not in ("adaptive", "fixed"):
        raise PldError(f"--draft {params['draft']}: expected adaptive or fixed", code=2)
    return DecodeConfig(
        max_new_tokens=params["max_new_tokens"],
        num_draft=params["num_draft"],
        ngram_max=params["ngram_max"],
        ngram_min=params["ngram_min"],
        use_pld=not params.get("no_pld", False),
        draft=params["draft"],
        sampling=SamplingConfig(
            params["temperature"], params["top_p"], params["top_k"], params["seed"]
        ),
    )


def options(params: dict) -> Options:
    """The options edit and summarize share, from a command's parameters (its locals())."""
    return Options(
        model=model_spec(params),
        decode=decode_config(params),
        ui=Ui(quiet=params["quiet"], live=params["live"], verbose=params["verbose"]),
        stats=params["stats"],
        compare=params["compare"],
        json=params["json_out"],
    )
