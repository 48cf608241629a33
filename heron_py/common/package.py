"""The topology package: the topology file plus the user modules it imported.

At submit, the CLI runs the topology file, then collects every imported module whose file
lives beside the topology file or under an entry of the submitter's ``sys.path`` that is
not the standard library or site-packages. Those files go into one zip, with their paths
relative to the ``sys.path`` entry they were found under, so the same ``import`` lines work
in a container on another host after the executor unpacks the zip and puts it first on
``sys.path``.
"""

from __future__ import annotations

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


def _engine_root() -> Path:
    # our own packages are installed on every container; never ship them
    import heron_py

    return Path(heron_py.__file__).resolve().parent.parent


def collect_user_files(topology_file: Path, search_path: list[str]) -> dict[str, Path]:
    """Maps archive names to files of user modules currently imported."""
    topo_dir = topology_file.resolve().parent
    roots = [topo_dir] + [Path(p).resolve() for p in search_path if p]
    system = _system_roots()
    engine = _engine_root()
    out: dict[str, Path] = {}
    for mod in list(sys.modules.values()):
        f = getattr(mod, "__file__", None)
        if not f or not f.endswith(".py"):
            continue
        path = Path(f).resolve()
        if path == topology_file.resolve():
            continue
        if any(path.is_relative_to(s) for s in system):
            continue
        for root in roots:
            if path.is_relative_to(root) and not (root == engine or path.is_relative_to(engine / "heron_py")):
                rel = path.relative_to(root)
                if rel.parts[0] in {"heron_py", "heronpy", "topology_master", "stream_manager", "instance",
                                    "metrics_manager", "proto"}:
                    break
                out.setdefault(rel.as_posix(), path)
                # parent packages' __init__ files are needed for the import to resolve
                parent = rel.parent
                while parent != Path("."):
                    init = root / parent / "__init__.py"
                    if init.exists():
                        out.setdefault((parent / "__init__.py").as_posix(), init)
                    parent = parent.parent
                break
    return out


def build_package(topology_file: Path, argv: list[str], search_path: list[str]) -> bytes:
    files = collect_user_files(topology_file, search_path)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr(MANIFEST, json.dumps({"main": topology_file.name, "argv": argv,
                                         "modules": sorted(files)}))
        z.write(topology_file, topology_file.name)
        for arc, path in sorted(files.items()):
            z.write(path, arc)
    return buf.getvalue()


def unpack(data: bytes, dest: Path) -> dict[str, object]:
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
