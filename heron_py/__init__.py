"""heron-py: a Heron-style stream processing engine that runs Storm and Heron topologies."""

from heron_py.hotpath import install_finder as _install_finder

# before any compiled hot-path module can be imported: HERON_PY_PURE=1 and stale extension
# modules send their imports to the .py files (heron_py.hotpath)
_install_finder()
