"""Spout-side at-least-once bookkeeping and the task's reliability metrics. Pure (injected clock).

The stream manager of the spout's container keeps the XOR state of every root; the spout
task keeps which message id each root stands for, so that ``ack(id)`` or ``fail(id)`` is
called exactly once: a root leaves ``pending`` on its first outcome, and any later outcome
for it is ignored. The task also times roots out on its own, a little after the stream
manager would, so a root whose tracker state died with a stream manager is still failed.
"""

from __future__ import annotations

import collections
import logging
import os
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from heron_py.common.config import ReliabilityConfig
from heron_py.common.framing import RESULT_ACKED, RESULT_FAILED, RESULT_TIMED_OUT
from heron_py.runtime.tracked import Edges

# the stream manager's rotating map times a root out between T and 1.5 T (3 buckets)
LOCAL_TIMEOUT_FACTOR = 1.5
LOCAL_TIMEOUT_SLACK_S = 1.0


@dataclass
class TaskMetrics:
    acked: int = 0  # bolt: inputs acked; spout: tuples whose tree completed (a run's count them all)
    failed: int = 0
    timed_out: int = 0
    # a bolt's process latency (Storm's: from a tuple's arrival to its ack), summed over the
    # acks timed (process_samples)
    process_ms_total: float = 0.0
    # the acks whose process latency was timed (1 in InstanceConfig.latency_sample_every)
    process_samples: int = 0
    latencies_ms: collections.deque[float] = field(default_factory=lambda: collections.deque(maxlen=10_000))
    _last: tuple[int, int, int] = (0, 0, 0)

    def percentile(self, q: float) -> float | None:
        if not self.latencies_ms:
            return None
        s = sorted(self.latencies_ms)
        return s[min(len(s) - 1, int(q * len(s)))]

    def log_if_changed(self, log: logging.Logger, rel: Reliability | None) -> None:
        now = (self.acked, self.failed, self.timed_out)
        if now == self._last:
            return
        self._last = now
        extra = ""
        if rel is not None:
            p50, p99 = self.percentile(0.5), self.percentile(0.99)
            extra = (f" pending={len(rel.pending)} complete_latency_ms p50={p50 if p50 is None else round(p50, 2)}"
                     f" p99={p99 if p99 is None else round(p99, 2)}")
        log.info("metrics: acked=%d failed=%d timed_out=%d%s", *now, extra)


class _Unknown:
    pass


class Reliability:
    UNKNOWN: Any = _Unknown()

    def __init__(self, timeout_s: float, max_pending: int | None, clock: Callable[[], float],
                 metrics: TaskMetrics | None = None, rng: random.Random | None = None,
                 sample_every: int = 1) -> None:
        self.timeout_s = timeout_s
        # the complete latency of 1 acked root in ``sample_every`` goes into the metrics, the
        # first included, as Storm samples it at topology.stats.sample.rate (InstanceConfig.
        # latency_sample_every), counted by the roots acked here (``_acked_roots``: a run's root
        # counts once, where ``metrics.acked`` counts its tuples and would step over the sample
        # points); a hook's info still gets every root's own (``resolve``)
        self.sample_every = max(1, sample_every)
        self._acked_roots = 0
        self.max_pending = max_pending
        self.clock = clock
        self.metrics = metrics or TaskMetrics()
        # root → (message id, emit time); insertion order = emit order, so expiry scans the front
        self.pending: collections.OrderedDict[int, tuple[Any, float]] = collections.OrderedDict()
        # a root that stands for a run of n > 1 tuples (``emitted_run``) → n, and the sum of
        # their n - 1: max pending and the metrics count tuples, as Storm's do, not roots
        self._weights: dict[int, int] = {}
        self._extra = 0
        self._immediate: list[Any] = []
        # the latency of the root last resolved or expired, for the task hooks' infos
        self.last_latency_ms = 0.0
        # seeded once from the OS (a root id is a draw, not an os.urandom syscall): nonzero
        # 64-bit ids from the emitter's generator (tracked.Edges, C code), bound for the hot path
        self.draw_root = Edges((rng or random.Random(os.urandom(16))).getrandbits(64)).draw

    @classmethod
    def from_config(cls, conf: ReliabilityConfig, clock: Callable[[], float],
                    metrics: TaskMetrics | None = None, sample_every: int = 1) -> Reliability | None:
        """None at most once: no bookkeeping at all."""
        if not conf.acking:
            return None
        return cls(conf.timeout_s, conf.max_pending, clock, metrics, sample_every=sample_every)

    def new_root(self) -> int:
        root: int = self.draw_root()
        return root

    def emitted(self, root: int, tup_id: Any, xor: int) -> None:
        if xor == 0:
            # no consumer got a copy: the tree is complete already (Storm acks at once)
            self._immediate.append(tup_id)
            self.metrics.acked += 1
        else:
            self.pending[root] = (tup_id, self.clock())

    def emitted_many(self, roots: Sequence[int], tup_ids: Sequence[Any], xors: Sequence[int]) -> None:
        """``emitted`` for a batch (``Emitter.emit_root_many``'s XORs), with one clock read;
        lists of different lengths are refused before any root is recorded."""
        if not len(roots) == len(tup_ids) == len(xors):
            raise ValueError(f"emitted_many: {len(roots)} roots, {len(tup_ids)} message ids and {len(xors)} XORs; "
                             f"one of each per tuple")
        now = self.clock()
        pending = self.pending
        for root, tup_id, xor in zip(roots, tup_ids, xors, strict=True):
            if xor == 0:
                self._immediate.append(tup_id)
                self.metrics.acked += 1
            else:
                pending[root] = (tup_id, now)

    def emitted_run(self, root: int, tup_id: Any, xor: int, n: int) -> None:
        """``emitted`` for a run of ``n`` tuples under one root and one message id
        (``Emitter.emit_root_run``): one outcome for all of them, counted as ``n`` tuples."""
        if xor == 0:
            self._immediate.append(tup_id)
            self.metrics.acked += n
            return
        self.pending[root] = (tup_id, self.clock())
        if n > 1:
            self._weights[root] = n
            self._extra += n - 1

    def _weight(self, root: int) -> int:
        """How many tuples a resolved root stood for (1 unless a run's), forgotten here."""
        n = self._weights.pop(root, 1)
        self._extra -= n - 1
        return n

    def take_immediate(self) -> list[Any]:
        out, self._immediate = self._immediate, []
        return out

    def room(self) -> int:
        if self.max_pending is None:
            return 1 << 30
        return self.max_pending - len(self.pending) - self._extra

    def resolve(self, root: int, outcome: int) -> Any:
        entry = self.pending.pop(root, None)
        if entry is None:
            return self.UNKNOWN
        tup_id, t0 = entry
        n = self._weight(root) if self._weights else 1
        latency_ms = self.last_latency_ms = (self.clock() - t0) * 1000.0
        if outcome == RESULT_ACKED:
            if not self._acked_roots % self.sample_every:
                self.metrics.latencies_ms.append(latency_ms)
            self._acked_roots += 1
            self.metrics.acked += n
        elif outcome == RESULT_FAILED:
            self.metrics.failed += n
        elif outcome == RESULT_TIMED_OUT:
            self.metrics.timed_out += n
        return tup_id

    def resolve_acked_run(self, records: Sequence[tuple[int, int]], i: int, acked: list[Any]) -> int:
        """``resolve`` for ``records[i:]`` (a result frame's (outcome, root) records) while they
        are acks, with one clock read and the latency of the sampled ones only (no hook needs
        each): the message ids of the roots still pending are appended to ``acked``. Returns the
        index of the first record that is not an ack (the length when none is), which the caller
        resolves with ``resolve``."""
        n = len(records)
        now = self.clock()
        pending_pop = self.pending.pop
        latency = self.metrics.latencies_ms.append
        append = acked.append
        every, k, r = self.sample_every, self.metrics.acked, self._acked_roots
        weights = self._weights
        while i < n:
            outcome, root = records[i]
            if outcome != RESULT_ACKED:
                break
            entry = pending_pop(root, None)
            if entry is not None:
                if not r % every:
                    self.last_latency_ms = ms = (now - entry[1]) * 1000.0
                    latency(ms)
                r += 1
                k += self._weight(root) if weights else 1
                append(entry[0])
            i += 1
        self.metrics.acked, self._acked_roots = k, r
        return i

    def expire(self) -> list[Any]:
        """Message ids of roots older than the local timeout; they leave ``pending``."""
        limit = self.clock() - (self.timeout_s * LOCAL_TIMEOUT_FACTOR + LOCAL_TIMEOUT_SLACK_S)
        out = []
        while self.pending:
            root, (tup_id, t0) = next(iter(self.pending.items()))
            if t0 > limit:
                break
            del self.pending[root]
            self.last_latency_ms = (self.clock() - t0) * 1000.0
            self.metrics.timed_out += self._weight(root) if self._weights else 1
            out.append(tup_id)
        return out
