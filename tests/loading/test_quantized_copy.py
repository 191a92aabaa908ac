"""The quantized copy in the cache: a second load reads it instead of quantizing, and gives the
same logits; a damaged copy, a changed checkpoint or a cache that cannot be written are not
errors."""

import pytest
import torch
from safetensors.torch import load_file, save_file
from transformers import AutoTokenizer, LlamaForCausalLM

import pld_cli.loading.models as models
from pld_cli.loading.checkpoint import Checkpoint
from pld_cli.loading.models import ModelSpec, load_model
from pld_cli.loading.quantized_copy import copy_path, load_copy, save_aligned
from pld_cli.runtime.native.runtime import NativeRuntime

IDS = list(range(3, 40))


@pytest.fixture
def model_dir(tmp_path, tiny_model_dir):
    folder = tmp_path / "model"
    LlamaForCausalLM.from_pretrained(tiny_model_dir).save_pretrained(folder)
    AutoTokenizer.from_pretrained(tiny_model_dir).save_pretrained(folder)
    return folder


def logits(folder, scheme) -> torch.Tensor:
    loaded = load_model(ModelSpec(name=str(folder), device="cpu", quantize=scheme))
    return NativeRuntime(loaded.model, 64).run(IDS, keep=len(IDS))


def copy_of(folder, scheme):
    return copy_path(Checkpoint(folder), scheme, torch.float32)


def never_quantize(monkeypatch):
    def fail(*_):
        raise AssertionError("quantized again")

    monkeypatch.setattr(models, "quantize_model", fail)


@pytest.mark.parametrize("scheme", ["int8", "int4"])
def test_a_second_load_reads_the_copy(model_dir, monkeypatch, scheme):
    first = logits(model_dir, scheme)
    assert copy_of(model_dir, scheme).is_file()
    never_quantize(monkeypatch)
    assert torch.equal(logits(model_dir, scheme), first)


def test_a_damaged_copy_is_made_again(model_dir):
    first = logits(model_dir, "int8")
    copy = copy_of(model_dir, "int8")
    copy.write_bytes(copy.read_bytes()[:1000])
    assert torch.equal(logits(model_dir, "int8"), first)
    assert copy.stat().st_size > 1000


def test_a_changed_checkpoint_is_quantized_again(model_dir, tiny_model_dir):
    before = logits(model_dir, "int8")
    other = LlamaForCausalLM.from_pretrained(tiny_model_dir)
    with torch.no_grad():
        other.model.layers[0].mlp.down_proj.weight.mul_(2)
    other.save_pretrained(model_dir)
    assert not torch.equal(logits(model_dir, "int8"), before)


def test_a_cache_that_cannot_be_written_costs_nothing_but_time(model_dir, monkeypatch, tmp_path):
    blocked = tmp_path / "blocked"
    blocked.write_text("a file where the cache folder would be")
    monkeypatch.setattr("pld_cli.loading.quantized_copy.cache_dir", lambda: blocked)
    assert logits(model_dir, "int8").shape[0] == len(IDS)


def test_every_tensor_read_back_starts_on_a_64_byte_boundary(tmp_path):
    # Odd sizes put the tensors after the first at offsets in the file off any 64-byte boundary.
    state = {f"t{i}": torch.full((size,), i, dtype=torch.int8) for i, size in enumerate([3, 5, 7])}
    path = tmp_path / "copy.safetensors"
    save_file(state, path)
    assert {t.data_ptr() % 64 for t in load_file(path).values()} != {0}  # as safetensors gives them
    loaded = load_copy(path)
    assert all(t.data_ptr() % 64 == 0 for t in loaded.values())
    assert all(torch.equal(loaded[name], state[name]) for name in state)


@pytest.mark.parametrize("size", range(1, 9))  # header lengths differ with the names' lengths
def test_a_copy_is_written_so_its_tensors_are_read_in_place(tmp_path, size):
    state = {"n" * size: torch.ones(16), "values": torch.ones(64, dtype=torch.uint8)}
    path = tmp_path / "copy.safetensors"
    save_aligned(state, str(path))
    assert all(t.data_ptr() % 64 == 0 for t in load_file(path).values())  # no copy needed
