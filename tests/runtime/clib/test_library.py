"""pld's C library: built at install for each instruction set, the best one this CPU runs chosen,
one forced by PLD_KERNELS, and a build whose tables differ from pld's refused."""

import ctypes

import pytest

from pld_cli.runtime.clib import library, tables
from pld_cli.runtime.clib.library import Variant


@pytest.fixture
def fresh(monkeypatch):
    """The library chosen anew under the test's environment, and again after it."""
    library._load.cache_clear()
    yield monkeypatch
    library._load.cache_clear()


def test_the_portable_build_exists_and_the_best_runnable_variant_is_chosen(fresh):
    runs = library.runnable()
    assert Variant.PORTABLE in runs and runs == sorted(runs, key=list(Variant).index)
    assert library.variant() is runs[0] and library.unavailable() is None


@pytest.mark.parametrize("variant", list(Variant))
def test_a_variant_can_be_forced_where_the_cpu_runs_it(fresh, variant):
    fresh.setenv("PLD_KERNELS", variant.value)
    if variant in library.runnable():
        assert library.variant() is variant
        assert library.loaded().pld_variant  # the variant's own library, not the portable one
    else:
        assert library.loaded() is None
        assert "not built here or not run by this CPU" in library.unavailable()


def test_the_kernels_can_be_switched_off_and_a_wrong_name_is_named(fresh):
    fresh.setenv("PLD_KERNELS", "off")
    assert library.loaded() is None and library.unavailable() == "PLD_KERNELS=off"
    library._load.cache_clear()
    fresh.setenv("PLD_KERNELS", "sse9")
    assert library.loaded() is None and "PLD_KERNELS=sse9: expected one of" in library.unavailable()


def test_a_build_with_other_tables_is_refused_in_one_line(fresh):
    fresh.setattr(tables, "ABI_VERSION", tables.ABI_VERSION + 1)
    assert library.loaded() is None
    why = library.unavailable()
    assert "is stale" in why and "reinstall pld" in why and "\n" not in why


def test_the_library_reports_the_layout_pld_expects():
    assert tables.layout_mismatch(library._open(Variant.PORTABLE)) is None


def test_a_kernel_given_sizes_it_does_not_take_refuses_them(fresh):
    import torch

    x, out = torch.zeros(2, 40), torch.zeros(2, 8)
    values, scales = torch.zeros(8, 40, dtype=torch.uint8), torch.zeros(8, 3)
    subs = torch.zeros(8, 3, dtype=torch.int8)
    per_group = tables.Scales(scales.data_ptr(), scales.data_ptr(), None, None, 1)
    factored = tables.Scales(*[t.data_ptr() for t in (scales, scales, subs, subs)], 2)
    factored16 = tables.Scales(*[t.data_ptr() for t in (scales, scales, subs, subs)], 16)
    for inputs, group, bits, kept in [
        (40, 32, 8, per_group),  # 40 inputs: not whole groups
        (40, 16, 4, per_group),
        (32, 8, 8, per_group),  # groups of 8 or 2 bits: no such layout
        (32, 32, 2, per_group),
        (48, 16, 8, factored),  # a factor per 2 groups of 16: not per 256 inputs
        (272, 16, 8, factored16),  # 272 inputs: not whole blocks of 256
    ]:
        matrix = tables.Matrix(values.data_ptr(), kept, None, None, 8, inputs, group, bits)
        code = library.kernel("grouped_mm")(x.data_ptr(), 2, ctypes.byref(matrix), out.data_ptr())
        assert code == library.WRONG_SIZES
    query = torch.zeros(1, 1, 24)
    code = library.kernel("attend_rows")(
        query.data_ptr(),
        query.data_ptr(),
        query.data_ptr(),
        1,
        1,
        1,
        24,
        1,
        1,
        1.0,
        query.data_ptr(),
    )  # head_dim 24: not a multiple of 16
    assert code == library.WRONG_SIZES
