"""The quantized head: its argmax is the grouped matrix's wherever the int8 kernel's is not, the
logits it recomputes are the grouped matrix's, a row's logits do not depend on the pass, and
grouped rows hold a Q8_0 matrix exactly."""

import torch

from pld_cli.runtime.native.quantized.head import GroupedRows, QuantizedHead
from pld_cli.runtime.native.quantized.matrices import Int8Matrix


def heavy_weight(seed: int, out: int = 512, inputs: int = 64) -> torch.Tensor:
    """Rows with a few large weights, so a step per row is coarse beside a step per group."""
    generator = torch.Generator().manual_seed(seed)
    weight = torch.randn(out, inputs, generator=generator)
    return weight * torch.rand(out, inputs, generator=generator).pow(8) * 10


def rows(seed: int, m: int = 2000, inputs: int = 64) -> torch.Tensor:
    return torch.randn(m, inputs, generator=torch.Generator().manual_seed(seed)) * 3


def test_the_heads_argmax_is_the_grouped_matrixs_where_the_kernels_is_not():
    head, x = QuantizedHead(heavy_weight(0)), rows(1)
    grouped = x @ head[torch.arange(512)].T
    kernel = Int8Matrix.__call__(head, x)
    assert (kernel.argmax(-1) != grouped.argmax(-1)).sum() > 10  # the kernel alone errs
    assert torch.equal(head(x).argmax(-1), grouped.argmax(-1))


def test_recomputed_logits_are_the_grouped_matrixs_and_the_rest_the_kernels():
    head, x = QuantizedHead(heavy_weight(2)), rows(3, m=50)
    logits, kernel = head(x), Int8Matrix.__call__(head, x)
    top = logits.argmax(-1)
    exact = (head[top] * x).sum(-1)
    assert torch.allclose(logits[torch.arange(50), top], exact, rtol=1e-6, atol=1e-6)
    changed = (logits != kernel).sum(-1)
    assert changed.min() >= 1 and changed.max() < 512 // 4  # a few per row, not all


def test_a_rows_logits_do_not_depend_on_the_pass():
    head, x = QuantizedHead(heavy_weight(4)), rows(5, m=25)
    head.rows_checked = 32  # the kernel's rows stand alone (checked at load in quantize_model)
    together = head(x, rowwise=True)
    alone = torch.cat([head(row) for row in x.split(1)])
    assert torch.equal(together, alone)


def test_grouped_rows_hold_a_q8_0_matrix_exactly():
    generator = torch.Generator().manual_seed(6)
    values = torch.randint(-127, 128, (40, 64), generator=generator).float()
    scales = torch.rand(40, 2, generator=generator).half().float()  # Q8_0: a float16 per group
    values[:, 0], values[:, 32] = 127, -127  # each group reaches its scale's full range
    weight = (values.view(40, 2, 32) * scales[..., None]).view(40, 64)
    ids = torch.tensor([3, 3, 39])
    assert torch.equal(GroupedRows(weight)[ids], weight[ids])
    assert not torch.equal(Int8Matrix(weight)(torch.eye(64)).T, weight)  # one step per row: not
