"""What a document's rows cost in a pass it shares: the draft-length policy's t(q), batched.

Alone, a pass over q positions costs t(q) (calibrated: ../calibration/costs.py) and the policy
(core/policy.py) verifies the draft length that maximises expected tokens per second. In a shared
pass the other documents' R rows run anyway: this document's q rows add t(R + q) - t(R), plus its
share of what a pass costs with no rows at all (the fixed part F = 2 t(1) - t(2), split over the
n documents in the pass). Alone (R = 0, n = 1) that is t(q) again. Where verify rows cost nearly
what a lone row does (a pass bound by reading the weights), drafts stay long; where each row adds
its own compute (a CPU's many-row passes), they shorten as the batch grows.

Worked example, t = [_, 10, 12, 14, 16] ms (a slope of 2 ms a row, F = 8 ms): alone, t(3) = 14;
beside 8 other rows from 3 other documents, q = 3 adds t(11) - t(8) = 6 ms plus 8 / 4 = 2 ms: 8 ms.
Past the measured sizes t grows along the mean slope of the measured ones.
"""

from __future__ import annotations

from collections.abc import Sequence

from pld_cli.runtime.batch.scheduler import Batch


class SharedCosts(Sequence[float]):
    """costs[q]: the seconds q rows of the document in `region` add to the batch's next pass,
    read from the latest pass's other rows each time the policy asks."""

    def __init__(self, alone: Sequence[float], batch: Batch, region: int) -> None:
        self.alone, self.batch, self.region = list(alone), batch, region

    def __len__(self) -> int:
        return len(self.alone)

    def __getitem__(self, q: int) -> float:  # type: ignore[override]
        others, documents = self.batch.others(self.region)
        return shared_cost(self.alone, q, others, documents)


def shared_cost(alone: Sequence[float], q: int, others: int, documents: int) -> float:
    """t(others + q) - t(others) + F / documents, with t(0) = F (module docstring)."""
    fixed = max(2 * alone[1] - alone[2], 0.0) if len(alone) > 2 else 0.0

    def t(rows: int) -> float:
        if rows == 0:
            return fixed
        last = len(alone) - 1
        if rows <= last:
            return alone[rows]
        slope = (alone[last] - alone[1]) / max(last - 1, 1)
        return alone[last] + (rows - last) * slope

    return t(others + q) - t(others) + fixed / documents
