"""Flux file text before YAML: ``${...}`` substitution and ``--filter`` properties (pure).

Flux substitutes on the raw text, line by line, before the YAML parser sees it, so a
property may stand for any YAML (a list, a quoted string). heron-py does the same, with two
differences from Storm, both on purpose: every ``${...}`` of a line is replaced (Storm: the
first), and an undefined name is an error naming the line (Storm leaves the text as it is,
which later fails far from the cause). ``${ENV-NAME}`` always reads the environment (Storm
needs ``--env-filter``; heron-py has no reason to make it opt-in).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from heron_py.flux.errors import FluxError

_VAR = re.compile(r"\$\{([^}]+)\}")
_LIST_INDEX = re.compile(r"^(.+)\[(\d+)\]$")


def parse_properties(text: str, where: str) -> dict[str, str]:
    """A Java ``.properties`` file's common subset: ``key=value`` or ``key: value`` lines,
    ``#``/``!`` comments, blank lines. (No line continuations or escapes: Flux filter files
    do not use them.)"""
    out: dict[str, str] = {}
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        m = re.match(r"^([^=:\s]+)\s*[=:\s]\s*(.*)$", line)
        if m is None:
            raise FluxError(f"{where} line {n}: expected 'key=value' or 'key: value', found {raw!r}")
        out[m.group(1)] = m.group(2)
    return out


def _list_element(where: str, name: str, raw: str, index: int) -> str:
    """Storm's ``${prop[i]}``: element ``i`` of a property written as ``["a", "b"]``."""
    inner = raw.strip()
    if not (inner.startswith("[") and inner.endswith("]")):
        raise FluxError(f"{where}: ${{{name}[{index}]}} indexes property '{name}', expected a list like "
                        f"[\"a\", \"b\"], found {raw!r}")
    items = [i.strip().strip("\"'") for i in inner[1:-1].split(",")]
    if index >= len(items):
        raise FluxError(f"{where}: ${{{name}[{index}]}}: property '{name}' has {len(items)} element(s), "
                        f"found index {index}")
    return items[index]


def _value(where: str, var: str, props: Mapping[str, str] | None, filter_name: str | None,
           env: Mapping[str, str]) -> str:
    if var.startswith("ENV-"):
        name = var[4:]
        if name not in env:
            raise FluxError(f"{where}: ${{{var}}} names environment variable '{name}', which is not set")
        return env[name]
    m = _LIST_INDEX.match(var)
    key = m.group(1) if m else var
    if props is None:
        raise FluxError(f"{where}: ${{{var}}} needs a --filter properties file defining '{key}'; "
                        f"none was given")
    if key not in props:
        raise FluxError(f"{where}: ${{{var}}}: property '{key}' is not defined in filter file {filter_name}")
    return _list_element(where, key, props[key], int(m.group(2))) if m else props[key]


def substitute(text: str, file_label: str, props: Mapping[str, str] | None, filter_name: str | None,
               env: Mapping[str, str]) -> str:
    """``text`` with every ``${name}`` / ``${ENV-NAME}`` / ``${name[i]}`` replaced. YAML
    comment lines are left alone: a commented-out ``${...}`` must not need a value."""
    out = []
    for n, line in enumerate(text.splitlines(keepends=True), 1):
        if line.lstrip().startswith("#"):
            out.append(line)
            continue
        where = f"flux file {file_label} line {n}"

        def value(m: re.Match[str], where: str = where) -> str:
            return _value(where, m.group(1), props, filter_name, env)

        out.append(_VAR.sub(value, line))
    return "".join(out)
