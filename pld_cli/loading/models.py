"""Loading models: a hub id, a local folder or a .gguf file (gguf.py), or the default model."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedModel

from pld_cli.errors import ExitStatus, PldError, Unsupported
from pld_cli.loading.checkpoint import (
    Checkpoint,
    Unreadable,
    checkpoint_folder,
    empty_model,
    materializer,
)
from pld_cli.loading.fit import Choice, auto_choice, available_memory, oversize, refusal
from pld_cli.loading.gguf import (
    DEFAULT_MODEL,
    converted_gguf,
    default_gguf,
    gguf_metadata,
    gguf_type,
)
from pld_cli.loading.gguf_weights import blocks_refusal, gguf_weights, weights_bytes
from pld_cli.loading.quantized_copy import copy_path, load_copy, save_copy
from pld_cli.loading.sources import check_source
from pld_cli.runtime.clib import library
from pld_cli.runtime.names import RuntimeName
from pld_cli.runtime.native.quantized.quantize import layout, quantize_model
from pld_cli.runtime.native.quantized.scheme import Scheme
from pld_cli.runtime.native.quantized.state import restore
from pld_cli.runtime.opening import RuntimePool

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


@dataclass(frozen=True)
class ModelSpec:
    name: str | None = None  # hub id, folder or .gguf; None for the default model
    revision: str | None = None
    device: str = "auto"  # auto | cpu | cuda | cuda:N
    dtype: str = "auto"  # auto | float32 | bfloat16 | float16
    trust_remote_code: bool = False
    runtime: RuntimeName | None = None  # None: auto (runtime/opening.py)
    quantize: Scheme | Literal["auto", "none"] = "auto"  # runtime/native/quantized/


@dataclass
class LoadedModel:
    model: torch.nn.Module
    tokenizer: object
    name: str
    device: str
    dtype: str
    weights: str  # their format as the user reads it: float32, int8 in groups of 32, ...
    runtimes: RuntimePool  # the model's open runtimes, one per name (runtime/opening.py)
    why: str = ""  # why the weights run in that format (fit.py)

    @property
    def repetition_penalty(self) -> float | None:
        """The model's own repetition penalty (its generation_config), if it has one."""
        return getattr(self.model.generation_config, "repetition_penalty", None)

    @property
    def eos_ids(self) -> frozenset[int]:
        ids = self.model.generation_config.eos_token_id
        ids = [ids] if isinstance(ids, int) else list(ids or [])
        if self.tokenizer.eos_token_id is not None:
            ids.append(self.tokenizer.eos_token_id)
        return frozenset(ids)


def resolve_device(device: str) -> str:
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise PldError(f"--device {device}: CUDA is not available on this machine")
    if device != "cpu" and not device.startswith("cuda"):
        raise PldError(
            f"--device {device}: expected auto, cpu, cuda or cuda:N", code=ExitStatus.USAGE
        )
    return device


def resolve_dtype(dtype: str, device: str) -> str:
    if dtype == "auto":
        return "bfloat16" if device.startswith("cuda") else "float32"
    if dtype not in DTYPES:
        raise PldError(
            f"--dtype {dtype}: expected auto, float32, bfloat16 or float16", code=ExitStatus.USAGE
        )
    return dtype


def load_model(spec: ModelSpec, report: Callable[[str], None] = lambda _: None) -> LoadedModel:
    device = resolve_device(spec.device)
    dtype = resolve_dtype(spec.dtype, device)
    choice = choose_scheme(spec, device)
    if choice.scheme is Scheme.GGUF:
        return gguf_model(spec, device, dtype, choice, report)
    source, name = locate(spec, report)
    check_fits(spec, source, name, choice, dtype)
    scheme = choice.scheme
    weights = weights_label(scheme, dtype, gguf_file(spec))
    report(f"loading {name} ({device}, {weights})")
    placement = {"device_map": "auto"} if device == "cuda" else {"device_map": {"": device}}
    kwargs = dict(revision=spec.revision, trust_remote_code=spec.trust_remote_code)
    tokenizer = from_pretrained(AutoTokenizer, source, **kwargs)
    if scheme is None:
        model = from_pretrained(
            AutoModelForCausalLM, source, dtype=DTYPES[dtype], **placement, **kwargs
        ).eval()
    elif device != "cpu":
        raise PldError(f"--quantize {scheme}: quantized weights run on a CPU only (for now)")
    else:
        try:
            model = quantized_model(source, name, spec, scheme, dtype, report)
        except Unsupported as why:
            raise PldError(f"--quantize {scheme}: {why}") from None
    pool = RuntimePool(model, spec.runtime)
    return LoadedModel(model, tokenizer, name, device, dtype, weights, pool, choice.why)


def gguf_model(
    spec: ModelSpec, device: str, dtype: str, choice: Choice, report: Callable[[str], None]
) -> LoadedModel:
    """A GGUF's own blocks in pld's kernels (gguf_weights.py): its config and tokenizer from the
    cache (read from its metadata once), its weights from the mapped file."""
    path = gguf_file(spec)
    if path is None:
        raise PldError("--quantize gguf: -m must name a .gguf file", code=ExitStatus.USAGE)
    if device != "cpu":
        raise PldError("--quantize gguf: a GGUF's own blocks run on a CPU only (for now)")
    name = DEFAULT_MODEL if spec.name is None else path.name
    label = weights_label(Scheme.GGUF, dtype, path)
    try:
        too_large = oversize(weights_bytes(path), available_memory())
        if too_large is not None:
            raise PldError(f"{name} ({label}): {too_large}")
        report(f"loading {name} ({device}, {label})")
        folder = gguf_metadata(path)
        tokenizer = AutoTokenizer.from_pretrained(folder)
        model = empty_model(folder, spec.trust_remote_code)
        gguf_weights(model, path)
    except Unsupported as why:
        raise PldError(f"{name}: {why}; --quantize none runs it as float32") from None
    except PldError:
        raise
    except Exception as exc:  # noqa: BLE001 - whatever the GGUF reader trips on is the file's fault
        raise PldError(f"{spec.name}: cannot read this GGUF file ({one_line(exc)})") from exc
    pool = RuntimePool(model, spec.runtime)
    return LoadedModel(model, tokenizer, name, device, dtype, label, pool, choice.why)


def weights_label(scheme: Scheme | None, dtype: str, gguf: Path | None) -> str:
    """What the loading line, the bench and --json call the weights: their format here, and the
    GGUF's own type where they came from one."""
    if scheme is Scheme.GGUF:
        return f"the {gguf_type(gguf)} GGUF's own blocks"
    label = dtype if scheme is None else layout(scheme)
    return label if gguf is None else f"{label} from a {gguf_type(gguf)} GGUF"


def quantized_model(
    source: str,
    name: str,
    spec: ModelSpec,
    scheme: Scheme,
    dtype: str,
    report: Callable[[str], None],
) -> PreTrainedModel:
    """The model with quantized weights: its quantized copy from the cache (quantized_copy.py),
    else read and quantized block by block from its checkpoint (checkpoint.py) and the copy
    written, so float32 never holds it whole; else loaded whole, then quantized."""
    try:
        checkpoint = Checkpoint(checkpoint_folder(source, spec.revision), DTYPES[dtype])
        model = empty_model(checkpoint.folder, spec.trust_remote_code)
        path = copy_path(checkpoint, scheme, DTYPES[dtype])
        state = load_copy(path)
        if state is not None:
            restore(model, state, scheme)
            return model
        report(f"quantizing {name} to {scheme} (once: the copy is cached)")
        save_copy(path, quantize_model(model, scheme, materializer(model, checkpoint)))
        return model
    except Unreadable:
        pass
    report(f"quantizing {name} to {scheme}")
    kwargs = dict(revision=spec.revision, trust_remote_code=spec.trust_remote_code)
    model = from_pretrained(
        AutoModelForCausalLM, source, dtype=DTYPES[dtype], device_map={"": "cpu"}, **kwargs
    ).eval()
    quantize_model(model, scheme)
    return model


def choose_scheme(spec: ModelSpec, device: str) -> Choice:
    """The scheme the weights run in (None: float) and why: as asked, or auto's choice
    (fit.py)."""
    missing = library.unavailable()
    gguf = gguf_file(spec)
    refusal = None if gguf is None else readable_refusal(gguf)
    if spec.quantize == "auto":
        choice = auto_choice(gguf is not None, device, missing, spec.runtime, refusal)
    elif spec.quantize == "none":
        choice = Choice(None, "--quantize none")
    else:
        try:
            choice = Choice(Scheme(spec.quantize), f"--quantize {spec.quantize}")
        except ValueError:
            raise PldError(
                f"--quantize {spec.quantize}: expected auto, none, gguf, int8 or int4",
                code=ExitStatus.USAGE,
            ) from None
    if choice.scheme is not None and missing is not None:
        raise PldError(f"--quantize {choice.scheme}: pld's C kernels are not here ({missing})")
    if choice.scheme is Scheme.GGUF and refusal is not None:
        raise PldError(f"--quantize gguf: {refusal}; --quantize none runs it as float32")
    return choice


def readable_refusal(path: Path) -> str | None:
    """blocks_refusal, where the header can be read (an unreadable file is refused at load)."""
    try:
        return blocks_refusal(path)
    except Exception:  # noqa: BLE001 - the load says what is wrong with the file
        return None


def check_fits(spec: ModelSpec, source: str, name: str, choice: Choice, dtype: str) -> None:
    """PldError, with the figure, where the model would not fit this machine's memory."""
    try:
        parameters = Checkpoint(checkpoint_folder(source, spec.revision)).parameters()
    except Unreadable:
        return  # its size is unknown before loading
    size = DTYPES[dtype].itemsize
    why_not = refusal(parameters, choice.scheme, size, available_memory())
    if why_not is not None:
        raise PldError(f"{name} ({weights_label(choice.scheme, dtype, None)}): {why_not}")


def gguf_file(spec: ModelSpec) -> Path | None:
    """The GGUF file a model spec names (the default model's too), or None."""
    if spec.name is None:
        return default_gguf()
    if check_source(spec.name, spec.revision) != "gguf":
        return None
    return Path(spec.name).expanduser()


def locate(spec: ModelSpec, report: Callable[[str], None]) -> tuple[str, str]:
    """(what to pass to from_pretrained, the name to show) for a model spec."""
    path = gguf_file(spec)
    if spec.name is None:
        return str(converted_gguf(path, report)), DEFAULT_MODEL
    if path is None:
        return spec.name, spec.name
    try:
        return str(converted_gguf(path, report)), path.name
    except Exception as exc:  # noqa: BLE001 - whatever the GGUF reader trips on is the file's fault
        raise PldError(f"{spec.name}: cannot read this GGUF file ({one_line(exc)})") from exc


def from_pretrained(auto_class, source: str, **kwargs):
    """Load from the local cache first; reach the hub only for a model that is not cached."""
    try:
        return auto_class.from_pretrained(source, local_files_only=True, **kwargs)
    except (OSError, ValueError):
        pass
    try:
        return auto_class.from_pretrained(source, **kwargs)
    except (OSError, ValueError) as exc:
        raise PldError(f"cannot load model '{source}': {one_line(exc)}") from exc


def one_line(exc: Exception, limit: int = 300) -> str:
    """A library's message on one line: its lines joined, since the first may stop mid-sentence."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= limit else text[: limit - 1] + "…"
