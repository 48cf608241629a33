"""Alias of heron_py.api.global_metrics (the same module object, so its counter is shared)."""

import sys

from heron_py.api import global_metrics

sys.modules[__name__] = global_metrics
