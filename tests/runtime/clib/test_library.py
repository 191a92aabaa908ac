"""Building pld's C kernels: once per source, compiler and CPU; without them, a reason."""

import pytest

from pld_cli.runtime.clib import library


@pytest.fixture
def fresh(monkeypatch, tmp_path):
    monkeypatch.setattr(library, "cache_dir", lambda: tmp_path)
    monkeypatch.setattr(library, "_why", [])
    library._load.cache_clear()
    yield tmp_path
    library._load.cache_clear()


def test_the_library_is_built_once_and_then_read_from_the_cache(fresh, monkeypatch):
    if library.loaded() is None:
        pytest.skip(library.unavailable())
    built = list((fresh / "kernels").glob("*.so"))
    assert len(built) == 1 and library.unavailable() is None
    stamp = built[0].stat().st_mtime_ns
    library._load.cache_clear()
    assert library.loaded() is not None
    assert built[0].stat().st_mtime_ns == stamp  # not compiled again


def test_a_failing_compiler_leaves_torchs_kernels_and_says_why(fresh, monkeypatch):
    monkeypatch.setenv("CC", "false")
    assert library.loaded() is None
    assert library.unavailable().startswith("not built")
    assert not list((fresh / "kernels").glob("*.so"))


def test_the_kernels_can_be_switched_off(fresh, monkeypatch):
    monkeypatch.setenv("PLD_C_KERNELS", "0")
    assert library.loaded() is None and library.unavailable() == "PLD_C_KERNELS=0"
