"""A document's rows in a shared pass cost their marginal time plus a share of the fixed part;
alone, what they cost alone."""

import pytest

from pld_cli.runtime.batch.costs import shared_cost

ALONE = [0.0, 10.0, 12.0, 14.0, 16.0]  # t(q) in ms: 2 ms a row, 8 ms fixed


@pytest.mark.parametrize("q", [1, 2, 3, 4])
def test_alone_a_pass_costs_what_it_was_measured_to(q):
    assert shared_cost(ALONE, q, others=0, documents=1) == pytest.approx(ALONE[q])


def test_beside_other_documents_rows_cost_their_margin_and_a_share_of_the_fixed_part():
    # the module docstring's example: 3 rows beside 8 from 3 other documents
    assert shared_cost(ALONE, 3, others=8, documents=4) == pytest.approx(6 + 8 / 4)


def test_a_longer_draft_costs_more_in_a_shared_pass():
    costs = [shared_cost(ALONE, q, others=20, documents=8) for q in range(1, 8)]
    assert costs == sorted(costs) and costs[0] < ALONE[1]
