"""The layers' contracts, checked on the source: core <- runtime <- loading <- tasks <- engines <-
bench <- serve <- cli.

A module imports only from its own layer and the layers below (every import counts, those inside
functions too); the top-level modules (errors, files, cache) are below all of them. And nothing
outside pld_cli/runtime reaches into a runtime with getattr/hasattr: what a runtime offers is the
`Runtime` protocol (core/runtime.py).
"""

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "pld_cli"
LAYERS = [
    "",
    "core",
    "runtime",
    "loading",
    "tasks",
    "engines",
    "bench",
    "serve",
    "cli",
]  # "": pld_cli's top-level modules


def layer(module: str) -> int:
    """The layer of a dotted module name inside pld_cli."""
    parts = module.split(".")
    if parts[1] == "__main__":  # `python -m pld_cli`: the command line itself
        return LAYERS.index("cli")
    return LAYERS.index(parts[1]) if len(parts) > 2 and parts[1] in LAYERS else 0


def modules() -> dict[str, ast.Module]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE.parent).with_suffix("")
        name = ".".join(p for p in relative.parts if p != "__init__")
        if path.name == "__init__.py":
            name += ".__init__"
        out[name] = ast.parse(path.read_text(encoding="utf-8"))
    return out


def imports(tree: ast.Module) -> list[str]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found += [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
    return [name for name in found if name.startswith("pld_cli.")]


MODULES = modules()


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_import_runs_up_a_layer(module):
    upward = [name for name in imports(MODULES[module]) if layer(name) > layer(module)]
    assert upward == [], f"{module} imports from a higher layer: {upward}"


def test_the_layer_check_sees_an_upward_import():
    tree = ast.parse("def f():\n    from pld_cli.cli.render import Ui\n")
    assert [n for n in imports(tree) if layer(n) > layer("pld_cli.tasks.pipeline")] != []


def runtime_probes(tree: ast.Module) -> list[str]:
    """getattr/hasattr calls on something named like a runtime."""
    calls = [node for node in ast.walk(tree) if isinstance(node, ast.Call)]
    return [
        ast.unparse(call)
        for call in calls
        if isinstance(call.func, ast.Name)
        and call.func.id in ("getattr", "hasattr")
        and call.args
        and "runtime" in ast.unparse(call.args[0]).lower()
    ]


@pytest.mark.parametrize("module", [m for m in sorted(MODULES) if layer(m) != 2])
def test_no_module_outside_the_runtimes_probes_a_runtime(module):
    assert runtime_probes(MODULES[module]) == []


def test_the_probe_check_sees_a_getattr_on_a_runtime():
    assert runtime_probes(ast.parse('getattr(runtime, "paths", ())')) != []


# Inside the runtime layer, the backends are siblings: pld's own forward and transformers' never
# import each other, and the C library and the calibration import neither (opening.py, which
# chooses among them, is the one module that knows both).
SIBLINGS = {
    "pld_cli.runtime.native": ["pld_cli.runtime.hf"],
    "pld_cli.runtime.hf": ["pld_cli.runtime.native"],
    "pld_cli.runtime.clib": ["pld_cli.runtime.native", "pld_cli.runtime.hf"],
    "pld_cli.runtime.calibration": ["pld_cli.runtime.native", "pld_cli.runtime.hf"],
}


def sibling_imports(module: str, tree: ast.Module) -> list[str]:
    banned = [
        b for folder, bans in SIBLINGS.items() if module.startswith(folder + ".") for b in bans
    ]
    return [name for name in imports(tree) if any(name.startswith(b + ".") for b in banned)]


@pytest.mark.parametrize("module", [m for m in sorted(MODULES) if m.startswith(tuple(SIBLINGS))])
def test_no_runtime_backend_imports_a_sibling(module):
    assert sibling_imports(module, MODULES[module]) == []


def test_the_sibling_check_sees_native_importing_hf():
    tree = ast.parse("from pld_cli.runtime.hf.static import StaticRuntime\n")
    assert sibling_imports("pld_cli.runtime.native.runtime", tree) != []
