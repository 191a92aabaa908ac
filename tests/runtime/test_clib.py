"""Building pld's C kernels: once per source, compiler and CPU; without them, a reason."""

import pytest

from pld_cli.runtime import clib


@pytest.fixture
def fresh(monkeypatch, tmp_path):
    monkeypatch.setattr(clib, "cache_dir", lambda: tmp_path)
    monkeypatch.setattr(clib, "_why", [])
    clib._load.cache_clear()
    yield tmp_path
    clib._load.cache_clear()


def test_the_library_is_built_once_and_then_read_from_the_cache(fresh, monkeypatch):
    if clib.library() is None:
        pytest.skip(clib.unavailable())
    built = list((fresh / "kernels").glob("*.so"))
    assert len(built) == 1 and clib.unavailable() is None
    stamp = built[0].stat().st_mtime_ns
    clib._load.cache_clear()
    assert clib.library() is not None
    assert built[0].stat().st_mtime_ns == stamp  # not compiled again


def test_a_failing_compiler_leaves_torchs_kernels_and_says_why(fresh, monkeypatch):
    monkeypatch.setenv("CC", "false")
    assert clib.library() is None
    assert clib.unavailable().startswith("not built")
    assert not list((fresh / "kernels").glob("*.so"))


def test_the_kernels_can_be_switched_off(fresh, monkeypatch):
    monkeypatch.setenv("PLD_C_KERNELS", "0")
    assert clib.library() is None and clib.unavailable() == "PLD_C_KERNELS=0"
