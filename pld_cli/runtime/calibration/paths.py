"""Kernel paths per pass size: which path runs a pass of q positions, as the calibration chose.

A runtime with several ways to compute a pass (stock or pld's CPU kernels, a plain or a padded
linear layout) offers them as `paths`; the pass-cost calibration (costs.py) times each per
measured size on the machine at hand and hands back the faster one per size (`choose`).
"""

from __future__ import annotations

from collections.abc import Mapping


class PathChoice:
    """The calibration's choice of path per measured pass size. A size between two measured ones
    runs as the next larger one; until calibrated, and past the largest measured size (prefills),
    every pass takes `default`."""

    def __init__(self, paths: tuple[str, ...], default: str) -> None:
        self.paths = paths
        self.default = default
        self.choice: dict[int, str] = {}  # measured pass size -> path

    def choose(self, choice: Mapping[int, str]) -> None:
        self.choice = dict(choice)

    def path(self, q: int) -> str:
        size = min((s for s in self.choice if s >= q), default=None)
        return self.default if size is None else self.choice[size]
