"""The element operators of one streamlet task, applied to a whole batch of elements at once.

A chain is the operators between two repartitions that run in one task (``graph.fuse``):
map, flat_map, filter, the pass-through of a repartition, and at its end a consume, a log
or a sink. Pure logic: no emit, no ack, no I/O of its own (a consume or sink function does
what it does). The bolts in components.py feed it one received batch and emit what comes out.

Each operator runs as one C-level iteration over the batch where the function allows it
(``list.extend(map(fn, xs))``, ``filter``), so there is no Python frame, no tuple object and
no emit per intermediate element. A function that raises stops that C loop at the failing
element: ``list.extend`` keeps what it appended before the error, which tells exactly which
element failed. That element is reported to ``on_error`` (the bolt logs it, counts it and,
when its tuple is tracked, fails it) and the loop resumes after it, so every other element
is processed exactly once and a user function is never called twice on one element.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from itertools import islice
from typing import Any

MAP = "map"
FLATMAP = "flatmap"
FILTER = "filter"
PASS = "pass"
CONSUME = "consume"
LOG = "log"
SINK = "sink"
# the operators that may be fused behind another: element-wise and stateless
ELEMENT_KINDS = (MAP, FLATMAP, FILTER)
TAIL_KINDS = (CONSUME, LOG, SINK)
KINDS = (*ELEMENT_KINDS, PASS, *TAIL_KINDS)

# (operator index in the chain, the element it failed on, the error)
OnError = Callable[[int, Any, Exception], None]


@dataclass(frozen=True)
class Op:
    kind: str
    name: str  # the streamlet's name: logs and metrics say which operator of a fused task
    fn: Callable[[Any], Any] | None  # None for PASS; a LOG's is its logging call


def apply_map(fn: Callable[[Any], Any], xs: Sequence[Any], out: list[Any], on_error: Callable[[Any, Exception],
              None]) -> list[int]:
    """out += [fn(x) for x in xs], in C, skipping (and reporting) the elements fn raises on.
    Returns the indexes in ``xs`` of those skipped elements (usually none)."""
    start, n = 0, len(xs)
    skipped: list[int] = []
    while start < n:
        before = len(out)
        try:
            out.extend(map(fn, islice(xs, start, None)) if start else map(fn, xs))
            break
        except Exception as e:  # a user function: what it raises is its element's
            bad = start + len(out) - before
            on_error(xs[bad], e)
            skipped.append(bad)
            start = bad + 1
    return skipped


def _apply_filter(fn: Callable[[Any], Any], xs: Sequence[Any], out: list[Any],
                  on_error: Callable[[Any, Exception], None]) -> None:
    """The elements fn is true for. ``filter`` cannot say where it stopped, so the flags are
    computed with map (which can) and the elements kept with ``itertools.compress``."""
    from itertools import compress

    flags: list[Any] = []
    start, n = 0, len(xs)
    while start < n:
        before = len(flags)
        try:
            flags.extend(map(fn, islice(xs, start, None)) if start else map(fn, xs))
            break
        except Exception as e:
            bad = start + len(flags) - before
            on_error(xs[bad], e)
            flags.append(False)  # a failed element is not kept
            start = bad + 1
    out.extend(compress(xs, flags))


def _expand(results: list[Any], out: list[Any], on_error: Callable[[Any, Exception], None]) -> None:
    """heronpy's flat_map rule: an iterable result's elements, else the result itself (a str
    is iterable: its characters). One Python step per input element, a C extend per result.
    A result that raises while iterated (a generator) is reported with what it gave so far
    kept: it was already produced (as the unfused bolt had emitted it)."""
    extend, append = out.extend, out.append
    for r in results:
        if type(r) is list or type(r) is tuple:
            extend(r)
        elif isinstance(r, Iterable):
            try:
                extend(r)
            except Exception as e:
                on_error(r, e)
        else:
            append(r)


def _apply_each(fn: Callable[[Any], Any], xs: Sequence[Any], on_error: Callable[[Any, Exception], None]) -> None:
    """fn(x) for its effect (consume, log, sink), every element once."""
    for x in xs:
        try:
            fn(x)
        except Exception as e:
            on_error(x, e)


class Chain:
    """The operators of one task in order; ``run`` applies them to a batch of elements.
    ``counts_in``/``counts_out`` are per operator, since the task started (the bolt turns
    their increases into user metrics)."""

    def __init__(self, ops: Sequence[Op]) -> None:
        if not ops:
            raise ValueError("a streamlet chain needs at least one operator, found none")
        for i, op in enumerate(ops):
            if op.kind not in KINDS:
                raise ValueError(f"streamlet chain operator {i} ('{op.name}'): expected one of "
                                 f"{', '.join(KINDS)}, found {op.kind!r}")
            if op.kind in TAIL_KINDS and i != len(ops) - 1:
                raise ValueError(f"streamlet chain operator {i} ('{op.name}'): a {op.kind} ends a chain, "
                                 f"found it before {len(ops) - 1 - i} more")
            if op.kind != PASS and op.fn is None:
                raise ValueError(f"streamlet chain operator {i} ('{op.name}'): a {op.kind} needs a function, "
                                 f"found None")
        self.ops = tuple(ops)
        self.counts_in = [0] * len(ops)
        self.counts_out = [0] * len(ops)
        self.emits = ops[-1].kind not in TAIL_KINDS

    def run(self, xs: Sequence[Any], on_error: OnError) -> list[Any]:
        """What the chain outputs for the batch ``xs`` (empty for a chain that ends in a sink).
        An element an operator raises on is dropped there and reported to ``on_error``."""
        cur: Sequence[Any] = xs
        counts_in, counts_out = self.counts_in, self.counts_out
        for i, op in enumerate(self.ops):
            counts_in[i] += len(cur)
            kind = op.kind
            if kind == PASS:
                counts_out[i] += len(cur)
                continue
            fn = op.fn
            assert fn is not None

            def report(x: Any, e: Exception, i: int = i) -> None:
                on_error(i, x, e)

            nxt: list[Any] = []
            if kind == MAP:
                apply_map(fn, cur, nxt, report)
            elif kind == FILTER:
                _apply_filter(fn, cur, nxt, report)
            elif kind == FLATMAP:
                results: list[Any] = []
                apply_map(fn, cur, results, report)
                _expand(results, nxt, report)
            else:
                _apply_each(fn, cur, report)
            counts_out[i] += len(nxt)
            cur = nxt
        return cur if isinstance(cur, list) else list(cur)
