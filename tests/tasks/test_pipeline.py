import pytest

from pld_cli.errors import PldError
from pld_cli.tasks.pipeline import check_fits


def test_input_that_does_not_fit_names_the_counts():
    with pytest.raises(PldError, match=r"900 prompt tokens \+ 200 new tokens .* 1000 tokens"):
        check_fits(900, 200, 1000)
    check_fits(800, 200, 1000)
