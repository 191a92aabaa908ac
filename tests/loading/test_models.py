"""What the loading line, the bench and --json say the weights are: the format that runs."""

import os
from pathlib import Path

import pytest

from pld_cli.errors import PldError
from pld_cli.loading.gguf import default_gguf, gguf_metadata, gguf_type
from pld_cli.loading.models import ModelSpec, gguf_file, load_model, weights_label
from pld_cli.runtime.native.quantized.scheme import Scheme


def test_the_default_models_gguf_declares_its_own_type():
    assert gguf_type(default_gguf()) == "Q4_1"
    assert gguf_file(ModelSpec()) == default_gguf()


def test_a_file_that_is_no_gguf_is_labelled_plainly(tmp_path):
    junk = tmp_path / "junk.gguf"
    junk.write_bytes(b"not a gguf")
    assert gguf_type(junk) == "GGUF"


def test_the_label_names_the_quantized_format_that_runs_here():
    int8 = "int8 in groups of 32"  # on every machine: no other format stands in for it
    assert weights_label(None, "float32", None) == "float32"
    assert weights_label(Scheme.INT8, "float32", None) == int8
    assert weights_label(Scheme.INT4, "float32", default_gguf()) == (
        "int4 in groups of 32 from a Q4_1 GGUF"
    )


def test_the_loading_line_says_int8_when_int8_runs(tiny_model_dir):
    lines = []
    loaded = load_model(ModelSpec(tiny_model_dir, device="cpu", quantize="int8"), lines.append)
    assert loaded.weights.startswith("int8") and "float32" not in lines[0]
    assert lines[0] == f"loading {tiny_model_dir} (cpu, {loaded.weights})"
    assert Path(tiny_model_dir).is_dir()


def test_a_gguf_runs_its_own_blocks_and_writes_no_float_copy(tmp_path, monkeypatch):
    monkeypatch.setenv("PLD_CACHE_DIR", str(tmp_path))
    lines = []
    loaded = load_model(ModelSpec(device="cpu"), lines.append)
    assert lines == ["loading SmolLM2-135M-Instruct (cpu, the Q4_1 GGUF's own blocks)"]
    assert weights_label(Scheme.GGUF, "float32", default_gguf()) == loaded.weights
    written = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert not [p for p in written if p.suffix in (".safetensors", ".bin")]
    assert sum(p.stat().st_size for p in written) < 20 * 2**20  # config and tokenizer only


def test_gguf_asked_of_a_float_checkpoint_is_refused_in_a_line(tiny_model_dir):
    with pytest.raises(PldError, match="--quantize gguf: -m must name a .gguf file"):
        load_model(ModelSpec(tiny_model_dir, device="cpu", quantize=Scheme.GGUF))


def test_a_newer_copy_of_the_same_gguf_replaces_the_old_one(tmp_path, monkeypatch):
    monkeypatch.setenv("PLD_CACHE_DIR", str(tmp_path / "cache"))
    path = tmp_path / "model.gguf"
    path.write_bytes(default_gguf().read_bytes())
    first = gguf_metadata(path)
    os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 10**9))
    second = gguf_metadata(path)
    assert second != first and second.is_dir() and not first.exists()
