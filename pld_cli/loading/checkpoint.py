"""Reading a safetensors checkpoint one module at a time, for quantizing block by block.

`--quantize` must not need the model in float32 first: a 7B model is 28 GB in float32 and fits a
24 GiB machine only quantized. So a quantized load builds the model on the meta device (no memory)
and hands `quantize_model` (runtime/native/quantized/quantize.py) a `materialize(module)` that
reads just that module's tensors, in float32; the block is quantized and its float tensors freed
before the next one is read. Only safetensors checkpoints of a local folder or the local hub cache
are read this way; anything else (`.bin` files, names the model renames at load) is `Unreadable`,
and the caller falls back to an ordinary load.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path

import torch
from safetensors import safe_open
from transformers import AutoConfig, AutoModelForCausalLM, GenerationConfig

INDEX = "model.safetensors.index.json"
SINGLE = "model.safetensors"


class Unreadable(Exception):
    """The checkpoint cannot be read module by module; an ordinary load can still try."""


def checkpoint_folder(source: str, revision: str | None) -> Path:
    """The local folder of a model's files: `source` itself, or its snapshot in the hub cache."""
    if Path(source).is_dir():
        return Path(source)
    try:
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(source, revision=revision, local_files_only=True))
    except Exception as exc:  # noqa: BLE001 - not cached (or not a hub id): an ordinary load decides
        raise Unreadable(f"{source} is not a local folder nor in the hub cache") from exc


class Checkpoint:
    """The tensors of a folder's safetensors files, by name, read one at a time."""

    def __init__(self, folder: Path, dtype: torch.dtype = torch.float32) -> None:
        self.folder, self.dtype = folder, dtype
        if (folder / INDEX).is_file():
            self.files = json.loads((folder / INDEX).read_text())["weight_map"]
        elif (folder / SINGLE).is_file():
            with safe_open(folder / SINGLE, "pt") as handle:
                self.files = dict.fromkeys(handle.keys(), SINGLE)
        else:
            raise Unreadable(f"no safetensors checkpoint in {folder}")
        self.handles: dict[str, object] = {}

    def parameters(self) -> int:
        """How many weights the checkpoint holds (from the files' headers; nothing is read)."""
        total = 0
        for file in set(self.files.values()):
            with safe_open(self.folder / file, "pt") as handle:
                names = [name for name, owner in self.files.items() if owner == file]
                total += sum(math.prod(handle.get_slice(name).get_shape()) for name in names)
        return total

    def __contains__(self, name: str) -> bool:
        return name in self.files

    def read(self, name: str) -> torch.Tensor:
        """One tensor in the dtype asked for, in memory of its own: a tensor safetensors hands
        out shares the file's mapping, and a norm vector kept from it would keep every page of
        the file read so far resident."""
        if name not in self.files:
            raise Unreadable(f"{name} is not in the checkpoint (the model renames its weights)")
        file = self.files[name]
        if file not in self.handles:
            self.handles[file] = safe_open(self.folder / file, "pt")
        return self.handles[file].get_tensor(name).to(self.dtype, copy=True)

    def close(self) -> None:
        self.handles.clear()  # a safe_open handle unmaps its file when dropped


def empty_model(folder: Path, trust_remote_code: bool) -> torch.nn.Module:
    """The folder's model with its weights on the meta device; rotary tables and generation
    config real (neither is in the weights)."""
    config = AutoConfig.from_pretrained(folder, trust_remote_code=trust_remote_code)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config, trust_remote_code=trust_remote_code)
    model.eval()
    rotary = getattr(getattr(model, "model", None), "rotary_emb", None)
    if rotary is not None:
        model.model.rotary_emb = type(rotary)(config=config)
    if (folder / "generation_config.json").is_file():
        model.generation_config = GenerationConfig.from_pretrained(folder)
    return model


def materializer(
    model: torch.nn.Module, checkpoint: Checkpoint
) -> Callable[[torch.nn.Module], None]:
    """materialize(module): the module's parameters read from the checkpoint onto the CPU. A tied
    lm_head absent from the checkpoint becomes the embedding's own parameter."""
    prefixes = {module: name for name, module in model.named_modules()}
    tied = getattr(model.config, "tie_word_embeddings", False)

    def materialize(module: torch.nn.Module) -> None:
        prefix = prefixes[module]
        if module is model.lm_head and tied and "lm_head.weight" not in checkpoint:
            module.weight = model.model.embed_tokens.weight
            return
        for name, _ in list(module.named_parameters()):
            owner_name, _, leaf = name.rpartition(".")
            owner = module.get_submodule(owner_name) if owner_name else module
            tensor = checkpoint.read(f"{prefix}.{name}" if prefix else name)
            owner._parameters[leaf] = torch.nn.Parameter(tensor, requires_grad=False)
        checkpoint.close()  # mapped pages count as the process's memory until unmapped

    return materialize
