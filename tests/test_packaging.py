"""What `pip install .` ships: every package of the source tree, and the C sources."""

from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib")

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]


def source_packages() -> set[str]:
    folders = [p.parent for p in (ROOT / "pld_cli").rglob("__init__.py")]
    return {".".join(f.relative_to(ROOT).parts) for f in folders}


def test_every_package_of_the_tree_is_installed():
    assert source_packages() - set(PYPROJECT["packages"]) == set()


def test_every_listed_package_exists():
    mapped = set(PYPROJECT.get("package-dir", {}))
    assert set(PYPROJECT["packages"]) - source_packages() - mapped == set()


def test_the_c_sources_ship_with_their_package():
    patterns = PYPROJECT["package-data"]["pld_cli.runtime.clib"]
    folder = ROOT / "pld_cli" / "runtime" / "clib"
    assert all(list(folder.glob(pattern)) for pattern in patterns)
