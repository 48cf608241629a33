"""Heron instance: one task per process, a gateway thread and an execution thread."""

# heron_py first: its import finder decides whether this package's compiled modules or their
# sources are imported (HERON_PY_PURE=1, stale extension modules: heron_py.hotpath)
import heron_py as _heron_py  # noqa: F401
