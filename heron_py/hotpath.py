"""The hot-path modules that installation compiles with Cython, and the switch that makes a
process import their Python source instead.

setup.py compiles each module named in MODULES from its unchanged ``.py`` file (Cython with
plain Python semantics: annotations are not enforced) into an extension module beside it. A
machine without a C compiler, or an install with ``HERON_PY_PURE=1``, gets the ``.py`` files
alone, which behave the same. ``HERON_PY_PURE=1`` in the environment at run time makes every
process import the ``.py`` files even where the extension modules exist (to profile line by
line, or to rule the compiled code out), and in a source checkout an extension module older than
its source is never imported (``stale``; an installed copy's files all date from its install):
heron_py's ``__init__`` installs the finder that does both, and instance
and stream_manager import heron_py first. This module imports nothing of heron-py, since
setup.py reads MODULES from it before anything is installed. ``python -m heron_py.compiled``
prints which form each module is imported in.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import ModuleType

# The per-tuple paths of the instance (emit, routing, encoding, the receive loop, the queues
# and the gateway) and of the stream manager (forwarding, the XOR tracker, which lives in
# heron_py.acking.tracker since the test harness runs it too, its ack service, the links and
# backpressure). Measured in bench/RESULTS.md.
MODULES: tuple[str, ...] = (
    "heron_py.common.framing",
    "heron_py.common.serialization",
    "heron_py.planner.grouping",
    "heron_py.runtime.emitter",
    "heron_py.acking.tracker",
    "heron_py.runtime.host",
    "heron_py.runtime.reliability",
    "instance.execution",
    "instance.gateway",
    "instance.queues",
    "stream_manager.acking",
    "stream_manager.backpressure",
    "stream_manager.clique",
    "stream_manager.forwarder",
    "stream_manager.instances",
    "stream_manager.links",
    "stream_manager.routing",
    # a connector's per-record bookkeeping and the Redis spout's per-entry decode run in the
    # spout task's thread beside the engine's emit (bench/redis_bench.py)
    "heron_py.connectors.base",
    "heron_py.connectors.redis.spout",
    # the stream manager's XOR tracker's tables (one per spout task)
    "heron_py.acking.roots",
    "heron_py.runtime.tracked",
    # a Streamlet task's per-element loops: the fused operators' chain, the source and chain
    # components' batch calls, the repartition's per-element choice (bench/streamlet_wc.py)
    "heron_py.api.streamlet.chain",
    "heron_py.api.streamlet.components",
    "heron_py.api.streamlet.groupings",
    "heron_py.api.streamlet.source",
)

# Of MODULES, those compiled from a typed Cython twin (``.pyx`` beside the ``.py``) instead of
# their ``.py``: the ``.py`` is the reference and the fallback, the twin the same contract in C
# types where Python objects per record were the cost (each module's tests run both: the compiled
# pass and the pure one, and a differential test where both can be imported).
TYPED: tuple[str, ...] = ("heron_py.acking.roots", "heron_py.runtime.tracked")

PURE_ENV = "HERON_PY_PURE"
_EXTENSIONS = tuple(importlib.machinery.EXTENSION_SUFFIXES)


def is_extension(origin: str) -> bool:
    """Whether a module's file is a compiled extension module (not its ``.py``)."""
    return origin.endswith(_EXTENSIONS)


def pure_requested(environ: Mapping[str, str] = os.environ) -> bool:
    return environ.get(PURE_ENV, "") == "1"


def in_source_tree(extension: Path, module: str) -> bool:
    """Whether ``extension`` (module ``module``'s compiled file) sits in a source checkout (an
    editable or in-place build: setup.py beside the top-level packages), where the source can
    change after the build. An installed copy (site-packages) cannot, and pip writes its files at
    install time in the wheel's order, an extension sometimes a few ms before its source."""
    return (extension.parents[module.count(".")] / "setup.py").is_file()


def stale(extension: Path, source: Path) -> bool:
    """An extension module built before its source last changed (an edit, a checkout, a pull
    without reinstalling) would run old code: its source is imported instead."""
    try:
        return source.stat().st_mtime > extension.stat().st_mtime
    except OSError:
        return False


class _SourceFirst(importlib.abc.MetaPathFinder):
    """For a module in MODULES whose extension module the ordinary search found: its ``.py``
    file instead, always (``pure``: HERON_PY_PURE=1) or where the extension is stale."""

    def __init__(self, pure: bool) -> None:
        self.pure = pure

    def find_spec(self, fullname: str, path: Sequence[str] | None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        if fullname not in MODULES:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.origin is None or not is_extension(spec.origin):
            return spec
        extension = Path(spec.origin)
        name = fullname.rpartition(".")[2]
        source = extension.with_name(name + ".py")
        # a typed module is built from its .pyx: stale when that changed since (in a checkout)
        built_from = extension.with_name(name + ".pyx") if fullname in TYPED else source
        old = in_source_tree(extension, fullname) and stale(extension, built_from)
        if source.is_file() and (self.pure or old):
            return importlib.util.spec_from_file_location(fullname, source)
        return spec


def install_finder(environ: Mapping[str, str] = os.environ) -> None:
    """Puts the finder first on sys.meta_path, once per process. It must come before any module
    of MODULES is imported: heron_py's ``__init__`` calls it, and instance and stream_manager
    import heron_py first."""
    if not any(isinstance(f, _SourceFirst) for f in sys.meta_path):
        sys.meta_path.insert(0, _SourceFirst(pure_requested(environ)))
