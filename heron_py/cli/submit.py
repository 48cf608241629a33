"""Submitting a topology: run the user's file, validate, pack, store, launch, wait.

Kept apart from argument parsing so ``heron_py.testing`` can submit the same way.
"""

from __future__ import annotations

import os
import secrets
import sys
import time
import traceback
import types
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from heron_py.api import submit_hook
from heron_py.cli.errors import SubmitError as SubmitError  # raised here; kept importable from here
from heron_py.cli.words import counted
from heron_py.common.config import TLS_ENABLED, ConfigError, check_tls_local_link
from heron_py.common.config_codec import restore_config, sanitize_config
from heron_py.common.container_layout import TopologyPaths
from heron_py.common.layout import PACKAGE_MAIN, python_package
from heron_py.common.package import (
    MAX_BYTES,
    WARN_BYTES,
    Package,
    PackageError,
    check_size,
    make_package,
    sign_package,
    size_warning,
)
from heron_py.common.tls import make_topology_tls
from heron_py.elastic.config import AutoscaleConfig
from heron_py.planner.errors import TopologyError
from heron_py.planner.logical import validate
from heron_py.planner.model import ComponentKind, PackingPlan, PhysicalPlan, TopologyDef, TopologyState
from heron_py.planner.packing import round_robin
from heron_py.scheduler.base import Scheduler, SchedulerError, preflight
from heron_py.scheduler.local import LocalScheduler
from heron_py.state import StateConfig, StateManager

TOPOLOGY_STMGRS = "topology.stmgrs"
TOPOLOGY_WORKERS = "topology.workers"  # Storm's
# how often submit reads the execution state while it waits for every task: the master writes
# it as soon as a task is ready, so the poll is the only lag, and one read costs a file or a znode
READY_POLL_S = 0.05
# how often it reads the containers' restarts.json for a task that crashes as it starts
CRASH_CHECK_S = 0.25


def _load_flux_file(path: Path, args: Sequence[str], filter_file: Path | None) -> TopologyDef:
    from heron_py.flux import load_flux  # the Flux reader and Storm's classes: only for a Flux file

    if args:
        raise SubmitError(f"{path} is a Flux file, which takes no arguments; found {list(args)}")
    return load_flux(path, filter_file=filter_file, env=os.environ)


def load_topology_file(path: Path, args: Sequence[str], filter_file: Path | None = None,
                       properties: Mapping[str, Any] | None = None) -> TopologyDef:
    """Runs ``path`` as ``__main__`` with ``args`` as its argv and returns the topology it built;
    a Python package folder holding ``__main__.py`` runs as ``python -m`` runs it (from the
    folder above the package, its relative imports resolved); a ``.yaml``/``.yml`` path is a
    Storm Flux file instead, read with ``filter_file`` (--filter). ``properties``
    (--config-property) are the overrides a translation reads (a streamparse topology's
    ``heron_py.pystorm.mode``)."""
    from heron_py.flux import FLUX_SUFFIXES

    check_topology_path(path, FLUX_SUFFIXES)
    if path.suffix in FLUX_SUFFIXES and not path.is_dir():
        return _load_flux_file(path, args, filter_file)
    if filter_file is not None:
        raise SubmitError(f"--filter {filter_file} applies to Flux YAML files only; {path} is not one "
                          f"(expected a .yaml or .yml file)")
    package = python_package(path) if path.is_dir() else None
    main_file = path / PACKAGE_MAIN if package is not None else path
    captured: list[TopologyDef] = []
    mod = types.ModuleType("__main__")
    mod.__file__ = str(main_file)
    mod.__dict__["__builtins__"] = __builtins__
    old_main = sys.modules.get("__main__")
    old_argv = sys.argv
    # python -m runs from the folder above the package; a file, from its own folder
    sys.path.insert(0, str(package[0] if package is not None else path.resolve().parent))
    from heron_py.storm.project import add_project_paths

    add_project_paths(main_file)  # a streamparse project's src/ (its imports, and the package's files)
    sys.modules["__main__"] = mod
    sys.argv = [str(main_file), *args]
    previous = submit_hook.set_submit_handler(captured.append)
    from heron_py.api import topology as topology_api

    before = len(topology_api.defined_topologies())
    try:
        if package is not None:
            _as_package_main(mod, package[1])
        code = compile(main_file.read_bytes(), str(main_file), "exec")
        exec(code, mod.__dict__)
        if not captured:
            captured.extend(_defined_topologies(mod, path, main_file, args, before, properties or {}))
    except SystemExit as e:
        if e.code not in (0, None) or not captured:
            raise SubmitError(f"{path} exited with code {e.code} before building a topology") from e
    except (SubmitError, TopologyError):
        raise
    except SyntaxError as e:
        # the user's file (or a module it imports) does not parse: at its line and column
        raise SubmitError(syntax_error_text(e)) from None
    except Exception as e:
        # the user's code (or a library it calls) failed: one line naming where, not a traceback
        raise SubmitError(_file_failure(path, e)) from e
    finally:
        submit_hook.set_submit_handler(previous)
        sys.argv = old_argv
        if old_main is not None:
            sys.modules["__main__"] = old_main
        sys.modules["__heron_submitted_main__"] = mod  # keeps classes pickled above resolvable
    if not captured:
        raise SubmitError(f"{path} did not build a topology: call TopologyBuilder.build_and_submit() "
                          f"or define a heronpy Topology subclass")
    if len(captured) > 1:
        raise SubmitError(f"{path} submitted {len(captured)} topologies; expected one")
    return captured[0]


def _defined_topologies(mod: types.ModuleType, path: Path, main_file: Path, args: Sequence[str], before: int,
                        properties: Mapping[str, Any]) -> list[TopologyDef]:
    """The topology a file defined without submitting it: a heronpy Topology subclass (class
    style, the ``before``-th and later ones defined), else its streamparse Topology classes."""
    from heron_py.api import topology as topology_api
    from heron_py.storm.streamparse_dsl import streamparse_topologies

    new = [t for t in topology_api.defined_topologies()[before:] if t.__module__ == "__main__"]
    if len(new) > 1:
        raise SubmitError(f"{path} defines {len(new)} Topology classes "
                          f"({', '.join(t.__name__ for t in new)}); expected one")
    if new:
        # Heron's CLI: a class-style topology's first argument is its name
        return [new[0].build(args[0] if args else None)]  # type: ignore[attr-defined]
    return streamparse_topologies(mod.__dict__, main_file, properties)


def _as_package_main(mod: types.ModuleType, package: str) -> None:
    """Makes ``mod`` the ``__main__`` of ``package`` as ``python -m package`` does: the package
    imported first, then the spec of its ``__main__`` submodule, which relative imports use."""
    import importlib.util

    spec = importlib.util.find_spec(f"{package}.__main__")
    if spec is None:
        raise SubmitError(f"package '{package}': no {package}.__main__ module on the path; expected "
                          f"{package.replace('.', '/')}/__main__.py")
    mod.__spec__ = spec
    mod.__package__ = package


def check_topology_path(path: Path, flux_suffixes: Sequence[str]) -> None:
    """One error for a topology argument that is not a topology file."""
    kinds = f"a Python file (.py) or a Flux file ({', '.join(flux_suffixes)})"
    if path.is_dir():
        if (path / PACKAGE_MAIN).is_file():
            return  # a package folder, run as python -m runs it
        raise SubmitError(f"topology file {path} is a directory without a {PACKAGE_MAIN}; expected {kinds}, or a "
                          f"Python package folder holding {PACKAGE_MAIN} (e.g. {path / 'topology.py'})")
    if not path.is_file():
        raise SubmitError(f"topology file {path} does not exist; expected {kinds}")
    if path.suffix in flux_suffixes or path.suffix == ".py":
        return
    head = path.read_bytes()[:4096]
    if b"\0" in head:
        raise SubmitError(f"topology file {path} is a binary file; expected {kinds}")
    if path.suffix in (".json", ".properties", ".txt", ".md", ".cfg", ".toml", ".ini", ".jar", ".class", ".java",
                       ".clj", ".js", ".rb", ".sh"):
        raise SubmitError(f"topology file {path} is a {path.suffix} file; expected {kinds}")
    # no suffix or another one: a Python script may be named so (./topology); compile decides


def syntax_error_text(e: SyntaxError) -> str:
    """``FILE:LINE:COL: SyntaxError: MSG`` then the line and a caret under the column: where
    the user's code does not parse, never heron-py's own frames."""
    where = f"{e.filename}:{e.lineno}" + (f":{e.offset}" if e.offset else "")
    text = f"{where}: {type(e).__name__}: {e.msg}"
    if e.text:
        line = e.text.rstrip("\n")
        stripped = line.lstrip()
        caret = max(0, (e.offset or 1) - 1 - (len(line) - len(stripped)))
        text += f"\n    {stripped}\n    {' ' * caret}^"
    return text


def _file_failure(path: Path, e: BaseException) -> str:
    """``FILE failed while building its topology: KeyError: 'x' (at FILE:LINE: code)``: the
    deepest frame in the topology's own folder, else where the exception was raised."""
    frames = traceback.extract_tb(e.__traceback__)
    folder = str(path.resolve().parent)
    mine = [f for f in frames if str(Path(f.filename).resolve()).startswith(folder)]
    where = (mine or frames)[-1] if frames else None
    at = f" (at {where.filename}:{where.lineno}: {(where.line or '').strip()})" if where is not None else ""
    return f"{path} failed while building its topology: {type(e).__name__}: {e}{at}"


@dataclass(frozen=True)
class SubmitResult:
    name: str
    containers: int
    tasks: int
    home: Path


def parse_properties(props: Sequence[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for p in props:
        key, sep, value = p.partition("=")
        if not sep or not key:
            raise SubmitError(f"--config-property {p!r}: expected KEY=VALUE")
        out[key] = value
    return out


def prepare(topology: TopologyDef, *, name: str | None, containers: int | None,
            properties: Mapping[str, Any]) -> tuple[TopologyDef, int]:
    config = dict(topology.config)
    config.update(sanitize_config(properties, "--config-property"))
    if config.get(TOPOLOGY_STMGRS) is None and config.get(TOPOLOGY_WORKERS) is not None:
        config[TOPOLOGY_STMGRS] = config[TOPOLOGY_WORKERS]  # Storm's workers are heron-py's containers
    topo = replace(topology, name=name or topology.name, config=config)
    validate(topo)
    check_autoscale(topo)
    n = containers
    if n is None:
        raw = config.get(TOPOLOGY_STMGRS)
        try:
            n = int(raw) if raw is not None else 1
        except (TypeError, ValueError) as e:
            raise TopologyError(f"topology '{topo.name}': config {TOPOLOGY_STMGRS} expected an integer, "
                                f"found {raw!r}") from e
    return topo, n


def check_autoscale(topology: TopologyDef) -> AutoscaleConfig:
    """The health manager's settings as it will read them (``heron-py autoscale`` reads them
    here too): validate's table check parses each key's kind and bound, and the health manager's
    own checks (``comp:N,...``, a minimum not above its maximum, components of this topology)
    refuse the rest here, at submit, and not once the topology runs."""
    try:
        settings = AutoscaleConfig.parse(topology.config)
        settings.check_components([c.name for c in topology.components],
                                  [c.name for c in topology.components if c.kind is ComponentKind.SPOUT])
    except ConfigError as e:
        raise TopologyError(f"topology '{topology.name}': {e}") from None
    return settings


def shell_commands(topology: TopologyDef) -> dict[str, Any]:
    """Component → the command of each shell component (ShellBolt/ShellSpout, Flux's) whose
    script must ship: not one given a working folder of its own (``heron_py.shell.cwd``, in
    its config or the topology's, where --config-property puts it), which runs scripts
    installed there."""
    from heron_py.multilang.setup import COMMAND_KEY, CWD_KEY

    topology_cwd = restore_config(topology.config).get(CWD_KEY)
    out: dict[str, Any] = {}
    for c in topology.components:
        conf = restore_config(c.config)
        if conf.get(COMMAND_KEY) is not None and not conf.get(CWD_KEY, topology_cwd):
            out[c.name] = conf[COMMAND_KEY]
    return out


def package_for(topology: TopologyDef, topology_file: Path, args: Sequence[str]) -> Package:
    """The topology's package, checked: no engine-name clash, every shell script found, no
    bigger than heron_py.package.max.bytes. ``topology`` is the prepared one (its config holds
    the --config-property values). What the submitter should hear (a package over
    heron_py.package.warn.bytes, a pom read in part) is one warning line each, on stderr."""
    try:
        max_bytes = int(MAX_BYTES.parse(topology.config))
        warn_bytes = int(WARN_BYTES.parse(topology.config))
        pkg = make_package(topology_file.resolve(), list(args), [p for p in sys.path if p], shell_commands(topology))
        check_size(pkg, max_bytes)
    except (PackageError, ConfigError) as e:
        raise SubmitError(str(e)) from None
    too_big = size_warning(pkg, warn_bytes)
    for line in [*pkg.notes, *([too_big] if too_big else [])]:
        print(f"heron-py: warning: {line}", file=sys.stderr)
    return pkg


def tls_wanted(config: Mapping[str, Any], sched: Scheduler) -> bool:
    """Whether the topology's daemons talk mutual TLS: ``heron.network.tls.enabled`` when it is
    set; unset, on whenever containers may be on different hosts (every scheduler but a local
    one on loopback). Every frame is authenticated either way (heron_py.common.frameauth); TLS
    also keeps what crosses a network private and proves the peer's certificate."""
    if TLS_ENABLED.name in config:
        return bool(TLS_ENABLED.parse(config))
    from heron_py.common.host import is_loopback

    return not (sched.kind == "local" and is_loopback(str(getattr(sched, "host", "127.0.0.1"))))


def submit(state: StateManager, topology: TopologyDef, topology_file: Path, args: Sequence[str], *,
           name: str | None = None, containers: int | None = None,
           properties: Mapping[str, Any] | None = None, wait_s: float = 60.0,
           home: Path | None = None, state_config: StateConfig | None = None,
           scheduler: Scheduler | None = None, package: Package | None = None,
           deactivated: bool = False) -> SubmitResult:
    state_config = state_config or StateConfig()
    sched = scheduler or LocalScheduler(state, home, state_config)
    preflight(type(sched), state_config)
    topo, n = prepare(topology, name=name, containers=containers, properties=properties or {})
    packing = round_robin(topo, n)
    tls = tls_wanted(topo.config, sched)
    if tls:
        for comp in topo.components:  # TLS on by default off loopback: the same rule as when set
            try:
                check_tls_local_link({**topo.config, **comp.config}, True)
            except ConfigError as e:
                raise SubmitError(f"topology '{topo.name}': component '{comp.name}': {e}") from None
    if state.has_topology(topo.name):
        raise SubmitError(f"topology '{topo.name}' is already running; kill it first "
                          f"(heron-py kill {sched.kind} {topo.name})")
    paths = TopologyPaths.of(topo.name, home)
    if paths.root.exists():
        import shutil

        shutil.rmtree(paths.root)
    secret = secrets.token_bytes(32)
    # signed under the secret: executors refuse a package replaced in the state store
    pkg = package or package_for(topo, topology_file, args)
    signed = sign_package(pkg.data, secret)
    state.set_secret(topo.name, secret)
    state.checkpoint_key(topo.name)  # made once per name: checkpoints (and their key) outlive a kill
    if tls:
        # a CA and one certificate for this topology, kept private like the secret
        state.set_tls(topo.name, make_topology_tls(topo.name).to_bytes())
    state.set_package(topo.name, signed)
    state.set_packing_plan(topo.name, packing)
    state.set_topology(topo)
    if deactivated:
        # Heron's --deploy-deactivated: the master adopts a stored plan's run state when it
        # starts, so the first plan the stream managers get already pauses the spouts
        state.set_physical_plan(topo.name, PhysicalPlan(topo, packing, (), TopologyState.PAUSED, 1))
    try:
        sched.launch(topo.name, n)
    except SchedulerError:
        state.delete_topology(topo.name)  # nothing runs: leave nothing behind
        raise
    try:
        wait_until_running(state, topo.name, len(packing.tasks), wait_s, paths, packing=packing)
    except SubmitError:
        sched.kill(topo.name)
        state.delete_topology(topo.name)
        raise
    return SubmitResult(topo.name, n, len(packing.tasks), paths.home)


def wait_until_running(state: StateManager, name: str, num_tasks: int, wait_s: float,
                       paths: TopologyPaths, *, packing: PackingPlan | None = None) -> None:
    """Until every task is ready; SubmitError after ``wait_s``, or as soon as a task of
    ``packing`` died twice of the same error before it initialized (heron_py.cli.crashes)."""
    from heron_py.cli.crashes import repeated_start_crash

    deadline = time.monotonic() + wait_s
    next_crash_check = 0.0
    while (now := time.monotonic()) < deadline:
        es = state.get_execution_state(name) or {}
        inst = es.get("instances", {})
        ready = sum(1 for i in inst.values() if i.get("ready"))
        if ready == num_tasks:
            return
        if packing is not None and now >= next_crash_check:
            next_crash_check = now + CRASH_CHECK_S
            starting = {t.task_id for t in packing.tasks} - {int(t) for t, i in inst.items() if i.get("ready")}
            crash = repeated_start_crash(paths, packing, starting)
            if crash is not None:
                raise SubmitError(f"topology '{name}' did not start: task {crash.task} (component "
                                  f"'{crash.component}') died twice before it initialized, of the same error: "
                                  f"{crash.error} (its log: {crash.log})")
        time.sleep(READY_POLL_S)
    es = state.get_execution_state(name) or {}
    inst = es.get("instances", {})
    not_ready = sorted(int(t) for t, i in inst.items() if not i.get("ready"))
    tail = _log_tails(paths)
    raise SubmitError(
        f"topology '{name}' did not start within {wait_s:g} s: "
        f"{len(not_ready) if inst else num_tasks} of {num_tasks} tasks not running "
        f"(not running: {not_ready or 'all'}). Last log lines:\n{tail}"
    )


def _log_tails(paths: TopologyPaths, lines: int = 8) -> str:
    out = []
    # daemons' logs, and a Slurm job's own output (the executor's log on a cluster)
    for f in sorted([*paths.logs.rglob("*.log"), *paths.logs.rglob("slurm-*.out")]):
        text = f.read_text(errors="replace").splitlines()
        errs = [line for line in text if "ERROR" in line or "Traceback" in line or "Error" in line]
        if errs:
            out.append(f"--- {f.relative_to(paths.logs)}\n" + "\n".join(text[-lines:]))
    return "\n".join(out) or "(no errors in the logs)"




def dry_run_text(topology: TopologyDef, packing: PackingPlan) -> str:
    """What ``submit --dry-run`` prints: the logical plan, then the packing plan (pure)."""
    lines = [f"topology '{topology.name}' (dry run: nothing stored, nothing launched)", "components:"]
    for c in topology.components:
        outs = ", ".join(f"{s.name}[{', '.join(s.fields)}]" for s in c.outputs) or "none"
        ins = ", ".join(f"{i.component}/{i.stream} {i.grouping.kind.value}"
                        + (f"({', '.join(i.grouping.fields)})" if i.grouping.fields else "") for i in c.inputs)
        lines.append(f"  {c.name} ({c.kind.value} {c.class_name}, par {c.par})"
                     + (f" inputs: {ins};" if ins else "") + f" outputs: {outs}")
    lines.append(f"packing: {counted(len(packing.tasks), 'task')} in {counted(packing.num_containers, 'container')}")
    for k in range(packing.num_containers):
        tasks = ", ".join(f"{t.component}-{t.task_id}" for t in packing.tasks_in(k))
        lines.append(f"  container {k}: {tasks}")
    return "\n".join(lines) + "\n"
