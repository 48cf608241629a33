"""Stream manager: one per container; routes tuple batches, joins the clique."""

# heron_py first: with HERON_PY_PURE=1 it makes this package's compiled modules load from source
import heron_py as _heron_py  # noqa: F401
