"""Quantized loads read the checkpoint one block at a time: the same weights as loading the whole
model and quantizing it, with no block's float weights alive while another is read; checkpoints
that cannot be read that way still load."""

import pytest
import torch
from conftest import tiny_llama
from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaConfig, LlamaForCausalLM

import pld_cli.runtime.native.quantized.quantize as quantized
from pld_cli.loading.checkpoint import Checkpoint, Unreadable, empty_model, materializer
from pld_cli.loading.models import ModelSpec, load_model
from pld_cli.runtime.native.runtime import NativeRuntime

IDS = list(range(3, 40))


def saved(folder, model, tokenizer_dir, **save) -> str:
    model.save_pretrained(folder, **save)
    AutoTokenizer.from_pretrained(tokenizer_dir).save_pretrained(folder)
    return str(folder)


def logits(model) -> torch.Tensor:
    return NativeRuntime(model, 64).run(IDS, keep=len(IDS))


def whole_then_quantized(folder: str, scheme: str) -> torch.nn.Module:
    model = LlamaForCausalLM.from_pretrained(folder).eval()
    quantized.quantize_model(model, scheme)
    return model


@pytest.mark.parametrize("scheme", ["int8", "int4"])
@pytest.mark.parametrize("tied", [False, True], ids=["untied", "tied"])
def test_block_by_block_equals_whole_then_quantized(
    tmp_path, tiny_model_dir, monkeypatch, scheme, tied
):
    source = LlamaForCausalLM.from_pretrained(tiny_model_dir, tie_word_embeddings=tied)
    # Shards of a few tensors each: the index file and tensors spread over many files.
    folder = saved(tmp_path, source, tiny_model_dir, max_shard_size="200KB")
    assert Checkpoint(tmp_path).files.keys() >= {"model.layers.1.mlp.down_proj.weight"}
    assert len(set(Checkpoint(tmp_path).files.values())) > 2
    with monkeypatch.context() as patch:  # the model is never loaded whole
        patch.setattr(AutoModelForCausalLM, "from_pretrained", None)
        loaded = load_model(ModelSpec(name=folder, device="cpu", quantize=scheme))
    assert loaded.model.device.type == "cpu"
    assert loaded.model.generation_config.eos_token_id == source.generation_config.eos_token_id
    assert torch.equal(logits(loaded.model), logits(whole_then_quantized(folder, scheme)))


def test_a_block_is_read_only_after_the_previous_one_is_freed(tmp_path, tiny_model_dir):
    saved(tmp_path, tiny_llama(1), tiny_model_dir)
    model = empty_model(tmp_path, trust_remote_code=False)
    read = materializer(model, Checkpoint(tmp_path))
    float_bytes_seen = []

    def materialize(module):
        live = [p for p in model.parameters() if p.device.type == "cpu" and p.dim() == 2]
        float_bytes_seen.append(sum(p.nbytes for p in live))
        read(module)

    quantized.quantize_model(model, "int8", materialize)
    assert float_bytes_seen[:3] == [0, 0, 0]  # blocks 0 and 1, then the embedding
    assert float_bytes_seen[3] > 0  # the embedding's own, until the head is quantized


def test_a_checkpoint_without_safetensors_loads_whole(tmp_path, tiny_model_dir):
    model = tiny_llama(2)
    model.config.save_pretrained(tmp_path)
    torch.save(model.state_dict(), tmp_path / "pytorch_model.bin")
    AutoTokenizer.from_pretrained(tiny_model_dir).save_pretrained(tmp_path)
    folder = str(tmp_path)
    with pytest.raises(Unreadable):
        Checkpoint(tmp_path)
    loaded = load_model(ModelSpec(name=folder, device="cpu", quantize="int8"))
    assert torch.equal(logits(loaded.model), logits(whole_then_quantized(folder, "int8")))


def test_a_tensor_the_model_names_otherwise_is_unreadable(tmp_path, tiny_model_dir):
    config = LlamaConfig.from_pretrained(tiny_model_dir)
    saved(tmp_path, LlamaForCausalLM(config), tiny_model_dir)
    with pytest.raises(Unreadable, match="renames"):
        Checkpoint(tmp_path).read("model.layers.0.not_a_weight")
