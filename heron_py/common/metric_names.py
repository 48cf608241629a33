"""Heron's metric names, classified: which are counters, and how a name splits into a base
name and labels. The metrics manager (Prometheus families) and the topology master (the
increase of a counter over an interval) both read names this way, so the rule lives here
rather than in either daemon.

Names keep Heron's form (``__emit-count/<stream>``): the part before the first "/" is the
base name and the rest becomes labels (``stream`` for emit counts and arity mismatches,
``source`` and ``stream`` for execute, ack and fail counts and execute latencies, ``reason`` for
dropped tuples, ``key`` otherwise).
"""

from __future__ import annotations

# the component a stream manager's series are labelled with (its task: "stmgr" in Prometheus, the
# container in the master's metrics API), where an instance's carry its component's name
STMGR_COMPONENT = "__stmgr__"

# Heron's metrics that only grow (totals since the process started); everything else is a gauge
COUNTERS = frozenset({"__emit-count", "__execute-count", "__ack-count", "__fail-count", "__time-blocked-ms",
                      "__busy-time-ms", "__time_spent_back_pressure_ms", "__dropped-tuples", "__tuples-in",
                      "__tuples-out", "__bytes-in", "__bytes-out", "__restarts", "__checkpoint-aborted",
                      "__rate-limit-pauses", "__emit-arity-mismatch", "__bad-reports"})

_PER_SOURCE = ("__execute-count", "__execute-latency-ms", "__ack-count", "__fail-count")


def split_name(name: str) -> tuple[str, dict[str, str]]:
    """``__execute-count/sentence/default`` → (``__execute-count``, {source, stream})."""
    base, _, rest = name.partition("/")
    if not rest:
        return base, {}
    parts = rest.split("/")
    if base in _PER_SOURCE and len(parts) == 2:
        return base, {"source": parts[0], "stream": parts[1]}
    if base in ("__emit-count", "__emit-arity-mismatch"):
        return base, {"stream": rest}
    if base == "__dropped-tuples":
        return base, {"reason": rest}
    return base, {"key": rest}


def is_counter(name: str) -> bool:
    """True for a full metric name (``__emit-count/default``) whose base name is a counter."""
    return split_name(name)[0] in COUNTERS
