"""The topology package: the topology file plus the user code it needs, as a wheel would hold it.

The folders a project ships whole, and the working folder of its components, follow the
project's shape (heron_py.common.layout: a streamparse project's ``src/``, a Flux YAML's
folder, a Maven project's jar resources, a Python package folder with ``__main__.py``, the
``resources/`` beside a Python file), as Storm's jar and streamparse's ``sparse submit`` ship
them, minus the ignored files (version control, caches, virtualenvs, build outputs).

Besides those, at submit the CLI runs the topology file; then ``collect_user_files`` takes
every top-level package or module that the topology imported (``sys.modules``) or that an
import statement of the topology file or of a user module names (``imported_names``, at any
depth: a module only a component's method imports is not imported at submit), looked up the
way ``import`` would, in the topology's folder and the submitter's path entries that are not
the standard library or site-packages. Each is shipped whole: every module, compiled extension
module and data file, from every folder that holds it on the path (a package that extends its
``__path__``, a namespace package); an installed distribution there (``pip install
--target``) is shipped by its ``RECORD``, metadata included. Archive names are relative to the
path entry, so the same ``import`` lines work in a container after the executor unpacks the
zip and puts it first on ``sys.path``. Shell components' scripts (Storm multilang, Flux) must
be in the package's working folder; a Python file's or a plain Flux YAML's may also be beside
it (``shell_files``, which ships it there); a script found nowhere is refused, as is a user
module named like one of the engine's top-level packages (``ENGINE_PACKAGES``), which a
container could not import beside the engine's. ``check_size`` refuses a package over
``heron_py.package.max.bytes``, listing its largest entries; ``size_warning`` is one line
above ``heron_py.package.warn.bytes``.

The manifest (``MANIFEST``) names the topology file (``main``), its argv, the dotted package a
package's ``__main__.py`` runs in (``package``) and the working folder (``workdir``, relative
to the package root), which shell components and native pystorm components run in.

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
import posixpath
import shlex
import sys
import sysconfig
import types
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path
from typing import Any

from heron_py.common.config import MB, Key, Kind
from heron_py.common.layout import (
    FLUX,
    IGNORED,
    MAVEN,
    PACKAGE,
    PYTHON,
    RESOURCES,
    STREAMPARSE,
    Layout,
    Tree,
    layout_of,
)
from heron_py.common.node_requires import NODE_SCRIPTS, node_files
from heron_py.common.serialization import MAIN_ALIAS

MANIFEST = "__heron_package__.json"
# the main module's attribute naming the folder its package was unpacked to (load_main)
PACKAGE_DIR_ATTR = "__heron_package_dir__"
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


ENGINE_PACKAGES = ("heron_py", "heronpy", "topology_master", "stream_manager", "instance", "metrics_manager", "proto")
_ENGINE_PACKAGES = set(ENGINE_PACKAGES)
# the engine's source tree (a checkout on sys.path): its tests and examples ship module by
# module, as imported; never its whole folders, which are not the user's project
_ENGINE_ROOT = Path(__file__).resolve().parents[2]
_SKIP_SUFFIXES = (".pyc", ".pyo")
# interpreters whose first non-option argument is the script a shell component runs
_INTERPRETERS = {"python", "python3", "python2", "node", "nodejs", "ruby", "perl", "bash", "sh", "php", "Rscript",
                 "lua"}
_SCRIPT_SUFFIXES = (".py", ".js", ".rb", ".pl", ".sh", ".php", ".R", ".lua")
MAX_BYTES = Key("heron_py.package.max.bytes", Kind.INT, 256 * MB, 1,
                doc="submit refuses a topology package whose files add up to more bytes than this")
WARN_BYTES = Key("heron_py.package.warn.bytes", Kind.INT, 32 * MB, 1,
                 doc="submit warns, naming the largest files, when a topology package's files add up to more "
                     "bytes than this")
LARGEST_LISTED = 10
LARGEST_WARNED = 3


@dataclass(frozen=True)
class Package:
    """A built package: the zip, and each entry's size before compression."""
    data: bytes
    sizes: Mapping[str, int]
    notes: tuple[str, ...] = ()  # what the submitter should hear about how it was built

    @property
    def total_bytes(self) -> int:
        return sum(self.sizes.values())

    def summary(self) -> str:
        return (f"package: {len(self.sizes)} files, {human_bytes(self.total_bytes)} "
                f"({human_bytes(len(self.data))} zipped)")


def human_bytes(n: int) -> str:
    if n < 1024:
        return f"{n} bytes"
    return f"{n / 1024:.1f} KB" if n < 1024 * 1024 else f"{n / 1024 / 1024:.1f} MB"


def check_size(pkg: Package, max_bytes: int) -> None:
    """PackageError naming the largest entries when the files add up to more than ``max_bytes``."""
    if pkg.total_bytes <= max_bytes:
        return
    listed = _largest(pkg, LARGEST_LISTED)
    raise PackageError(f"the topology package is {human_bytes(pkg.total_bytes)} in {len(pkg.sizes)} files, over "
                       f"{MAX_BYTES.name} ({human_bytes(max_bytes)}); largest: {listed}; move data out of the "
                       f"shipped folders or raise {MAX_BYTES.name}")


def _largest(pkg: Package, n: int) -> str:
    largest = sorted(pkg.sizes.items(), key=lambda kv: (-kv[1], kv[0]))[:n]
    return ", ".join(f"{arc} ({human_bytes(size)})" for arc, size in largest)


def size_warning(pkg: Package, warn_bytes: int) -> str | None:
    """One line when the files add up to more than ``warn_bytes``, naming the largest."""
    if pkg.total_bytes <= warn_bytes:
        return None
    return (f"the topology package is {human_bytes(pkg.total_bytes)} in {len(pkg.sizes)} files, over "
            f"{WARN_BYTES.name} ({human_bytes(warn_bytes)}); largest: {_largest(pkg, LARGEST_WARNED)}; every "
            f"container unpacks it: keep data out of the shipped folders (never shipped: {'; '.join(IGNORED)})")


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


def _is_system(path: Path, system: Sequence[Path]) -> bool:
    return any(path.is_relative_to(s) for s in system)


def _user_roots(first: Path, search_path: Sequence[str]) -> list[Path]:
    """Where user code is looked up, in ``import``'s order: ``first`` (the topology's folder,
    or the folder a package topology runs from), then each ``search_path`` entry that is not
    the standard library or site-packages."""
    system = _system_roots()
    out: list[Path] = []
    for p in [first, *(Path(e).resolve() for e in search_path if e)]:
        if p not in out and p.is_dir() and not _is_system(p, system):
            out.append(p)
    return out


def _locate(name: str, roots: Sequence[Path]) -> list[tuple[Path, Path]]:
    """Where ``import name`` (a top-level name) finds it among ``roots``: one (root, path) for a
    package or module (the first root holding one wins, as for ``import``), else every
    namespace portion (folders without ``__init__.py``)."""
    portions: list[tuple[Path, Path]] = []
    for root in roots:
        d = root / name
        if any((d / f"__init__{suffix}").is_file() for suffix in (".py", *EXTENSION_SUFFIXES)):
            return [(root, d)]
        for suffix in (*EXTENSION_SUFFIXES, ".py"):
            if (root / f"{name}{suffix}").is_file():
                return [(root, root / f"{name}{suffix}")]
        if d.is_dir():
            portions.append((root, d))
    return portions


def _tree(path: Path) -> list[Path]:
    """Every file of a package folder (modules, extension modules, data files), as a wheel
    holds them: none of what a project never ships (heron_py.common.layout's ignore list)."""
    if path.is_file():
        return [path]
    return [f for _, f in sorted(Tree(path).files().items())]


def _distributions(root: Path) -> dict[str, list[str]]:
    """Top-level name → the files (relative to ``root``) of the installed distribution that
    provides it, from each ``*.dist-info/RECORD`` under ``root`` (``pip install --target``)."""
    out: dict[str, list[str]] = {}
    for record in sorted(root.glob("*.dist-info/RECORD")):
        files = []
        for line in record.read_text(encoding="utf-8", errors="replace").splitlines():
            rel = line.split(",")[0].strip()
            if (rel and not rel.startswith("..") and not Path(rel).is_absolute() and (root / rel).is_file()
                    and Path(rel).suffix not in _SKIP_SUFFIXES and "__pycache__" not in Path(rel).parts):
                files.append(rel)
        dist_info = record.parent.name
        files += [f"{dist_info}/{f.name}" for f in record.parent.iterdir() if f.is_file()
                  and f"{dist_info}/{f.name}" not in files]
        for rel in files:
            top = Path(rel).parts[0]
            top = top.split(".")[0] if not top.endswith(".dist-info") else top
            if not top.endswith(".dist-info"):
                out.setdefault(top, files)
    return out


def _engine_clash(where: Path, name: str) -> PackageError:
    return PackageError(f"{where}: a user module named '{name}', like heron-py's own top-level package "
                        f"'{name}' ({', '.join(ENGINE_PACKAGES)} are the engine's); rename it (e.g. "
                        f"'my_{name}') and its imports")


def _tree_files(tree: Tree) -> dict[str, Path]:
    """A shipped folder's files; PackageError for a module it would put at the package root
    under an engine package's name (first on a container's path, it would hide the engine's)."""
    files = tree.files()
    for arc, path in files.items():
        name, _, rest = arc.partition("/")
        if (rest == "__init__.py" and name in _ENGINE_PACKAGES) or (not rest and arc[:-3] in _ENGINE_PACKAGES
                                                                    and arc.endswith(".py")):
            raise _engine_clash(path.parent if rest else path, name if rest else arc[:-3])
    return files


def collect_user_files(topology_file: Path, search_path: list[str], *, root: Path | None = None,
                       module: str | None = None) -> dict[str, Path]:
    """Maps archive names to the user's files a topology needs.

    The top-level packages and modules that the topology imported (``sys.modules``) or that
    import statements anywhere in its code name (``imported_names``) are shipped whole, from
    the topology's folder and ``search_path`` (not the standard library or site-packages), as a
    wheel holds them: every module, extension module and data file, from every folder the
    name has on the path (a package that extends its ``__path__``, a namespace package); an
    installed distribution found there (``*.dist-info``) is shipped whole with its metadata.
    The archive names are relative to the path entry, so the same ``import`` lines work once
    the package folder is first on ``sys.path``. A name of the engine's own packages
    (``ENGINE_PACKAGES``) found among the user's files is refused (PackageError). ``root``:
    where ``import`` looks first (default: the topology's folder); ``module``: the name the
    topology file's relative imports resolve against (a package's ``__main__``).
    """
    topo = topology_file.resolve()
    roots = _user_roots(root.resolve() if root is not None else topo.parent, search_path)
    out: dict[str, Path] = {}
    # the engine's checkout: what was imported from it, file by file (the old rule)
    for arc, path in _loaded_files(topo, roots).items():
        out.setdefault(arc, path)
    names = _top_level_names(topo, roots, module)
    dists: dict[Path, dict[str, list[str]]] = {}
    for name in sorted(names):
        hits = _locate(name, roots)
        if not hits:
            continue
        if name in _ENGINE_PACKAGES:
            root, where = hits[0]
            raise _engine_clash(where, name)
        if hits[0][0] == _ENGINE_ROOT:
            continue  # shipped file by file above
        if hits[0][1].is_dir():
            # a package that extends its __path__ (pkgutil.extend_path) or a namespace package
            # finds its modules in every root's folder of that name: ship them merged, the
            # first root's file winning (as the first __path__ entry does)
            hits = [(r, r / name) for r in roots if (r / name).is_dir() and r != _ENGINE_ROOT]
        for root, where in hits:
            dist = dists.setdefault(root, _distributions(root)).get(name)
            files = [root / rel for rel in dist] if dist else _tree(where)
            for f in files:
                out.setdefault(f.relative_to(root).as_posix(), f.resolve())
    return out


def _loaded_files(topo: Path, roots: Sequence[Path]) -> dict[str, Path]:
    """The engine checkout's modules that are imported now (tests' and examples' helpers)."""
    out: dict[str, Path] = {}
    if _ENGINE_ROOT not in roots:
        return out
    for name, mod in list(sys.modules.items()):
        f = getattr(mod, "__file__", None)
        if not f or not f.endswith(".py") or name in ("__main__", MAIN_ALIAS) or name.split(".")[0] in \
                _ENGINE_PACKAGES:
            continue
        path = Path(f).resolve()
        rel = Path(*name.split("."), "__init__.py") if hasattr(mod, "__path__") else \
            Path(*name.split(".")).with_suffix(".py")
        if path != topo and path == _ENGINE_ROOT / rel and _locate(name.split(".")[0], roots)[:1] == \
                [(_ENGINE_ROOT, _ENGINE_ROOT / name.split(".")[0])]:
            out[rel.as_posix()] = path
    return out


def _top_level_names(topo: Path, roots: Sequence[Path], module: str | None = None) -> set[str]:
    """Top-level names the topology uses: imported now from a user root (not the engine's
    checkout), or named by an import statement of the topology file or of a user module."""
    names: set[str] = set()
    system = _system_roots()
    for name, mod in list(sys.modules.items()):
        if name in ("__main__", MAIN_ALIAS) or name.split(".")[0] in _ENGINE_PACKAGES:
            continue
        files = [getattr(mod, "__file__", None), *list(getattr(mod, "__path__", None) or [])]
        for f in files:
            if not f or not isinstance(f, str):
                continue
            path = Path(f).resolve()
            if path == topo or _is_system(path, system):
                continue
            if any(path.is_relative_to(r) and r != _ENGINE_ROOT and path != r for r in roots):
                names.add(name.split(".")[0])
                break
    # the import statements: modules only a component's method imports, and engine-name clashes
    todo: list[tuple[Path, str | None, bool]] = [(topo, module, False)]
    seen_files: set[Path] = set()
    seen: set[str] = set()
    while todo:
        path, module, is_pkg = todo.pop()
        if path in seen_files:
            continue
        seen_files.add(path)
        try:
            found = imported_names(path.read_text(encoding="utf-8"), module, is_pkg)
        except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
            continue
        for name in sorted(found - seen):
            seen.add(name)
            if name in sys.builtin_module_names:
                continue
            top = name.split(".")[0]
            hit = _source_of(name, roots)
            if hit is None:
                continue
            root, file = hit
            if root == _ENGINE_ROOT and top in _ENGINE_PACKAGES:
                continue  # the engine itself
            names.add(top)
            todo.append((file, name, file.name == "__init__.py"))
    return names


def _source_of(name: str, roots: Sequence[Path]) -> tuple[Path, Path] | None:
    """(the root, the .py file) that ``import name`` would load among ``roots``, or None."""
    parts = name.split(".")
    hits = _locate(parts[0], roots)
    for root, _ in hits:
        base = root.joinpath(*parts)
        for f in (base / "__init__.py", base.with_suffix(".py")):
            if f.is_file():
                return root, f.resolve()
    return None


def command_parts(command: Any) -> list[str]:
    """A shell component's command as its words (a string split as a shell would)."""
    if isinstance(command, str):
        try:
            return shlex.split(command)
        except ValueError:
            return command.split()
    if isinstance(command, (list, tuple)):
        return [str(c) for c in command]
    return []


def shell_script(command: Any) -> str | None:
    """The script file a shell component's command runs, relative to its working folder:
    ``python3 splitsentence.py`` → splitsentence.py, ``./run.sh`` → ./run.sh; None for a
    program on PATH, a module (``python3 -m m``) or an absolute path."""
    parts = command_parts(command)
    if not parts:
        return None
    program = Path(parts[0]).name
    if program in _INTERPRETERS or program.rstrip("0123456789.") in _INTERPRETERS:
        rest = parts[1:]
        if "-m" in rest or "-c" in rest or "-e" in rest:
            return None
        candidates = [w for w in rest if not w.startswith("-")][:1]
    else:
        candidates = [parts[0]] if ("/" in parts[0] or parts[0].endswith(_SCRIPT_SUFFIXES)) else []
    for c in candidates:
        if not Path(c).is_absolute():
            return c
    return None


def shell_files(topology_file: Path, commands: Mapping[str, Any]) -> dict[str, Path]:
    """The scripts of shell components (component → command), as archive names: found in
    ``resources/`` or beside the topology file, shipped where the subprocess's working folder
    will be (``resources/`` when the package has one, else the package folder). A script in
    neither place is a PackageError naming the component, the command and both places."""
    base = topology_file.resolve().parent
    resources = base / RESOURCES
    out: dict[str, Path] = {}
    for component, command in sorted(commands.items()):
        script = shell_script(command)
        if script is None:
            continue
        if (resources / script).is_file():
            continue  # resources/ ships whole
        beside = base / script
        if beside.is_file():
            target = Path(RESOURCES) if resources.is_dir() else Path()
            out[(target / script).as_posix()] = beside.resolve()
            # the modules the script loads from its folder (Storm's storm.py or storm.js beside it)
            for f in _script_imports(beside):
                out.setdefault((target / Path(script).parent / f.relative_to(beside.parent)).as_posix(), f)
            continue
        raise PackageError(f"component '{component}': its command {command_parts(command)} runs {script}, which is "
                           f"neither in {resources / script} nor beside the topology file at {beside}; expected "
                           f"the script in one of them")
    return out


def _script_imports(script: Path) -> list[Path]:
    """The files of the modules a Python script imports from its own folder; for a Node.js
    script, the .js files beside it and the local files its require()s name."""
    if script.suffix in NODE_SCRIPTS:
        return [f for f in node_files(script) if f.is_relative_to(script.parent.resolve())]
    if script.suffix != ".py":
        return []
    try:
        names = imported_names(script.read_text(encoding="utf-8"), None, False)
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
        return []
    out: list[Path] = []
    for top in sorted({n.split(".")[0] for n in names}):
        for _, where in _locate(top, [script.parent]):
            out += [f.resolve() for f in _tree(where)]
    return out


_WORKDIR_NOTES = {
    STREAMPARSE: "src/ ships whole as the working folder, as in streamparse's jar",
    MAVEN: "the jar's resources/ is the working folder, as in Storm",
    PACKAGE: "the package folder's resources/, else the package folder, is the working folder",
}


def check_scripts(layout: Layout, files: Mapping[str, Path], commands: Mapping[str, Any]) -> None:
    """A PackageError for the first shell component (component → command) whose script the
    package does not hold in its working folder, naming where the script would come from."""
    for component, command in sorted(commands.items()):
        script = shell_script(command)
        if script is None:
            continue
        arc = posixpath.normpath(posixpath.join(layout.workdir, script))
        if arc in files:
            continue
        places = " or ".join(str(p) for p in layout.sources_of(arc)) or f"'{arc}' in the package"
        raise PackageError(f"component '{component}': its command {command_parts(command)} runs {script}, which is "
                           f"not in the topology package's working folder; expected it at {places} "
                           f"({_WORKDIR_NOTES.get(layout.kind, 'the working folder')})")


def package_files(layout: Layout, search_path: list[str], shell_commands: Mapping[str, Any]) -> dict[str, Path]:
    """Archive name → file of everything the package holds but the topology file and the
    manifest: the layout's folders, the user's modules (``collect_user_files``) and the
    scripts of shell components."""
    files: dict[str, Path] = {}
    for tree in layout.trees:
        for arc, path in _tree_files(tree).items():
            files.setdefault(arc, path)
    for arc, path in collect_user_files(layout.topology, search_path, root=layout.root,
                                        module=layout.module).items():
        files.setdefault(arc, path)
    if layout.kind in (PYTHON, FLUX):
        files.update(shell_files(layout.topology, shell_commands))
    else:
        check_scripts(layout, files, shell_commands)
    other = files.pop(layout.main, None)
    if other is not None and other.resolve() != layout.topology.resolve():
        raise PackageError(f"{other}: it would ship as package entry '{layout.main}', the topology file "
                           f"{layout.topology}'s own name; expected one file per name: rename one of them")
    return files


def make_package(topology_file: Path, argv: list[str], search_path: list[str],
                 shell_commands: Mapping[str, Any] | None = None) -> Package:
    """The topology package of ``topology_file`` (a file, or a Python package folder holding
    ``__main__.py``): the topology file, the folders its project ships
    (heron_py.common.layout), the user's files it needs (``collect_user_files``) and the
    scripts of shell components."""
    layout = layout_of(topology_file)
    files = package_files(layout, search_path, shell_commands or {})
    buf = io.BytesIO()
    sizes: dict[str, int] = {}
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        manifest = json.dumps({"main": layout.main, "argv": argv, "workdir": layout.workdir,
                               "package": layout.package,
                               "modules": sorted(a for a in files if a.endswith(".py"))})
        z.writestr(MANIFEST, manifest)
        sizes[MANIFEST] = len(manifest)
        z.write(layout.topology, layout.main)
        sizes[layout.main] = layout.topology.stat().st_size
        for arc, path in sorted(files.items()):
            z.write(path, arc)
            sizes[arc] = path.stat().st_size
    return Package(buf.getvalue(), sizes, layout.notes)


def build_package(topology_file: Path, argv: list[str], search_path: list[str],
                  shell_commands: Mapping[str, Any] | None = None) -> bytes:
    return make_package(topology_file, argv, search_path, shell_commands).data


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
        for info in z.infolist():
            mode = info.external_attr >> 16
            if mode & 0o111 and not info.is_dir():
                # a shell component's ./script.sh keeps its execute bits (zipfile drops them)
                (dest / info.filename).chmod(mode & 0o755)
    manifest: dict[str, object] = json.loads((dest / MANIFEST).read_text())
    return manifest


def working_folder(package_dir: Path) -> Path | None:
    """The working folder of the package unpacked in ``package_dir``, as its manifest names it
    (the package folder when the package holds nothing there: a project without scripts);
    None when the manifest does not name one (a package from before ``workdir``) or there is
    no manifest."""
    try:
        workdir = json.loads((package_dir / MANIFEST).read_text()).get("workdir")
    except (OSError, ValueError, AttributeError):
        return None
    if not isinstance(workdir, str):
        return None
    folder = package_dir / workdir
    return folder if folder.is_dir() else package_dir


def _main_module(main_file: Path, package: str | None) -> types.ModuleType:
    """The module the topology file runs in: named ``__heron_main__``; a package's
    ``__main__.py`` with the spec ``python -m`` gives it, so its relative imports resolve."""
    spec = importlib.util.spec_from_file_location(f"{package}.__main__" if package else MAIN_ALIAS, main_file)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    mod.__name__ = MAIN_ALIAS
    return mod


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
        setattr(stand_in, PACKAGE_DIR_ATTR, str(package_dir))
        sys.modules[MAIN_ALIAS] = stand_in
        return stand_in
    mod = _main_module(main_file, manifest.get("package"))
    setattr(mod, PACKAGE_DIR_ATTR, str(package_dir))
    sys.modules[MAIN_ALIAS] = mod
    old_argv = sys.argv
    sys.argv = [str(main_file), *manifest.get("argv", [])]
    from heron_py.common import submit_hook

    # a topology file may call build_and_submit() at module level; inside a container
    # that call must do nothing
    previous = submit_hook.set_submit_handler(lambda topology: None)
    try:
        exec(compile(main_file.read_bytes(), str(main_file), "exec"), mod.__dict__)
    finally:
        submit_hook.set_submit_handler(previous)
        sys.argv = old_argv
    return mod
