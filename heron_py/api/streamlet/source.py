"""A Streamlet source's elements, taken a batch at a time (pure: no emit, no clock of its own).

One element per ``next_tuple`` would cost a Python call into the spout, one into ``get`` and
one emit per element. Here one ``next_tuple`` fills a batch in one C-level loop (``starmap``
over ``repeat``: no Python frame of ours per element), runs the operators fused behind the
source on it (chain.py) and emits the result in one call. ``fill_generator`` keeps heronpy's
Generator contract: ``get()`` returning None means "nothing right now", so the batch ends at
the first None (checked by identity: an element whose ``==`` is odd, a numpy array, is still
an element) and the next ``next_tuple`` asks again. ``fill_supplier`` keeps the supplier's:
every return value is an element, None included.

The batch is sized by ``BatchSizer``: it grows while batches fill fast and shrinks when one
took long, so a slow ``get`` (one that blocks or sleeps) holds the task's thread, its emits
and its control messages back for about ``target_s`` per ``next_tuple``, not for a fixed
number of slow calls, and a fast one runs in batches of up to ``max_elements``. What a batch
can hold is bounded, so backpressure (the runner no longer calling ``next_tuple``) stops the
source within one batch.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from itertools import repeat, starmap, takewhile
from operator import is_not
from typing import Any

# an element is kept while it is not None (identity, as ``value is not None``)
_NOT_NONE = partial(is_not, None)


@dataclass(frozen=True)
class BatchLimits:
    """How large a source's batch may grow, and how long one ``next_tuple`` should take."""

    max_elements: int = 512
    target_s: float = 0.002

    def __post_init__(self) -> None:
        if not (isinstance(self.max_elements, int) and self.max_elements >= 1):
            raise ValueError(f"streamlet source batch: max_elements: expected an int >= 1, "
                             f"found {self.max_elements!r}")
        if not (isinstance(self.target_s, (int, float)) and self.target_s > 0):
            raise ValueError(f"streamlet source batch: target_s: expected seconds > 0, found {self.target_s!r}")


class BatchSizer:
    """The size of the next batch, from how the last ones went.

    Starts at 1. A batch that filled (the source had every element asked for) in under half
    the target doubles the size, up to ``max_elements``; a batch that took over the target
    halves it, down to 1. A batch the source ended early (None: nothing right now) says
    nothing about speed and leaves the size as it is."""

    def __init__(self, limits: BatchLimits = BatchLimits()) -> None:
        self.limits = limits
        self.size = 1

    def observe(self, filled: int, elapsed_s: float) -> None:
        lim = self.limits
        if elapsed_s > lim.target_s:
            self.size = max(1, self.size // 2)
        elif filled >= self.size and elapsed_s * 2 < lim.target_s:
            self.size = min(lim.max_elements, self.size * 2)


def fill_generator(get: Callable[[], Any], n: int, out: list[Any]) -> None:
    """Appends up to ``n`` elements of ``get()`` to ``out``, stopping at the first None (which
    is consumed, as the old one-element spout skipped it). If ``get`` raises, what it returned
    before stays in ``out`` (``list.extend`` keeps it) and the error propagates."""
    out.extend(takewhile(_NOT_NONE, starmap(get, repeat((), n))))


def fill_supplier(supplier: Callable[[], Any], n: int, out: list[Any]) -> None:
    """Appends ``n`` return values of ``supplier()`` to ``out``, None included (heronpy's
    supplier source emits what it returns). A raise keeps the earlier ones in ``out``."""
    out.extend(starmap(supplier, repeat((), n)))
