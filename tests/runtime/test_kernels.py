import torch

from pld_cli.runtime.kernels import padded_linear, padded_rows


def test_a_padded_linear_layer_runs_at_least_two_rows():
    assert [padded_rows(m) for m in (1, 2, 3, 5, 32, 33)] == [2, 2, 4, 8, 32, None]


def test_one_row_is_the_first_column_of_a_two_column_product():
    torch.manual_seed(0)
    weight, x, bias = torch.randn(40, 24), torch.randn(1, 24), torch.randn(40)
    two = torch.cat([x, torch.zeros(1, 24)])
    assert torch.equal(padded_linear(x, weight, bias), (weight @ two.t()).t()[:1] + bias)
    torch.testing.assert_close(
        padded_linear(x, weight, bias), torch.nn.functional.linear(x, weight, bias)
    )
