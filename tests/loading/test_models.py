"""What the loading line, the bench and --json say the weights are: the format that runs."""

from pathlib import Path

from pld_cli.loading.gguf import default_gguf, gguf_type
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
