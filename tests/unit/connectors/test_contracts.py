"""Every spout and bolt under heron_py/connectors is checked against the engine's contracts
(heron_py/api/contracts.py) in heron_py/connectors/conformance.py, which mypy --strict reads:
this test only makes sure a new connector class is not left out of it."""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
from pathlib import Path

import heron_py.connectors as connectors
from heron_py.api import contracts
from heron_py.api.bolt.bolt import Bolt
from heron_py.api.spout.spout import Spout

CONFORMANCE = Path(connectors.__file__).with_name("conformance.py")


def _checked() -> dict[str, set[str]]:
    """Class name -> the contracts it is assigned to in conformance.py."""
    out: dict[str, set[str]] = {}
    for node in ast.walk(ast.parse(CONFORMANCE.read_text())):
        if isinstance(node, ast.AnnAssign) and isinstance(node.value, ast.Name):
            out.setdefault(node.value.id, set()).add(ast.unparse(node.annotation))
    return out


def _connector_classes() -> dict[str, type]:
    found: dict[str, type] = {}
    for m in pkgutil.walk_packages(connectors.__path__, "heron_py.connectors."):
        if m.name.endswith("conformance"):
            continue
        try:
            mod = importlib.import_module(m.name)
        except ImportError:  # a client library not installed here: its classes are checked by mypy alone
            continue
        for name, obj in vars(mod).items():
            if (inspect.isclass(obj) and obj.__module__ == mod.__name__ and not name.startswith("_")
                    and issubclass(obj, (Spout, Bolt))):
                found[name] = obj
    return found


def test_every_connector_spout_and_bolt_is_checked_against_its_contract() -> None:
    checked = _checked()
    for name, cls in _connector_classes().items():
        base = "type[c.SourceProtocol]" if issubclass(cls, Spout) else "type[c.SinkProtocol]"
        assert base in checked.get(name, set()), f"{cls.__module__}.{name} is not in {CONFORMANCE.name}"


def test_each_hook_a_class_declares_is_checked() -> None:
    """A class that declares a hook's members is assigned to that hook's contract."""
    hooks = {n: p for n, p in vars(contracts).items()
             if isinstance(p, type) and n not in ("SourceProtocol", "SinkProtocol", "Protocol", "State")
             and getattr(p, "_is_protocol", False)}
    checked = _checked()
    for name, cls in _connector_classes().items():
        for hook, proto in hooks.items():
            members = [m for m in vars(proto) if m.startswith(("heron_", "init_state", "pre_save", "on_checkpoint"))]
            members += list(getattr(proto, "__annotations__", {}))
            if members and all(hasattr(cls, m) for m in members):
                assert f"type[c.{hook}]" in checked.get(name, set()), f"{name} has {hook}'s hooks: add it"
