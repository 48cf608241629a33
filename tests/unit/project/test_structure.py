"""The code base's shape, checked: the daemons stay small and keep to their layers.

Each daemon package (stream_manager, instance, topology_master, metrics_manager) imports only
heron_py, proto and itself, so one can be rewritten or moved without touching another; of
heron_py, only the modules on its list (``DAEMON_IMPORTS``, each with the reason it needs it);
and no function in them is over 60 lines nor any class over 15 methods (issue 13's limits).

Inside heron_py, the subpackages form layers (``LAYERS``, lowest first) and import only from
their own layer or a lower one, with no cycle between subpackages: the foundation (common),
the models below the API (planner, checkpoint, the multilang protocol, the XOR acker), the topology API
(api: the contract users code against and the engine hosts, as heron-api sits below Heron's
instance), the engine core (runtime), the front-ends that build on both (connectors, flux,
storm, spark, testing), and operations (state, the links that follow it, scheduler, cli). Within the layers, each
subpackage imports only the subpackages on its list (``HERON_PY_IMPORTS``). An import under
``if TYPE_CHECKING:`` is an annotation, not a dependency: it is not counted. The same size
limits hold in heron_py, with the exceptions listed in ``HERON_PY_ALLOWANCES`` and why.

No two modules (files) of heron_py and the daemons import each other, directly or through
others: every import counts here, a lazy one inside a function too (that is how a cycle
hides), but not one under ``if TYPE_CHECKING:``. ``from a.b import c`` depends on ``a.b`` (its
namespace is read: a package's module ``__getattr__`` runs) and on ``a.b.c`` when that is a
module; ``import a.b.c`` on ``a.b.c``. A package's ``__init__`` running before its modules is
Python's order, not a dependency of theirs.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
DAEMONS = ("stream_manager", "instance", "topology_master", "metrics_manager")
MAX_FUNCTION_LINES = 60
MAX_METHODS = 15
# classes over the method limit, each with its own ceiling and the reason: an exception is
# visible here, and it cannot grow unnoticed
METHOD_ALLOWANCES: dict[tuple[str, str], int] = {}


# Of heron_py, what each daemon imports, by module ("pkg.*": the package and everything in it),
# each with why; an import of anything else fails with its file, line and module. A daemon that
# needs something new gets it through a module listed here or adds the module with its reason.
FOUNDATION = ("the foundation every daemon stands on: framing, net, config, tls, daemon loop, the container's "
              "files (container_layout)...")
FINDER = "imported first: its import finder picks compiled modules or their sources (heron_py.hotpath)"
PLANS = "the plans it is handed (topology, packing, physical plan)"
STATE = "the state store's interface: StateManager, TManagerLocation"
DAEMON_ARGS = "the daemon's command line and the state store it names (daemon_parser, resolve)"
RUN = "a daemon's main: opens that store, runs the daemon, closes it (run_with_state)"
MASTER_LINK = "the link to the active master, following its location in the store"
DAEMON_IMPORTS: dict[str, dict[str, str]] = {
    "stream_manager": {
        "heron_py": FINDER,
        "heron_py.common.*": FOUNDATION,
        "heron_py.planner.model": PLANS,
        # Storm's acker algorithm, pure: the one the in-process test harness runs too
        "heron_py.acking.tracker": "the XOR ack tracker of its spouts' tuple trees",
        "heron_py.state": STATE,
        "heron_py.state.config": DAEMON_ARGS,
        "heron_py.state.stores": RUN,
        "heron_py.links.tmlink": MASTER_LINK,
    },
    "instance": {
        "heron_py": FINDER,
        "heron_py.common.*": FOUNDATION,
        "heron_py.planner.model": PLANS,
        "heron_py.checkpoint.select": "opens the checkpoint storage its stateful task saves to and restores from",
        "heron_py.checkpoint.storage": "the checkpoint key, kept beside the topology's secret",
        "heron_py.runtime.host": "the engine core it hosts: a task's spout or bolt host",
        "heron_py.runtime.stateful": "a stateful task's side of a checkpoint (effectively once)",
    },
    "topology_master": {
        "heron_py.common.*": FOUNDATION,
        "heron_py.planner.model": PLANS,
        "heron_py.planner.packing": "a live rescale's added and removed tasks (moved_tasks)",
        "heron_py.checkpoint.action_log": "the log's words for each of the coordinator's actions",
        "heron_py.checkpoint.coordinator": "the checkpoints' state machine, which the master drives",
        "heron_py.checkpoint.failures": "the backoff of a failing checkpoint storage",
        "heron_py.checkpoint.operator": "an operator's restore command, parsed",
        "heron_py.checkpoint.select": "opens the topology's checkpoint storage (markers, gc, restore)",
        "heron_py.checkpoint.storage": "the storage contract and the checkpoint key beside the secret",
        # imported when a relaunch is set up: Heron's master asks its scheduler client the same way
        "heron_py.scheduler.registry": "relaunches a lost container through the scheduler it was launched with",
        "heron_py.state": STATE,
        "heron_py.state.config": DAEMON_ARGS,
        "heron_py.state.stores": RUN,
    },
    "metrics_manager": {
        "heron_py.common.*": FOUNDATION,
        "heron_py.state": STATE,
        "heron_py.state.config": DAEMON_ARGS,
        "heron_py.state.stores": RUN,
        "heron_py.links.tmlink": MASTER_LINK,
    },
}


LAYERS: tuple[tuple[str, ...], ...] = (
    ("__init__", "hotpath", "compiled"),
    ("common",),
    ("planner", "checkpoint", "multilang", "acking", "elastic"),
    ("api",),
    ("runtime",),
    ("connectors", "flux", "storm", "spark", "testing"),
    ("state",),
    ("links",),
    ("scheduler",),
    ("cli",),
)
RANK = {sub: i for i, layer in enumerate(LAYERS) for sub in layer}
# what each heron_py subpackage imports at run time (besides itself): the layers allow more, and
# this is what each needs; a new edge is added here, where it is seen (and LAYERS must allow it)
HERON_PY_IMPORTS: dict[str, frozenset[str]] = {
    "__init__": frozenset({"hotpath"}),
    "compiled": frozenset({"__init__", "hotpath"}),
    "hotpath": frozenset(),
    "common": frozenset(),
    "planner": frozenset({"common"}),
    "checkpoint": frozenset({"common"}),
    "multilang": frozenset({"common", "planner"}),
    "acking": frozenset({"common"}),  # Storm's acker algorithm, pure: the tracker and its root tables
    # the health manager's pure decisions (Dhalion, DS2): plain data in, actions out; common: its
    # settings are keys of the engine's config table
    "elastic": frozenset({"common", "planner"}),  # planner: the key groups' default count, GroupingKind
    "api": frozenset({"common", "planner", "multilang"}),  # multilang: the shell components (api/shell.py)
    # checkpoint: stateful tasks; acking: the received tuples' ids (tracked.py) share the root tables' errors
    "runtime": frozenset({"common", "planner", "checkpoint", "acking", "api"}),
    "connectors": frozenset({"common", "api"}),
    # connectors: Storm's Kafka, Redis and JDBC class names are heron-py's connectors
    "flux": frozenset({"planner", "api", "connectors"}),
    "storm": frozenset({"common", "planner", "multilang", "api"}),
    "spark": frozenset({"common", "planner", "api", "runtime"}),  # runtime: a batch runs in process
    # runtime: in process; acking: the stream managers' XOR tracker on the harness's clock
    "testing": frozenset({"common", "planner", "checkpoint", "acking", "api", "runtime"}),
    "state": frozenset({"common", "planner"}),
    "links": frozenset({"common", "state"}),  # the link to the active master follows its location in the store
    # api: a component's resource requests (kube_render); checkpoint: the executor's checkpoint key
    "scheduler": frozenset({"common", "planner", "checkpoint", "api", "state"}),
    # the top: its verbs submit, run and operate what every front-end builds; elastic: submit
    # refuses health manager settings the running master would
    "cli": frozenset({"common", "planner", "checkpoint", "multilang", "elastic", "api", "runtime", "connectors",
                      "flux", "storm", "spark", "testing", "state", "scheduler"}),
}
# imports against the layers, each with its reason; none may be added without one
LAYER_ALLOWANCES: dict[tuple[str, str], str] = {}
# heron_py's classes and functions over the limits, each with its ceiling and reason
HERON_PY_ALLOWANCES: dict[tuple[str, str], int] = {
    # hot path: one object per connection or task, whose methods are the per-frame, per-tuple calls
    # (a connection's admission, TLS set-up, heartbeats and refusals are heron_py/common/conn_*.py's;
    # its held output's writing is heron_py/common/held_output.py's: hold_output, drop_held and the
    # watermarks' one signal, _writing, are the connection's part)
    ("heron_py/common/net.py", "Connection"): 28,
    # (and a spout's tracked emits: per tuple, per batch with a root each, per batch as one tree;
    # and a one-field stream's batch as bare values, appended to runs by the loop emit_many shares)
    ("heron_py/runtime/emitter.py", "Emitter"): 34,
    # the one object a task's loop drives: the component's lifecycle (initialize, start, plans,
    # activation, close), its flush, and its own input's polling (poll, and poll_wait: how long
    # the loop may wait before the next poll, busy or idle)
    ("heron_py/runtime/host.py", "ComponentHost"): 16,
    ("heron_py/runtime/emitter.py", "__init__"): 86,
    # a tracked batch's per-tuple loop, one body for a root per tuple and one root per batch:
    # its locals bound once, the routing and the id triples inline (the spout's hottest loop)
    ("heron_py/runtime/emitter.py", "_emit_rooted"): 76,
    # interfaces: one method per stored document kind (plans, state, secrets, TLS, locks, ...),
    # the master location's claim, release and removal after a crash, and an existence check
    ("heron_py/state/base.py", "StateManager"): 40,
    # and the trust checks of every node it reads or writes (its ACL, the same node's value)
    ("heron_py/state/zookeeper.py", "ZkStateManager"): 25,
    # the checkpoint storage contract (save, mark_complete, marker, load, the listings, remove,
    # delete_topology, gc) and the store's own I/O checks (retries, private folders, durability)
    ("heron_py/checkpoint/storage.py", "LocalFsStorage"): 17,
    ("heron_py/checkpoint/redis_storage.py", "RedisCheckpointStorage"): 16,
    # a state machine: one method per event it takes (a live rescale's new plan among them),
    # plus what status and the master read (and when it next acts on its own, which the test
    # harness's jumping clock ticks at)
    ("heron_py/checkpoint/coordinator.py", "CheckpointCoordinator"): 22,
    # user-facing components: heronpy's Spout interface (open, next_tuple, ack, fail, activate,
    # deactivate, state hooks, close) plus each connector's own options and metrics
    # and the engine's batch ack hook, the walk of its own pending entries after an outage
    ("heron_py/connectors/redis/spout.py", "RedisStreamSpout"): 23,
    ("heron_py/connectors/rabbitmq/spout.py", "RabbitMQSpout"): 18,  # and its lag query answered without waiting
    ("heron_py/connectors/files/spout.py", "FileTailSpout"): 17,  # and the engine's batch emit and ack hooks
    # heronpy's Bolt interface, the in-process hooks (heron_poll, heron_busy) and the writes of
    # both modes: at least once (batched, acked) and effectively once (a checkpoint's commit)
    ("heron_py/connectors/postgres/bolts.py", "PostgresInsertBolt"): 16,
    ("heron_py/connectors/files/sink.py", "FileSink"): 19,  # and its part files' life (open, roll, finish)
    # and the subclass hooks (prepare, queue, written) and a lookup's answers before a barrier
    ("heron_py/connectors/redis/bolts.py", "RedisBatchBolt"): 18,
    ("heron_py/scheduler/local.py", "LocalScheduler"): 16,
    # long functions still to split
    ("heron_py/cli/main.py", "build_parser"): 150,
    ("heron_py/cli/submit.py", "load_topology_file"): 69,
    ("heron_py/planner/logical.py", "validate"): 72,
    ("heron_py/scheduler/executor.py", "prepare"): 84,
    ("heron_py/spark/batch.py", "batch_outputs"): 93,
}


@functools.cache  # each test walks the same trees: parse them once
def _modules(pkg: str) -> list[tuple[Path, ast.Module]]:
    return [(f, ast.parse(f.read_text(), str(f))) for f in sorted((ROOT / pkg).rglob("*.py"))]


def _type_checking_only(tree: ast.Module) -> set[int]:
    """The ids of the import nodes under ``if TYPE_CHECKING:`` blocks."""
    out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            out.update(id(n) for stmt in node.body for n in ast.walk(stmt))
    return out


def _imported(tree: ast.Module, *, runtime_only: bool = False) -> list[tuple[int, str]]:
    out = []
    skip = _type_checking_only(tree) if runtime_only else set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.append((node.lineno, node.module))
    return out


def _module_name(f: Path) -> str:
    parts = f.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@functools.cache
def _known() -> frozenset[str]:
    """The modules (files) of heron_py and the daemons, by dotted name (a package by its own)."""
    return frozenset(_module_name(f) for pkg in ("heron_py", *DAEMONS) for f, _ in _modules(pkg))


def _owner(name: str) -> str | None:
    """The known module ``name`` is, or is in (``a.b.Name`` → ``a.b``); None outside them."""
    while name and name not in _known():
        name = name.rpartition(".")[0]
    return name or None


def _depends(pkg: str, *, runtime_only: bool = True) -> Iterator[tuple[Path, int, str, str]]:
    """(file, line, its module, a known module it imports) for every import in ``pkg``, lazy
    ones inside functions included, those under ``if TYPE_CHECKING:`` left out with
    ``runtime_only``. ``from a.b import c`` is ``a.b`` and, when it is a module, ``a.b.c``."""
    for f, tree in _modules(pkg):
        me = _module_name(f)
        skip = _type_checking_only(tree) if runtime_only else set()
        for node in ast.walk(tree):
            if id(node) in skip:
                continue
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names
                                         if f"{node.module}.{a.name}" in _known()]
            else:
                continue
            for target in {t for t in map(_owner, names) if t is not None and t != me}:
                yield f, node.lineno, me, target


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


def _subpackage(f: Path) -> str:
    parts = f.relative_to(ROOT / "heron_py").parts
    return parts[0] if len(parts) > 1 else parts[0].removesuffix(".py")


def _subpackage_of(module: str) -> str:
    """heron_py.x.y → x; heron_py itself → __init__ (its own file, in the lowest layer)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _heron_py_edges() -> dict[tuple[str, str], list[str]]:
    """(importing subpackage, imported subpackage) -> where, for every runtime import in heron_py."""
    edges: dict[tuple[str, str], list[str]] = {}
    for f, line, _, target in _depends("heron_py"):
        sub, other = _subpackage(f), _subpackage_of(target)
        if target.split(".")[0] == "heron_py" and other != sub:
            edges.setdefault((sub, other), []).append(f"{f.relative_to(ROOT)}:{line}")
    return edges


def test_every_heron_py_subpackage_has_a_layer() -> None:
    subs = {_subpackage(f) for f, _ in _modules("heron_py")}
    assert sorted(subs - set(RANK)) == []


def test_heron_py_imports_only_its_own_layer_or_lower() -> None:
    bad = []
    for (a, b), where in sorted(_heron_py_edges().items()):
        if b in RANK and RANK[b] > RANK[a]:
            bad += [f"{w} ({a} imports {b}, a higher layer)" for w in where
                    if (w.split(":")[0], f"heron_py.{b}") not in LAYER_ALLOWANCES]
    assert bad == []


def test_no_import_cycle_between_heron_py_subpackages() -> None:
    graph: dict[str, set[str]] = {}
    for (a, b), where in _heron_py_edges().items():
        if all((w.split(":")[0], f"heron_py.{b}") in LAYER_ALLOWANCES for w in where):
            continue
        graph.setdefault(a, set()).add(b)
    cycles = []
    for start in sorted(graph):  # a cycle through start: start reaches itself
        seen, todo = set(), list(graph[start])
        while todo:
            n = todo.pop()
            if n == start:
                cycles.append(start)
                break
            if n not in seen:
                seen.add(n)
                todo += graph.get(n, ())
    assert cycles == []


def test_heron_py_functions_and_classes_stay_small_or_say_why() -> None:
    bad = []
    for f, tree in _modules("heron_py"):
        where = str(f.relative_to(ROOT))
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                assert node.end_lineno is not None
                n = node.end_lineno - node.lineno + 1
                if n > HERON_PY_ALLOWANCES.get((where, node.name), MAX_FUNCTION_LINES):
                    bad.append(f"{where}:{node.lineno} function {node.name} has {n} lines")
            elif isinstance(node, ast.ClassDef):
                methods = [m for m in node.body if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))]
                if len(methods) > HERON_PY_ALLOWANCES.get((where, node.name), MAX_METHODS):
                    bad.append(f"{where}:{node.lineno} class {node.name} has {len(methods)} methods")
    assert bad == []


def _allowed(module: str, allowed: dict[str, str]) -> bool:
    return module in allowed or any(e.endswith(".*") and (module == e[:-2] or module.startswith(e[:-1]))
                                    for e in allowed)


def test_each_daemon_imports_only_the_heron_py_modules_on_its_list() -> None:
    """Counted: every import, lazy and annotation-only ones too (a daemon naming a scheduler's
    type is tied to it as much as one calling it)."""
    bad = []
    for pkg in DAEMONS:
        for f, line, _, target in _depends(pkg, runtime_only=False):
            if target.split(".")[0] == "heron_py" and not _allowed(target, DAEMON_IMPORTS[pkg]):
                bad.append(f"{f.relative_to(ROOT)}:{line} imports {target}, which is not on {pkg}'s list "
                           f"(DAEMON_IMPORTS)")
    assert not bad, "\n" + "\n".join(bad)


def test_each_daemon_list_holds_only_what_it_imports() -> None:
    """An entry no import needs any more is taken off, so the lists stay what the daemons use."""
    used = {(pkg, target) for pkg in DAEMONS for _, _, _, target in _depends(pkg, runtime_only=False)}
    stale = [f"{pkg}: {entry}" for pkg in DAEMONS for entry in DAEMON_IMPORTS[pkg]
             if not any(p == pkg and _allowed(t, {entry: ""}) for p, t in used)]
    assert not stale, "\n" + "\n".join(stale)


def test_heron_py_subpackages_import_only_what_their_lists_name() -> None:
    bad = []
    for (a, b), where in sorted(_heron_py_edges().items()):
        if b not in HERON_PY_IMPORTS.get(a, frozenset()):
            bad += [f"{w} ({a} imports {b}, which is not in HERON_PY_IMPORTS[{a!r}])" for w in where]
    assert not bad, "\n" + "\n".join(bad)


def test_heron_py_import_lists_are_used_and_keep_to_the_layers() -> None:
    edges = _heron_py_edges()
    assert sorted(HERON_PY_IMPORTS) == sorted(RANK)
    stale = [f"HERON_PY_IMPORTS: {a} -> {b}" for a, subs in HERON_PY_IMPORTS.items() for b in sorted(subs)
             if (a, b) not in edges]
    excused = {(Path(f).parts[1].removesuffix(".py"), m.split(".")[1]) for f, m in LAYER_ALLOWANCES}
    upward = [f"HERON_PY_IMPORTS: {a} -> {b}" for a, subs in HERON_PY_IMPORTS.items() for b in sorted(subs)
              if RANK[b] > RANK[a] and (a, b) not in excused]
    bad = [*(f"{e}: not imported" for e in stale), *(f"{e}: a higher layer" for e in upward)]
    assert not bad, "\n" + "\n".join(bad)


# the container's files that more than one process names, each spelled only where ContainerLayout
# names them: the executor, the daemons, the CLI and the pod's script reach them through it
CONTAINER_LAYOUT = "heron_py/common/container_layout.py"
CONTAINER_FILE_NAMES = ("metricsmgr.json", "stmgr.port", "restarts.json", "stmgr.sock", "checkpoint.key")


def _docstring_ids(tree: ast.Module) -> set[int]:
    out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                out.add(id(first.value))
    return out


def test_the_container_files_are_named_by_the_layout_only() -> None:
    bad = []
    for pkg in ("heron_py", *DAEMONS):
        for f, tree in _modules(pkg):
            rel = str(f.relative_to(ROOT))
            if rel == CONTAINER_LAYOUT:
                continue
            docs = _docstring_ids(tree)
            bad += [f"{rel}:{node.lineno}: {name!r}: ContainerLayout names it" for node in ast.walk(tree)
                    if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs
                    for name in CONTAINER_FILE_NAMES if name in node.value]
    assert not bad, "\n" + "\n".join(bad)


# an engine key (heron_py/common/config.py's table) is read through its typed key, whose parse has
# its default and its error, and handed on parsed: never read as a raw string with a default of
# its own (``conf.get("topology.message.timeout.secs", 30)``); nor are the options that carry the
# links' keys to an instance (LinkConfig) spelled anywhere else. Each exception, with its reason:
RAW_KEY_READS: dict[tuple[str, str], str] = {
    ("heron_py/cli/submit.py", "topology.stmgrs"): "submit reads the container count (Storm's topology.workers "
                                                   "copied in) before the config check, with its own error",
}
LINK_OPTIONS = ("--max-frame-bytes", "--heartbeat-interval", "--heartbeat-timeout")


def _raw_key_reads(tree: ast.Module, keys: frozenset[str], named: dict[str, str]) -> Iterator[tuple[int, str]]:
    """(line, key) of each ``x.get(KEY)``, ``x.pop(KEY)`` and ``x[KEY]`` read of an engine key, spelled
    or named by one of heron_py.api.api_constants's names."""
    def key_of(node: ast.expr) -> str | None:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value
        name = node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else None
        return named.get(name) if name is not None else None

    for node in ast.walk(tree):
        key = None
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("get", "pop")
                and node.args):
            key = key_of(node.args[0])
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
            key = key_of(node.slice)
        if key in keys:
            yield node.lineno, key


def test_engine_keys_are_read_through_the_config_table_only() -> None:
    from heron_py.api import api_constants
    from heron_py.common.config import KEYS

    keys = frozenset(KEYS)
    named = {n: v for n, v in vars(api_constants).items() if isinstance(v, str) and v in keys}
    bad, used = [], set()
    for pkg in ("heron_py", *DAEMONS):
        for f, tree in _modules(pkg):
            rel = str(f.relative_to(ROOT))
            if rel == "heron_py/common/config.py":
                continue
            for line, key in _raw_key_reads(tree, keys, named):
                if (rel, key) in RAW_KEY_READS:
                    used.add((rel, key))
                else:
                    bad.append(f"{rel}:{line}: {key} read raw: expected its key's parse (heron_py.common.config)")
            bad += [f"{rel}:{node.lineno}: {node.value!r}: LinkConfig names it" for node in ast.walk(tree)
                    if isinstance(node, ast.Constant) and node.value in LINK_OPTIONS]
    bad += [f"RAW_KEY_READS: {rel} reads {key} no more" for rel, key in sorted(set(RAW_KEY_READS) - used)]
    assert not bad, "\n" + "\n".join(bad)


def test_the_state_package_holds_the_stores_and_no_daemon_link() -> None:
    """A network link of the daemons (the master's, heron_py.links) is not the state store's."""
    links = ("heron_py.common.net", "heron_py.common.handshake", "heron_py.common.reconnect", "heron_py.common.tls")
    bad = [f"{f.relative_to(ROOT)}:{line}: {m}" for f, tree in _modules("heron_py/state")
           for line, m in _imported(tree) if m.startswith(links)]
    assert not bad, "\n" + "\n".join(bad)


def _module_graph() -> dict[str, dict[str, str]]:
    """module -> {module it imports: where (the first such import)}, over heron_py and the daemons."""
    graph: dict[str, dict[str, str]] = {m: {} for m in _known()}
    for pkg in ("heron_py", *DAEMONS):
        for f, line, me, target in _depends(pkg):
            graph[me].setdefault(target, f"{f.relative_to(ROOT)}:{line}")
    return graph


def _reachable(graph: dict[str, dict[str, str]], start: str) -> set[str]:
    seen, todo = {start}, [start]
    while todo:
        for n in graph[todo.pop()]:
            if n not in seen:
                seen.add(n)
                todo.append(n)
    return seen


def test_no_import_cycle_between_modules() -> None:
    """A cycle is a strongly connected component of more than one module: the modules that each
    reach all the others. Named with the imports that close it."""
    graph = _module_graph()
    reach = {m: _reachable(graph, m) for m in graph}
    cycles, done = [], set()
    for m in sorted(graph):
        if m in done:
            continue
        component = sorted(n for n in reach[m] if m in reach[n])
        done.update(component)
        if len(component) > 1:
            edges = [f"{graph[a][b]} imports {b}" for a in component for b in sorted(graph[a]) if b in component]
            cycles.append(f"cycle between {', '.join(component)}: {'; '.join(edges)}")
    assert not cycles, "\n" + "\n".join(cycles)


# Each daemon's composition root (issue 54): the functions that build its parts, every part
# given what it needs as explicit arguments. In them, no lambda and no nested function (a
# closure over a local reads it as it is at each call: ``lambda: forwarder.routing`` read an
# attribute that each plan replaced, and ``wake[0]()`` a list filled once the gateway existed),
# and no attribute of anything assigned (``forwarder.on_held = ...``, ``outbound.mark = ...``:
# a part is whole once made; a value that exists only later comes through a method of the part
# that says why, like ``MasterLink.listening_on``). What a part needs from another made later
# goes through a small object both are given (the stream manager's ``MasterChannel``, the
# instance's ``GatewayPort``) or a Protocol the daemon implements (``Events``, ``Master``).
COMPOSITION: dict[str, tuple[str, ...]] = {
    "stream_manager/wiring.py": ("build",),
    "instance/wiring.py": ("build",),
    "topology_master/wiring.py": ("build", "build_active"),
    "metrics_manager/wiring.py": ("build",),
}
# the lambdas kept in them, by (file, function), each with how many and why; none closes over
# anything assigned after it
COMPOSITION_LAMBDAS: dict[tuple[str, str], tuple[int, str]] = {
    ("metrics_manager/wiring.py", "build"): (1, "prom.registry_for takes a getter of the store (its tests hand it "
                                                "one they fill); this one returns the store made just before it"),
    ("topology_master/wiring.py", "build"): (1, "the rescaler reads the master's checkpoint driver, which "
                                                "build_active makes later (once the master is active, with its "
                                                "epoch); the lambda reads the attribute when called"),
}


def _composition_faults(where: str, func: ast.FunctionDef) -> list[str]:
    """Lambdas, nested functions and classes, and attribute assignments in ``func``'s body."""
    bad, lambdas = [], 0
    for node in (n for stmt in func.body for n in ast.walk(stmt)):
        if isinstance(node, ast.Lambda):
            lambdas += 1
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bad.append(f"{where}:{node.lineno} {func.name} defines {node.name}: a closure, or a part made here")
        elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                for sub in ast.walk(t):
                    if isinstance(sub, ast.Attribute):
                        bad.append(f"{where}:{node.lineno} {func.name} assigns {ast.unparse(sub)} after it was made")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "setattr":
            bad.append(f"{where}:{node.lineno} {func.name} calls setattr")
    allowed, _why = COMPOSITION_LAMBDAS.get((where, func.name), (0, ""))
    if lambdas != allowed:
        bad.append(f"{where}:{func.lineno} {func.name} has {lambdas} lambdas; {allowed} allowed "
                   f"(COMPOSITION_LAMBDAS)")
    return bad


def test_composition_roots_take_explicit_arguments_and_set_nothing_later() -> None:
    bad = []
    for where, names in COMPOSITION.items():
        path = ROOT / where
        if not path.is_file():
            bad.append(f"{where}: no such module (its daemon's composition root)")
            continue
        funcs = {n.name: n for n in ast.parse(path.read_text(), where).body if isinstance(n, ast.FunctionDef)}
        for name in names:
            if name not in funcs:
                bad.append(f"{where}: no function {name}")
            else:
                bad += _composition_faults(where, funcs[name])
    assert bad == [], "\n" + "\n".join(bad)


def test_composition_lambda_allowances_name_functions_of_the_roots() -> None:
    assert {k for k in COMPOSITION_LAMBDAS if k[1] not in COMPOSITION.get(k[0], ())} == set()


# the wire's registry owns the protobuf frames' encoding (issue 54): the class is the type
WIRE_ENCODERS = ("heron_py/common/wire.py", "heron_py/common/framing.py")


def _hand_framed(call: ast.Call, protobuf_types: frozenset[str]) -> str | None:
    """Why ``call`` hand-frames a protobuf message (None if it does not): ``encode_frame`` of a
    ``.SerializeToString()`` body, or of a type the registry gives a protobuf class."""
    func = call.func
    name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
    if name != "encode_frame" or not call.args:
        return None
    if any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "SerializeToString"
           for a in call.args for n in ast.walk(a)):
        return "a .SerializeToString() body"
    first = call.args[0]
    if (isinstance(first, ast.Attribute) and isinstance(first.value, ast.Name) and first.value.id == "MsgType"
            and first.attr in protobuf_types):
        return f"MsgType.{first.attr}, a protobuf type"
    return None


def test_protobuf_frames_are_encoded_by_the_registry_only() -> None:
    from heron_py.common.wire import MESSAGES

    protobuf_types = frozenset(t.name for t in MESSAGES)
    bad = []
    for pkg in ("heron_py", "heronpy", *DAEMONS):
        for f, tree in _modules(pkg):
            where = str(f.relative_to(ROOT))
            if where in WIRE_ENCODERS:
                continue
            for node in (n for n in ast.walk(tree) if isinstance(n, ast.Call)):
                why = _hand_framed(node, protobuf_types)
                if why is not None:
                    bad.append(f"{where}:{node.lineno} calls encode_frame with {why}; "
                               f"send the message (wire.encode_msg, Connection.send_msg)")
    assert bad == [], "\n" + "\n".join(bad)


_ROUTE_BUILDERS = frozenset(("on", "relay", "on_task", "on_container"))


def test_protobuf_routes_name_the_class_only() -> None:
    """The receive side is typed as sends are: a protobuf route names its class and the registry
    gives its type (``conn_dispatch.on``, ``relay``, ``Owners.on_task``/``on_container``), so a
    class and a type cannot disagree; only ``on_raw`` names a ``MsgType``."""
    bad = []
    for pkg in ("heron_py", "heronpy", *DAEMONS):
        for f, tree in _modules(pkg):
            where = str(f.relative_to(ROOT))
            for node in (n for n in ast.walk(tree) if isinstance(n, ast.Call)):
                func = node.func
                name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
                if name not in _ROUTE_BUILDERS:
                    continue
                for a in node.args:
                    if isinstance(a, ast.Attribute) and isinstance(a.value, ast.Name) and a.value.id == "MsgType":
                        bad.append(f"{where}:{node.lineno} routes MsgType.{a.attr} by its type in {name}(); "
                                   f"name its protobuf class (the registry gives the type)")
    assert bad == [], "\n" + "\n".join(bad)
