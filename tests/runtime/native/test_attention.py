"""Row-by-row attention: the C kernel gives each row what sdpa over that row's slots gives (within
float rounding), and the same bits whether the row is alone or among the rows of a pass."""

import pytest
import torch

from pld_cli.runtime.clib import library
from pld_cli.runtime.native.attention import attend_rows, row_sdpa

needs_kernel = pytest.mark.skipif(
    library.kernel("attend_rows") is None, reason=f"no C kernel: {library.unavailable()}"
)
HEADS, KV_HEADS, D, SLOTS = 9, 3, 64, 800


def cache(seed: int, d: int = D) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    keys = torch.randn(KV_HEADS, SLOTS, d, generator=generator)
    return keys, torch.randn(KV_HEADS, SLOTS, d, generator=generator)


def queries(rows: int, seed: int = 1, d: int = D) -> torch.Tensor:
    return 2 * torch.randn(HEADS, rows, d, generator=torch.Generator().manual_seed(seed))


@needs_kernel
@pytest.mark.parametrize("end", [1, 9, 255, 256, 257, 260, 700])  # chunk edges: 256 slots
def test_the_kernel_is_sdpa_over_each_rows_own_slots(end):
    keys, values = cache(0)
    rows = min(end, 8)
    query = queries(rows)
    got = attend_rows(query, keys, values, end, 0.125, use_kernel=True)
    first = end - rows + 1
    want = torch.cat(
        [row_sdpa(query[:, i : i + 1], keys, values, first + i, 0.125) for i in range(rows)], 1
    )
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


@needs_kernel
@pytest.mark.parametrize("end", [30, 256, 513, 700])
@pytest.mark.parametrize("d", [64, 128, 32])  # the kernel takes rows four, two and one at a time
def test_a_row_gets_the_same_bits_alone_or_in_a_pass(end, d):
    keys, values = cache(2, d)
    query = queries(25, seed=3, d=d)
    together = attend_rows(query, keys, values, end, 0.125, use_kernel=True)
    first = end - 25 + 1
    for i in range(25):
        alone = attend_rows(query[:, i : i + 1], keys, values, first + i, 0.125, use_kernel=True)
        assert torch.equal(together[:, i : i + 1], alone)


def test_without_the_kernel_rows_run_sdpa_one_by_one():
    keys, values = cache(4)
    query = queries(3)
    got = attend_rows(query, keys, values, 100, 0.125, use_kernel=False)
    assert torch.equal(got[:, 1:2], row_sdpa(query[:, 1:2], keys, values, 99, 0.125))
