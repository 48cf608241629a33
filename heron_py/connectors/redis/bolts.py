"""The Redis bolts: RedisStreamBolt (XADD), RedisStoreBolt (storm-redis: SET, HSET, ... and
INCRBY), RedisLookupBolt (storm-redis: GET, HGET, ...; emits through the mapper) and
RedisFilterBolt (storm-redis: passes on the inputs whose key exists).

All four batch their inputs (``redis.batch.size``, ``redis.batch.delay.ms``; the base's
``AckedSink``) and write a batch as one pipeline: an input is acked only after the server
answered its command, and failed when its command failed (one line in the log naming the
input) or when the server could not be reached (the spout replays it; the bolt waits with
backoff before it writes again and counts ``connection-errors`` in its metrics).

Under EFFECTIVELY_ONCE the stream and store bolts write each input exactly once
(heron_py/connectors/committing.py): an input's command arguments are staged in the task's
checkpointed state, and a checkpoint's commands are written when the master says it is complete,
in one MULTI/EXEC with the task's field in the hash ``redis.progress.key`` (the newest checkpoint
written), which a batch at or below it skips. The lookup and filter bolts, which emit, answer
every input that came before a checkpoint's barrier before the barrier passes, and keep a batch
the server did not answer (never failing it) until it does."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from heron_py.api.bolt.bolt import Bolt
from heron_py.common.config import effectively_once
from heron_py.connectors.base import BatchPolicy
from heron_py.connectors.committing import CommittingSink
from heron_py.connectors.common import (
    LogThrottle,
    Reconnect,
    TupleFields,
    component_where,
    opt_fields,
    opt_int,
    opt_str,
)
from heron_py.connectors.redis.config import SinkConfig, sink_config
from heron_py.connectors.redis.errors import ErrorKind, classify, describe
from heron_py.connectors.redis.mappers import (
    FILTERABLE,
    FieldNameMapper,
    RedisDataType,
    RedisLookupMapper,
    RedisStoreMapper,
    field_value,
    filter_command,
    filter_found,
    lookup_command,
    lookup_result,
    mapper_from_config,
    store_command,
    store_value,
)
from heron_py.connectors.sink import CountsMetric, SinkLoop, bad_input_line


class RedisBatchBolt(CommittingSink, Bolt):
    """What the three bolts share: a batch of (input, command arguments), written as one
    pipeline when full or old enough. Subclasses implement ``prepare`` (an input → arguments,
    or raise ValueError: the input is failed), ``queue`` (arguments → a command on the pipeline)
    and may override ``written`` (the command's reply; acks by default)."""

    outputs: list[Any] = []
    heron_poll_interval_s = 0.005  # the runner calls heron_poll: a batch's delay is kept while idle
    clock: Callable[[], float] = time.monotonic
    kind = "redis bolt"
    writes = True  # a sink (its commands change the server); False: it reads and emits

    def initialize(self, config: dict[str, Any], context: Any) -> None:
        self.context = context
        self.where = component_where(self.kind, context)
        self.cfg: SinkConfig = sink_config(config, self.where)
        self.address = self.cfg.server.address()
        self.client = self.cfg.server.client()
        self.fields = TupleFields(context)
        self.conn = Reconnect(self.cfg.reconnect)
        self.loop: SinkLoop[tuple[Any, Any], list[Any]] = SinkLoop(
            BatchPolicy(self.cfg.batch, self.cfg.batch_delay_s), self.conn, self.clock, self._write, self._confirmed,
            self._failed, self._recovered)
        self.throttle = LogThrottle(self.clock)
        self.counts = {"written": 0, "failed": 0, "connection-errors": 0, "bad-inputs": 0}
        self.exact = effectively_once(config)
        self.staging = self.exact and self.writes
        if self.staging:
            self.counts.update({"committed-checkpoints": 0, "skipped-checkpoints": 0})
            self.progress_key = opt_str(config, self.where, "redis.progress.key", None) or \
                f"heron-py:sink-progress:{context.get_topology_name()}/{context.get_component_id()}"
        self.start_commits(self._commit, self._commit_failed)
        self.setup(config)
        context.register_metric("redis", CountsMetric(self.counts), 10)

    def setup(self, config: dict[str, Any]) -> None:
        """The subclass's own options."""

    def prepare(self, tup: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__} does not implement prepare()")

    def queue(self, pipe: Any, args: Any) -> None:
        raise NotImplementedError(f"{type(self).__name__} does not implement queue()")

    def written(self, tup: Any, args: Any, reply: Any) -> None:
        self.ack(tup)

    def process(self, tup: Any) -> None:
        try:
            args = self.prepare(tup)
        except (ValueError, TypeError) as e:
            self._bad(tup, str(e))
            return
        if self.staging:  # its arguments, plain data: they travel in the task's state
            self.committer.commits.add((str(tup.id), args))
            return
        self.loop.add((tup, args))

    def heron_poll(self) -> None:
        if self.staging:
            self.commit_due()
            return
        self.loop.poll()

    def heron_busy(self) -> bool:
        return self.committer.due if self.staging else self.loop.busy()

    def pre_save(self, checkpoint_id: Any) -> None:
        """Effectively once: a lookup's or filter's inputs from before the barrier are answered
        (and their tuples emitted) before it passes; if the server cannot answer them now the
        checkpoint fails, and they stay buffered for the next one."""
        if not self.writes and self.loop.busy():
            self.loop.drain()
            if self.loop.busy():
                raise RuntimeError(f"{self.where}: redis server {self.address} did not answer the inputs that came "
                                   f"before checkpoint {checkpoint_id}; they are kept for the next checkpoint")
        super().pre_save(checkpoint_id)

    def _commit(self, checkpoint_id: int, items: list[tuple[str, Any]]) -> None:
        """One checkpoint's commands and the task's progress in one MULTI/EXEC; nothing when the
        progress shows it written (a replay after a restore, a second notification). WATCH makes
        a concurrent writer of the same task (a zombie of a rolled-back run) retry, then skip."""
        import redis.exceptions as rx

        field = str(self.context.get_task_id())
        with self.client.pipeline(transaction=True) as pipe:
            while True:
                try:
                    pipe.watch(self.progress_key)
                    done = pipe.hget(self.progress_key, field)
                    if done is not None and int(done) >= checkpoint_id:
                        pipe.unwatch()
                        self.counts["skipped-checkpoints"] += 1
                        return
                    pipe.multi()
                    for _input_id, args in items:
                        self.queue(pipe, args)
                    pipe.hset(self.progress_key, field, checkpoint_id)
                    replies = pipe.execute(raise_on_error=False)
                    break
                except rx.WatchError:
                    continue
        self.counts["committed-checkpoints"] += 1
        for (input_id, _args), reply in zip(items, replies, strict=False):
            if isinstance(reply, Exception):  # the server refused that command (a wrong type): logged, left out
                self.counts["bad-inputs"] += 1
                line = f"{self.where}: input {input_id} of checkpoint {checkpoint_id}: the server refused the " \
                       f"command ({reply}); left out"
                if self.throttle.should_log(line):
                    self.log(line, "error")
            else:
                self.counts["written"] += 1
        if self.conn.ok():
            self._recovered()

    def _commit_failed(self, checkpoint_id: int, e: Exception) -> None:
        """Kept staged and retried after the backoff: a complete checkpoint's commands are never dropped."""
        if classify(e) is ErrorKind.OTHER and not _is_redis_error(e):
            raise e
        self._outage(e, self.clock())

    def _write(self, batch: list[tuple[Any, Any]]) -> list[Any]:
        pipe = self.client.pipeline(transaction=False)
        for _tup, args in batch:
            self.queue(pipe, args)
        replies: list[Any] = pipe.execute(raise_on_error=False)
        return replies

    def _confirmed(self, batch: list[tuple[Any, Any]], replies: list[Any]) -> None:
        for (tup, args), reply in zip(batch, replies, strict=True):
            if isinstance(reply, Exception):
                self._bad(tup, f"the server refused the command ({reply})")
            else:
                self.counts["written"] += 1
                self.written(tup, args, reply)

    def _failed(self, batch: list[tuple[Any, Any]], e: Exception, now: float) -> None:
        if classify(e) is ErrorKind.OTHER and not _is_redis_error(e):
            raise e
        self._outage(e, now)
        if self.exact:
            # effectively once has no replay of a failed input: kept, answered after the backoff
            self.loop.sink.buffer[:0] = batch
            if self.loop.sink.first_at is None:
                self.loop.sink.first_at = now
            return
        for tup, _args in batch:
            self.counts["failed"] += 1
            self.fail(tup)  # the spout replays it

    def _outage(self, e: Exception, now: float) -> None:
        self.conn.failed(now)
        self.counts["connection-errors"] += 1
        line = describe(e, self.where, self.address, max_backoff_s=self.cfg.reconnect.max_delay_s)
        if self.throttle.should_log(line):
            self.log(line, "warn")

    def _recovered(self) -> None:
        self.log(f"{self.where}: redis server {self.address} reachable again")

    def _bad(self, tup: Any, why: str) -> None:
        self.counts["bad-inputs"] += 1
        line = bad_input_line(self.where, str(tup.id), tup, why)
        if self.throttle.should_log(line):
            self.log(line, "error")
        self.fail(tup)

    def cleanup(self) -> None:
        if not self.staging:  # under effectively once nothing is written that no complete checkpoint holds
            self.loop.drain()
        self.client.close()


def _is_redis_error(e: Exception) -> bool:
    import redis.exceptions as rx

    return isinstance(e, rx.RedisError)


class RedisStreamBolt(RedisBatchBolt):
    """XADD of each input to ``redis.stream`` (or the stream named by the field
    ``redis.stream.field``); the entry's fields are the input's ``redis.fields`` (default: all
    of them). ``redis.maxlen`` trims the stream (approximately, ``MAXLEN ~``)."""

    kind = "redis stream bolt"

    def setup(self, config: dict[str, Any]) -> None:
        self.stream = opt_str(config, self.where, "redis.stream", None)
        self.stream_field = opt_str(config, self.where, "redis.stream.field", None)
        if (self.stream is None) == (self.stream_field is None):
            from heron_py.connectors.common import config_error
            raise config_error(self.where, "redis.stream / redis.stream.field", "exactly one of them",
                               {"redis.stream": self.stream, "redis.stream.field": self.stream_field})
        self.names = opt_fields(config, self.where, "redis.fields", ()) if "redis.fields" in config else None
        maxlen = opt_int(config, self.where, "redis.maxlen", 0, 0)
        self.maxlen = maxlen or None

    def prepare(self, tup: Any) -> Any:
        have = self.fields.as_dict(tup)
        if self.names is None:
            entry = {k: field_value(v) for k, v in have.items()}
        else:
            missing = [n for n in self.names if n not in have]
            if missing:
                raise ValueError(f"expected fields {list(self.names)}, found {sorted(have)}")
            entry = {n: field_value(have[n]) for n in self.names}
        if not entry:
            raise ValueError("expected at least one field, found none")
        stream = self.stream if self.stream is not None else have.get(self.stream_field or "")
        if not stream:
            raise ValueError(f"expected a stream name in field '{self.stream_field}', found {stream!r}")
        return str(stream), entry

    def queue(self, pipe: Any, args: Any) -> None:
        stream, entry = args
        pipe.xadd(stream, entry, maxlen=self.maxlen, approximate=True)


class _MappedBolt(RedisBatchBolt):
    """A bolt whose inputs go through a storm-redis mapper (``role``: store, lookup, filter)."""

    role = "store"
    mapper: Any

    def setup(self, config: dict[str, Any]) -> None:
        self.mapper = mapper_from_config(config, self.where, self.role)
        if isinstance(self.mapper, FieldNameMapper):
            self.mapper.fields_of = self.fields
        self.desc = self.mapper.get_data_type_description()

    def key_of(self, tup: Any) -> Any:
        key = self.mapper.get_key_from_tuple(tup)
        if key is None:
            raise ValueError("the mapper found no key; expected one")
        return field_value(key)

    @classmethod
    def spec(cls, name: str | None = None, inputs: Any = None, par: int = 1, config: dict[str, Any] | None = None,
             optional_outputs: list[Any] | None = None) -> Any:
        """The mapper is checked here: a bad one is refused at submit, not in the task; the
        outputs are ``outputs_of`` the mapper."""
        from heron_py.api.component.component_spec import HeronComponentSpec

        conf = dict(config or {})
        where = f"{cls.kind} '{name}'"
        outputs = cls.outputs_of(mapper_from_config(conf, where, cls.role), conf, where)
        return HeronComponentSpec(name, cls, False, par, inputs=inputs,
                                  outputs=[*outputs, *list(optional_outputs or [])], config=conf)

    @classmethod
    def outputs_of(cls, mapper: Any, conf: dict[str, Any], where: str) -> list[Any]:
        """What the bolt declares (a store bolt: nothing)."""
        return list(cls.outputs)


class RedisStoreBolt(_MappedBolt):
    """storm-redis's RedisStoreBolt: the mapper gives each input's key and value and the data
    type the command (SET, HSET, RPUSH, SADD, ZADD, PFADD, GEOADD, INCRBY, HINCRBY)."""

    kind = "redis store bolt"
    mapper: RedisStoreMapper

    def prepare(self, tup: Any) -> Any:
        key, value = self.mapper.get_key_from_tuple(tup), self.mapper.get_value_from_tuple(tup)
        if key is None or value is None:
            raise ValueError(f"the mapper found key {key!r} and value {value!r}; expected both")
        return field_value(key), store_value(self.desc, value)

    def queue(self, pipe: Any, args: Any) -> None:
        store_command(pipe, self.desc, *args)


class RedisLookupBolt(_MappedBolt):
    """storm-redis's RedisLookupBolt: reads each input's key (GET, HGET, LPOP, SCARD, ZSCORE,
    PFCOUNT, GEOPOS by data type) and emits what the mapper's ``to_tuple(input, value)`` returns,
    anchored to the input, before acking it."""

    kind = "redis lookup bolt"
    role = "lookup"
    writes = False
    mapper: RedisLookupMapper

    @classmethod
    def outputs_of(cls, mapper: Any, conf: dict[str, Any], where: str) -> list[Any]:
        """The mapper's ``declare_output_fields()``."""
        return list(mapper.declare_output_fields())

    def prepare(self, tup: Any) -> Any:
        return self.key_of(tup)

    def queue(self, pipe: Any, args: Any) -> None:
        lookup_command(pipe, self.desc, args)

    def written(self, tup: Any, args: Any, reply: Any) -> None:
        for values in self.mapper.to_tuple(tup, lookup_result(self.desc, reply)):
            self.emit(values, anchors=[tup])
        self.ack(tup)


class RedisFilterBolt(_MappedBolt):
    """storm-redis's RedisFilterBolt: an input whose key is there (EXISTS for STRING; HEXISTS,
    SISMEMBER, ZRANK, GEOPOS in the structure named by the additional key; PFCOUNT > 0) is
    emitted unchanged, anchored, on ``redis.filter.stream`` (default the default stream, Storm's
    streamId argument); every answered input is acked. The outputs are the mapper's
    ``declare_output_fields()`` (the input's fields)."""

    kind = "redis filter bolt"
    role = "filter"
    writes = False

    @classmethod
    def outputs_of(cls, mapper: Any, conf: dict[str, Any], where: str) -> list[Any]:
        """The mapper's ``declare_output_fields()`` on the filter's stream."""
        from heron_py.api.stream import Stream

        _check_filterable(mapper.get_data_type_description(), where)
        return [Stream(list(mapper.declare_output_fields()), name=_filter_stream(conf, where))]

    def setup(self, config: dict[str, Any]) -> None:
        super().setup(config)
        _check_filterable(self.desc, self.where)
        self.stream = _filter_stream(config, self.where)
        self.counts.update({"passed": 0, "dropped": 0})

    def prepare(self, tup: Any) -> Any:
        return self.key_of(tup)

    def queue(self, pipe: Any, args: Any) -> None:
        filter_command(pipe, self.desc, args)

    def written(self, tup: Any, args: Any, reply: Any) -> None:
        if filter_found(self.desc, reply):
            self.counts["passed"] += 1
            self.emit(list(tup.values), stream=self.stream, anchors=[tup])
        else:
            self.counts["dropped"] += 1
        self.ack(tup)


def _filter_stream(conf: dict[str, Any], where: str) -> str:
    from heron_py.api.stream import Stream

    return opt_str(conf, where, "redis.filter.stream", None) or Stream.DEFAULT_STREAM_ID


def _check_filterable(desc: Any, where: str) -> None:
    from heron_py.connectors.common import config_error

    t = desc.data_type
    if t not in FILTERABLE:
        raise config_error(where, "redis.data.type", f"a data type a filter can check, one of "
                                                     f"{[x.value for x in FILTERABLE]}", t.value)
    if t is RedisDataType.SET and not desc.additional_key:
        raise config_error(where, "redis.additional.key", "the set's name (data type SET: a filter checks the "
                                                          "tuple's key is its member)", desc.additional_key)
