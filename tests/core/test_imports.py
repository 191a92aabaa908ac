"""The layering rules, checked on what a fresh interpreter actually imports."""

import pkgutil
import subprocess
import sys

import pytest

import pld_cli.core

CORE = [module.name for module in pkgutil.iter_modules(pld_cli.core.__path__)]


def imported_by(statement: str, modules: list[str], after: str = "pass") -> list[str]:
    """Which of `modules` the statement imports that `after` (run first) had not."""
    probe = (
        f"import sys; {after}; before = set(sys.modules); {statement}; "
        f"print(' '.join(m for m in {modules!r} if m in set(sys.modules) - before))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return out.stdout.split()


@pytest.mark.parametrize("module", CORE)
def test_core_imports_no_model_library_and_no_ui(module):
    banned = ["transformers", "accelerate", "rich", "typer", "tqdm"]
    # torch itself imports tqdm (torch.hub): only what the core adds on top of torch counts.
    assert imported_by(f"import pld_cli.core.{module}", banned, after="import torch") == []


def test_the_command_line_loads_no_model_library_until_a_command_runs():
    assert imported_by("import pld_cli.cli.app", ["torch", "transformers"]) == []
