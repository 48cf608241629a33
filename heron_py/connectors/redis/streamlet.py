"""Redis for the Streamlet API: ``Builder.new_source(RedisStreamGenerator(url, ["s"]))`` and
``streamlet.to_sink(RedisStreamSink(url, "out"))``.

The source reads its streams by entry id (XREAD, no consumer group: a stream is replayable by
id), partition i of n taking streams i, i+n, ...; the id read up to is kept per stream in the
source's state, so in EFFECTIVELY_ONCE mode a restore reads again from the checkpoint's ids and
a stateful count downstream is exact. Without checkpoints it starts from ``start`` ("0": the
beginning, "$": new entries only). An entry without the wanted field is logged once with its id
and skipped.

The sink XADDs each element (a dict as the entry's fields, anything else as ``{"value": str}``)
and returns only when the server answered, so the element is acked after the write; while the
server is unreachable it retries with backoff (the one error line every 10 s), holding the
stream back (backpressure)."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Sequence
from typing import Any

from heron_py.api.streamlet.context import Context
from heron_py.api.streamlet.generator import Generator
from heron_py.api.streamlet.sink import Sink
from heron_py.connectors.base import RetryPolicy
from heron_py.connectors.common import LogThrottle, Reconnect
from heron_py.connectors.redis.config import server_config
from heron_py.connectors.redis.errors import describe
from heron_py.connectors.redis.spout import decode_entry, entry_id


class RedisStreamGenerator(Generator):
    def __init__(self, url: str, streams: Sequence[str], field: str = "value", start: str = "0",
                 with_id: bool = False, batch: int = 500, block_ms: int = 50) -> None:
        """``with_id``: each element is (stream, entry id, value) instead of the value."""
        self.url, self.streams, self.field, self.start = url, list(streams), field, start
        self.with_id, self.batch, self.block_ms = with_id, batch, block_ms

    def setup(self, context: Context) -> None:
        self.where = f"redis stream source task {context.get_task_id()}"
        self.server = server_config({"redis.url": self.url}, self.where)
        self.client = self.server.client()
        idx, n = context.get_partition_index(), context.get_num_partitions()
        mine = self.streams[idx::n]
        state = context.get_state()
        saved = state.get("positions") if state is not None else None
        self.positions: dict[str, str] = {s: str((saved or {}).get(s, self.start)) for s in mine}
        if state is not None:
            state.put("positions", self.positions)  # saved at each checkpoint as it stands
        self.buffer: deque[tuple[str, str, dict[Any, Any] | None]] = deque()
        self.conn = Reconnect(RetryPolicy(initial_s=0.1, max_delay_s=5.0))
        self.throttle = LogThrottle(time.monotonic)

    def _fill(self) -> None:
        now = time.monotonic()
        if not self.positions or not self.conn.ready(now):
            return
        # "$" means "after the newest entry": resolved once, so a restore has a concrete id
        try:
            for s, pos in list(self.positions.items()):
                if pos == "$":
                    last = self.client.xrevrange(s, count=1)
                    self.positions[s] = entry_id(last[0][0]) if last else "0"
            resp = self.client.xread(dict(self.positions), count=self.batch, block=self.block_ms or None)
        except Exception as e:
            self.conn.failed(now)
            line = describe(e, self.where, self.server.address())
            if self.throttle.should_log(line):
                self.logger.warning(line)
            return
        self.conn.ok()
        for raw_stream, entries in resp or []:
            stream = raw_stream.decode() if isinstance(raw_stream, bytes) else str(raw_stream)
            for raw_id, fields in entries:
                self.buffer.append((stream, entry_id(raw_id), fields))

    def get(self) -> Any:
        while True:
            if not self.buffer:
                self._fill()
                if not self.buffer:
                    return None
            stream, eid, fields = self.buffer.popleft()
            self.positions[stream] = eid  # a checkpoint from now on covers this entry
            values, why = decode_entry(fields, (self.field,))
            if values is None:
                self.logger.error(f"{self.where}: entry {eid} of stream '{stream}' is malformed: {why}; skipped")
                continue
            return (stream, eid, values[0]) if self.with_id else values[0]


class RedisStreamSink(Sink):
    def __init__(self, url: str, stream: str, maxlen: int | None = None) -> None:
        self.url, self.stream, self.maxlen = url, stream, maxlen

    def setup(self, context: Context) -> None:
        self.where = f"redis stream sink task {context.get_task_id()}"
        self.server = server_config({"redis.url": self.url}, self.where)
        self.client = self.server.client()
        self.conn = Reconnect(RetryPolicy(initial_s=0.1, max_delay_s=5.0))
        self.throttle = LogThrottle(time.monotonic)
        self.errors = 0

    def put(self, element: Any) -> None:
        from heron_py.connectors.redis.mappers import field_value

        fields = {str(k): field_value(v) for k, v in element.items()} if isinstance(element, dict) \
            else {"value": field_value(element)}
        while True:
            try:
                self.client.xadd(self.stream, fields, maxlen=self.maxlen, approximate=True)
                self.conn.ok()
                return
            except Exception as e:
                import redis.exceptions as rx
                if not isinstance(e, (rx.ConnectionError, rx.TimeoutError)):
                    raise  # a refused command (wrong type, ...): the task's error, as any sink's
                self.errors += 1
                delay = self.conn.failed(time.monotonic())
                line = describe(e, self.where, self.server.address())
                if self.throttle.should_log(line):
                    self.logger.warning(line)
                time.sleep(delay)

    @property
    def logger(self) -> Any:
        import logging
        return logging.getLogger(f"heron_py.streamlet.{type(self).__name__}")

    def cleanup(self) -> None:
        self.client.close()
