"""The loop every acked sink bolt runs around ``base.AckedSink`` (PostgreSQL, RabbitMQ, Redis):
inputs are batched up to a size or a delay; a batch is written when full, when its delay passed
(``poll``, called from the bolt's ``heron_poll``) or at a graceful stop (``drain``); an input is
acked only after its batch's write was confirmed, failed when the write failed; after a failure
the system is given a backoff (``Reconnect``) before the next write, and what arrived meanwhile
waits in the buffer and goes out at once when the backoff has passed.

The bolt brings what differs: ``write`` (the batch to the system; raises when it failed; its
result goes to ``confirmed``), ``confirmed`` (ack, or fail an input the system refused),
``failed`` (fail the inputs, log the error, ``Reconnect.failed``) and ``recovered`` (one line
when a write succeeded after an outage). No I/O here and an injected clock, so the loop is tested
without a server (tests/unit/connectors/test_base.py).

Also the pieces the sink bolts shared as private copies: the counters metric and the line that
names a bad input."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from heron_py.api.metrics import IMetric
from heron_py.connectors.base import AckedSink, BatchPolicy
from heron_py.connectors.common import Reconnect

T = TypeVar("T")  # an input of the batch (the bolts keep (tuple, what to write))
R = TypeVar("R")  # what a write returns to ``confirmed``


class CountsMetric(IMetric):
    """A dict of counters the bolt increments, exported and reset every metrics interval."""

    def __init__(self, counts: dict[str, int]) -> None:
        self.counts = counts

    def get_value_and_reset(self) -> dict[str, float]:
        out = {k: float(v) for k, v in self.counts.items()}
        for k in self.counts:
            self.counts[k] = 0
        return out


def short_values(values: Any) -> str:
    """An input's values for a log line, at most 200 characters."""
    s = repr(values)
    return s if len(s) <= 200 else s[:197] + "..."


def bad_input_line(where: str, input_id: str, tup: Any, why: str) -> str:
    """The one line logged when an input is failed for itself (not for an outage)."""
    return f"{where}: input {input_id} from '{tup.component}' ({short_values(tup.values)}): {why}; failing it"


class SinkLoop(Generic[T, R]):
    def __init__(self, policy: BatchPolicy, conn: Reconnect, clock: Callable[[], float],
                 write: Callable[[list[T]], R], confirmed: Callable[[list[T], R], None],
                 failed: Callable[[list[T], Exception, float], None], recovered: Callable[[], None]) -> None:
        self.sink: AckedSink[T] = AckedSink(policy)
        self.conn = conn
        self.clock = clock
        self.write = write
        self.confirmed = confirmed
        self.failed = failed
        self.recovered = recovered

    def add(self, item: T) -> None:
        batch = self.sink.add(item, self.clock())
        if batch is not None:
            self.flush(batch)

    def poll(self) -> bool:
        """Writes the batch that is due; True when idle (not in a backoff, nothing written), the
        moment for a bolt's own housekeeping (RabbitMQ's heartbeats)."""
        now = self.clock()
        if not self.conn.ready(now):
            return False
        batch = self.sink.due(now)
        if batch is None and self.conn.failures and self.sink.buffer:
            batch = self.sink.due(math.inf)  # after an outage: write what waited at once
        if batch is None:
            return True
        self.flush(batch)
        return False

    def flush(self, batch: list[T]) -> None:
        now = self.clock()
        if not self.conn.ready(now):
            self.sink.buffer[:0] = batch  # not yet: kept, written when the backoff has passed
            if self.sink.first_at is None:
                self.sink.first_at = now
            return
        bid = self.sink.started(batch)
        try:
            result = self.write(batch)
        except Exception as e:
            self.failed(self.sink.failed(bid), e, now)
            return
        self.confirmed(self.sink.confirmed(bid), result)
        if self.conn.ok():
            self.recovered()

    def busy(self) -> bool:
        """Inputs are buffered, not yet written (what a bolt's ``heron_busy`` tells an in-process
        run, which then keeps polling it instead of closing it with the batch unwritten)."""
        return bool(self.sink.buffer)

    def drain(self) -> None:
        """A graceful stop writes what is buffered, backoff or not (a kill leaves it to the
        spout's replay)."""
        batch = self.sink.due(math.inf)
        if batch:
            self.conn.next_try = 0.0
            self.flush(batch)
