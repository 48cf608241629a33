"""The topology package: the topology file plus the user modules it imported.

At submit, the CLI runs the topology file, then collects every imported module whose file
lives beside the topology file or under an entry of the submitter's ``sys.path`` that is
not the standard library or site-packages. A module that only a component's method imports
(``import mylib`` inside ``initialize``, so that tasks which never need it do not load it) is
not imported at submit: the import statements of the topology file and of every collected
module are read (at any depth, functions included) and the user modules they name are
collected too, found the way ``import`` would find them. Those files go into one zip, with their paths
relative to the ``sys.path`` entry they were found under, so the same ``import`` lines work
in a container on another host after the executor unpacks the zip and puts it first on
``sys.path``.

A package stored for containers is signed (``sign_package``): a header, then the
HMAC-SHA256 of the zip under the topology secret, then the zip. Executors check the MAC
before extracting anything (``unpack(..., secret=...)``), because the package's code runs in
every container: whoever could replace it in the state store could otherwise run code there.
The header goes first, not last, so the stored bytes still open as a zip (zip readers allow
leading data, as in self-extracting archives).
"""

from __future__ import annotations

import ast
import hashlib
import hmac
import importlib.util
import io
import json
import sys
import sysconfig
import types
import zipfile
from pathlib import Path

from heron_py.common.serialization import MAIN_ALIAS

MANIFEST = "__heron_package__.json"
# Storm's convention: multilang scripts live in resources/ beside the topology; it ships as is
RESOURCES = "resources"
# a Flux YAML topology is read at submit (heron_py.flux); containers run the stored plan
# and have no Python file to import as the main module
_NOT_PYTHON_MAIN = (".yaml", ".yml")
SIGNATURE_HEADER = b"heron-py package hmac-sha256\n"
MAC_SIZE = hashlib.sha256().digest_size
# the MAC covers a label as well as the zip, so no other MAC made with the topology secret
# (the handshake's, the HTTP token) can ever pass for a package's
_MAC_LABEL = b"heron-py topology package\x00"


class PackageError(ValueError):
    """A topology package that must not be unpacked; the message says what, where, expected, found."""


def _system_roots() -> list[Path]:
    roots = set()
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        p = sysconfig.get_paths().get(key)
        if p:
            roots.add(Path(p).resolve())
    for p in sys.path:
        if "site-packages" in p or "dist-packages" in p:
            roots.add(Path(p).resolve())
    roots.add(Path(sys.prefix).resolve())
    roots.add(Path(sys.base_prefix).resolve())
    return sorted(roots)


_ENGINE_PACKAGES = {"heron_py", "heronpy", "topology_master", "stream_manager", "instance", "metrics_manager",
                    "proto"}


def collect_user_files(topology_file: Path, search_path: list[str]) -> dict[str, Path]:
    """Maps archive names to files of user modules currently imported.

    The archive name comes from the module's import name (``a.b`` → ``a/b.py``, a package →
    ``a/b/__init__.py``), so it is the path that the same ``import`` finds once the package
    folder is first on ``sys.path``; the module must live under the topology file's folder or
    under an entry of ``search_path``, and not in the standard library or site-packages.
    """
    topo = topology_file.resolve()
    roots = {topo.parent} | {Path(p).resolve() for p in search_path if p}
    system = _system_roots()
    out: dict[str, Path] = {}
    for name, mod in list(sys.modules.items()):
        f = getattr(mod, "__file__", None)
        if not f or not f.endswith(".py") or name in ("__main__", MAIN_ALIAS):
            continue
        if name.split(".")[0] in _ENGINE_PACKAGES:
            continue
        path = Path(f).resolve()
        if path == topo or any(path.is_relative_to(s) for s in system):
            continue
        is_pkg = hasattr(mod, "__path__")
        rel = Path(*name.split("."), "__init__.py") if is_pkg else Path(*name.split(".")).with_suffix(".py")
        root = Path(str(path)[: -len(str(rel))]) if str(path).endswith(str(rel)) else None
        if root is None or root.resolve() not in roots:
            continue
        out[rel.as_posix()] = path
    return out


def imported_names(source: str, module: str | None, is_package: bool) -> set[str]:
    """The absolute names of the modules that the import statements anywhere in ``source``
    may load: ``import a.b`` → a, a.b; ``from a import b`` → a, a.b (b may be a submodule);
    ``importlib.import_module("a.b")`` and ``__import__("a.b")`` with a literal name → a, a.b.
    Relative imports are resolved against ``module`` (skipped when it is None: the topology
    file runs as the main module and has no package)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and _import_call(node.func) and node.args:
            arg = node.args[0]  # importlib.import_module("a.b") or __import__("a.b"): a literal name only
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and not arg.value.startswith("."):
                names.update(_with_parents(arg.value.split(".")))
            continue
        if isinstance(node, ast.Import):
            for alias in node.names:
                names.update(_with_parents(alias.name.split(".")))
            continue
        if not isinstance(node, ast.ImportFrom):
            continue
        if node.level:
            if module is None:
                continue
            package = module.split(".") if is_package else module.split(".")[:-1]
            if node.level - 1 > len(package) - 1:
                continue  # beyond the top-level package: the import itself fails at run time
            base = package[:len(package) - (node.level - 1)] + (node.module.split(".") if node.module else [])
        else:
            base = (node.module or "").split(".")
        names.update(_with_parents(base))
        names.update(".".join([*base, a.name]) for a in node.names if a.name != "*")
    return names


def _with_parents(parts: list[str]) -> list[str]:
    """a.b.c → a, a.b, a.b.c: importing a module imports its packages first."""
    return [".".join(parts[:i]) for i in range(1, len(parts) + 1)]


def _import_call(func: ast.expr) -> bool:
    return ((isinstance(func, ast.Name) and func.id in ("import_module", "__import__"))
            or (isinstance(func, ast.Attribute) and func.attr == "import_module"))


def _source_of(name: str, search_path: list[Path]) -> tuple[Path, Path] | None:
    """(the sys.path entry, the file) that ``import name`` would load, when it is a .py file
    found on ``search_path`` (in its order; the first entry holding the top-level name wins)."""
    parts = name.split(".")
    for entry in search_path:
        if not ((entry / parts[0]).with_suffix(".py").is_file() or (entry / parts[0] / "__init__.py").is_file()):
            continue
        base = entry.joinpath(*parts)
        for f in (base / "__init__.py", base.with_suffix(".py")):
            if f.is_file():
                return entry, f
        return None
    return None


def _statically_imported(topology_file: Path, found: dict[str, Path], search_path: list[str]) -> dict[str, Path]:
    """The user modules that import statements name beyond ``found`` (module docstring): those
    found under the topology file's folder or an entry of ``search_path``, in that order, and
    not in the standard library or site-packages."""
    system = _system_roots()
    ordered = [topology_file.parent] + [Path(p).resolve() for p in search_path if p]
    out: dict[str, Path] = {}
    todo: list[tuple[Path, str | None, bool]] = [(topology_file, None, False)]
    todo += [(path, arc[:-len("/__init__.py")].replace("/", ".") if arc.endswith("/__init__.py")
              else arc[:-3].replace("/", "."), arc.endswith("/__init__.py")) for arc, path in found.items()]
    seen: set[str] = set()
    while todo:
        path, module, is_pkg = todo.pop()
        try:
            names = imported_names(path.read_text(encoding="utf-8"), module, is_pkg)
        except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
            continue  # what ran at submit is collected from sys.modules; nothing more to read here
        for name in sorted(names - seen):
            seen.add(name)
            if name in sys.builtin_module_names or name.split(".")[0] in _ENGINE_PACKAGES:
                continue
            hit = _source_of(name, ordered)
            if hit is None:
                continue
            entry, file = hit
            if any(file.resolve().is_relative_to(s) for s in system):
                continue
            arc = file.relative_to(entry).as_posix()
            if arc in found or arc in out or file.resolve() == topology_file:
                continue
            out[arc] = file.resolve()
            todo.append((file, name, file.name == "__init__.py"))
    return out


def build_package(topology_file: Path, argv: list[str], search_path: list[str]) -> bytes:
    files = collect_user_files(topology_file, search_path)
    files.update(_statically_imported(topology_file.resolve(), files, search_path))
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr(MANIFEST, json.dumps({"main": topology_file.name, "argv": argv,
                                         "modules": sorted(files)}))
        z.write(topology_file, topology_file.name)
        for arc, path in sorted(files.items()):
            z.write(path, arc)
        resources = topology_file.parent / RESOURCES
        if resources.is_dir():
            for path in sorted(p for p in resources.rglob("*") if p.is_file()):
                rel = path.relative_to(topology_file.parent)
                # tool caches (.mypy_cache, __pycache__, ...) are not the user's resources
                if not any(part.startswith(".") or part == "__pycache__" for part in rel.parts):
                    z.write(path, rel.as_posix())
    return buf.getvalue()


def _mac(zip_bytes: bytes, secret: bytes) -> bytes:
    return hmac.new(secret, _MAC_LABEL + zip_bytes, hashlib.sha256).digest()


def sign_package(zip_bytes: bytes, secret: bytes) -> bytes:
    """The package as stored for containers: header, MAC under ``secret``, zip."""
    return SIGNATURE_HEADER + _mac(zip_bytes, secret) + zip_bytes


def verify_package(data: bytes, secret: bytes, where: str) -> bytes:
    """The zip inside a signed package, once its MAC under ``secret`` matches; else PackageError.

    The error never shows the MAC that would have matched: it would sign the changed package
    for whoever reads the log."""
    start = len(SIGNATURE_HEADER) + MAC_SIZE
    if not data.startswith(SIGNATURE_HEADER):
        found = f"no signature header (the package starts with {data[:len(SIGNATURE_HEADER)]!r})"
    elif len(data) < start:
        found = f"a signature header but {len(data)} bytes in all, too few for the {MAC_SIZE}-byte MAC"
    elif not hmac.compare_digest(data[len(SIGNATURE_HEADER):start], _mac(data[start:], secret)):
        found = f"a MAC that does not match its {len(data) - start} bytes"
    else:
        return data[start:]
    raise PackageError(
        f"{where}: refusing to unpack the topology package: expected the header {SIGNATURE_HEADER!r} and an "
        f"HMAC-SHA256 under the topology secret that matches the package, found {found} (the package was "
        f"changed or cut short after submit, or submitted by a heron-py that did not sign packages; "
        f"resubmit the topology)")


def unpack(data: bytes, dest: Path, *, secret: bytes | None = None,
           where: str = "topology package") -> dict[str, object]:
    """Extracts a package into ``dest``. With ``secret``, ``data`` must be a package signed under
    it (``sign_package``), checked before anything is extracted; without, a plain zip (the Spark
    batch runner's, which never leaves the submitting process)."""
    if secret is not None:
        data = verify_package(data, secret, where)
    dest.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        for info in z.infolist():
            target = (dest / info.filename).resolve()
            if not target.is_relative_to(dest.resolve()):
                raise ValueError(f"topology package entry {info.filename!r} escapes {dest}")
        z.extractall(dest)
    manifest: dict[str, object] = json.loads((dest / MANIFEST).read_text())
    return manifest


def load_main(package_dir: Path) -> types.ModuleType:
    """Imports the topology file as ``__heron_main__`` (not ``__main__``, so its
    ``if __name__ == "__main__"`` block does not run again) and registers it."""
    if MAIN_ALIAS in sys.modules:
        return sys.modules[MAIN_ALIAS]
    manifest = json.loads((package_dir / MANIFEST).read_text())
    if str(package_dir) not in sys.path:
        sys.path.insert(0, str(package_dir))
    main_file = package_dir / manifest["main"]
    if main_file.suffix in _NOT_PYTHON_MAIN:
        # nothing was pickled as __main__ from a YAML file: an empty stand-in, registered
        # so later calls return at once
        stand_in = types.ModuleType(MAIN_ALIAS)
        stand_in.__file__ = str(main_file)
        sys.modules[MAIN_ALIAS] = stand_in
        return stand_in
    spec = importlib.util.spec_from_file_location(MAIN_ALIAS, main_file)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[MAIN_ALIAS] = mod
    old_argv = sys.argv
    sys.argv = [str(main_file), *manifest.get("argv", [])]
    from heron_py.api import submit_hook

    # a topology file may call build_and_submit() at module level; inside a container
    # that call must do nothing
    previous = submit_hook.set_submit_handler(lambda topology: None)
    try:
        spec.loader.exec_module(mod)
    finally:
        submit_hook.set_submit_handler(previous)
        sys.argv = old_argv
    return mod
