"""What a -m value names, told without torch: a path is never taken for a hub id."""

from __future__ import annotations

import pytest

from pld_cli.errors import PldError
from pld_cli.loading.sources import check_source, is_hub_id


@pytest.mark.parametrize("name", ["HuggingFaceTB/SmolLM2-135M-Instruct", "gpt2", "org/m.v1"])
def test_hub_ids(name):
    assert is_hub_id(name)


@pytest.mark.parametrize("name", ["./no/such", "/tmp/nonexistent", "~/m", "a/b/c", "../m", "a/.."])
def test_paths_are_not_hub_ids(name):
    assert not is_hub_id(name)


def test_kinds_of_local_models(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    assert check_source(str(tmp_path)) == "folder"
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF\x03\x00\x00\x00")
    assert check_source(str(gguf)) == "gguf"
    other = tmp_path / "weights.bin"
    other.write_bytes(b"x")
    with pytest.raises(PldError, match="not a model folder or .gguf file"):
        check_source(str(other))
    with pytest.raises(PldError, match="no such model folder or file"):
        check_source(str(tmp_path / "gone.gguf"))
