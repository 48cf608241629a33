"""The code base's shape, checked: the daemons stay small and keep to their layers.

Each daemon package (stream_manager, instance, topology_master, metrics_manager) imports only
heron_py, proto and itself, so one can be rewritten or moved without touching another; and
no function in them is over 60 lines nor any class over 15 methods (issue 13's limits).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DAEMONS = ("stream_manager", "instance", "topology_master", "metrics_manager")
MAX_FUNCTION_LINES = 60
MAX_METHODS = 15
# classes over the method limit, each with its own ceiling and the reason: an exception is
# visible here, and it cannot grow unnoticed
METHOD_ALLOWANCES = {
    # the master's effectively-once driver grew the storage I/O thread, the session and epoch
    # fences and the failure manager in issue 37; splitting its I/O half into a class of its own
    # is issue 40's (explicit wiring), not done yet
    ("topology_master/checkpoints.py", "CheckpointDriver"): 25,
}


def _modules(pkg: str) -> list[tuple[Path, ast.Module]]:
    return [(f, ast.parse(f.read_text(), str(f))) for f in sorted((ROOT / pkg).rglob("*.py"))]


def _imported(tree: ast.Module) -> list[tuple[int, str]]:
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.append((node.lineno, node.module))
    return out


def test_daemons_import_only_heron_py_proto_and_themselves() -> None:
    bad = []
    for pkg in DAEMONS:
        others = set(DAEMONS) - {pkg}
        for f, tree in _modules(pkg):
            bad += [f"{f.relative_to(ROOT)}:{line} imports {mod}" for line, mod in _imported(tree)
                    if mod.split(".")[0] in others]
    assert bad == []


def test_shared_code_imports_no_daemon() -> None:
    """heron_py is what the daemons share: it must not reach back into any of them."""
    bad = []
    for f, tree in _modules("heron_py"):
        bad += [f"{f.relative_to(ROOT)}:{line} imports {mod}" for line, mod in _imported(tree)
                if mod.split(".")[0] in DAEMONS]
    assert bad == []


def test_daemon_functions_and_classes_stay_small() -> None:
    bad = []
    for pkg in DAEMONS:
        for f, tree in _modules(pkg):
            where = f.relative_to(ROOT)
            for node in ast.walk(tree):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    assert node.end_lineno is not None
                    n = node.end_lineno - node.lineno + 1
                    if n > MAX_FUNCTION_LINES:
                        bad.append(f"{where}:{node.lineno} function {node.name} has {n} lines")
                elif isinstance(node, ast.ClassDef):
                    methods = [m for m in node.body if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))]
                    if len(methods) > METHOD_ALLOWANCES.get((str(where), node.name), MAX_METHODS):
                        bad.append(f"{where}:{node.lineno} class {node.name} has {len(methods)} methods")
    assert bad == []
