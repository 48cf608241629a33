"""The errors of the typed id modules (heron_py.acking.roots: the tracker's root tables;
heron_py.runtime.tracked: received tuples' roots), in one place: each Python module and its
typed twin (a .pyx cannot import its .py: it is compiled in its place) refuse alike."""

from __future__ import annotations

from heron_py.common.framing import ACK_RECORD


def check_buckets(buckets: int) -> None:
    if buckets < 2:
        raise ValueError(f"rotating map needs at least 2 buckets, found {buckets}")


def body_error(size: int) -> str:
    """A body that is not whole records (an engine bug: the frames of a peer are authenticated)."""
    return (f"ACK_BATCH body: expected a multiple of {ACK_RECORD.size} bytes (kind, root id, value per "
            f"record), found {size} bytes; no record of it was applied")


def shrink_error(buckets: int) -> str:
    return f"rotating map keeps at least 2 buckets: cannot drop one of {buckets}"


def ids_error(n: int) -> str:
    """A received batch's id array that is not whole triples (heron_py.runtime.tracked)."""
    return f"id array: expected 3 ids a tuple (spout task, root id, tuple id), found {n} ids"
