"""The local files a Node.js script loads: its literal relative ``require()``s, resolved as
Node.js resolves them and followed through the JavaScript files they name (pure but for
reading those files).

The topology package ships them with a shell component's script (heron_py.common.package);
heron_py.multilang.scripts finds the ``require('./storm')`` that names no file, where
heron-py's own storm.js goes.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

# the extensions Node.js tries for require('./x'), in its order
NODE_EXTENSIONS = (".js", ".json", ".node")
NODE_SCRIPTS = (".js", ".cjs")
# comments and string literals of JavaScript, so a require() in a comment is not taken and a
# "//" inside a string does not start one
_JS_TOKENS = re.compile(r"""(?P<comment>//[^\n]*|/\*.*?(?:\*/|\Z))"""
                        r"""|(?P<string>'(?:\\.|[^'\\\n])*'|"(?:\\.|[^"\\\n])*"|`(?:\\.|[^`\\])*`)""", re.S)
_REQUIRE = re.compile(r"""\brequire\s*\(\s*(['"`])(\.{1,2}/[^'"`\n$]*)\1\s*\)""")


def js_requires(source: str) -> list[str]:
    """The relative module names (``./x``, ``../lib/y.js``) of the literal ``require()`` calls
    of a JavaScript source, in order, each once; commented-out calls are left out."""
    code = _JS_TOKENS.sub(lambda m: " " if m.group("comment") else m.group(0), source)
    out: list[str] = []
    for m in _REQUIRE.finditer(code):
        if m.group(2) not in out:
            out.append(m.group(2))
    return out


def resolve_require(folder: Path, name: str) -> Path | None:
    """The file ``require(name)`` loads from a file in ``folder``, as Node.js resolves a
    relative name: the file, the file with .js/.json/.node, a folder's package.json ``main``
    or its index; None when there is none."""
    base = Path(os.path.normpath(folder / name))
    for candidate in (base, *(base.with_name(base.name + ext) for ext in NODE_EXTENSIONS)):
        if candidate.is_file():
            return candidate
    if base.is_dir():
        candidates: list[Path] = []
        main = _package_main(base)
        if main:
            m = Path(os.path.normpath(base / main))
            candidates += [m, *(m.with_name(m.name + ext) for ext in NODE_EXTENSIONS)]
            candidates += [m / f"index{ext}" for ext in NODE_EXTENSIONS]
        candidates += [base / f"index{ext}" for ext in NODE_EXTENSIONS]
        for candidate in candidates:
            if candidate.is_file():
                return candidate
    return None


def _package_main(folder: Path) -> str | None:
    try:
        main = json.loads((folder / "package.json").read_text(encoding="utf-8")).get("main")
    except (OSError, ValueError, AttributeError):
        return None
    return main if isinstance(main, str) and main else None


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def walk(script: Path) -> tuple[list[Path], list[tuple[Path, str]]]:
    """The local files ``script`` requires, followed through the JavaScript ones, and the
    (requiring file, name) of each relative require() that names no file."""
    found: list[Path] = []
    missing: list[tuple[Path, str]] = []
    todo = [script]
    seen = {script}
    while todo:
        current = todo.pop(0)
        for name in js_requires(_read(current)):
            hit = resolve_require(current.parent, name)
            if hit is None:
                missing.append((current, name))
            elif hit not in seen:
                seen.add(hit)
                found.append(hit)
                if hit.suffix in NODE_SCRIPTS:
                    todo.append(hit)
    return found, missing


def node_files(script: Path) -> list[Path]:
    """What a Node.js script loads from its folder: every .js file beside it (Storm ships a
    jar's whole resources folder) and the local files its require()s name, followed through;
    the script itself left out."""
    found, _ = walk(script)
    beside = [f for f in sorted(script.parent.iterdir()) if f.is_file() and f.suffix in NODE_SCRIPTS
              and not f.name.startswith(".")] if script.parent.is_dir() else []
    out: list[Path] = []
    for f in [*beside, *found]:
        f = f.resolve()
        if f != script.resolve() and f not in out:
            out.append(f)
    return out
