"""RedisStreamSpout: a Redis stream read through a consumer group, at least once.

Each task is one consumer of the group (``redis.consumer``, default ``<component>-<task id>``,
so a restarted task is the same consumer). Entries are read with XREADGROUP; an entry is
XACKed when its tuple tree is acked (acks are sent in one XACK per loop) and replayed from
memory with backoff when it fails (``heron_py.connectors.base.ReplayableSource``). At start a
task first reads its own pending entries (XREADGROUP from id 0: what it emitted and never
acked before a crash), then new ones (id ``>``). Entries left pending by a consumer that is gone
(a task of an earlier deployment, a consumer name changed) are claimed with XAUTOCLAIM once they
have been idle ``redis.claim.idle.ms``.

In EFFECTIVELY_ONCE mode (no acks) the spout reads the stream by id instead (XREAD, no
group): the id read up to is its checkpointed state (``init_state``/``pre_save``), so a restore
reads again from the checkpoint's id; it starts at ``redis.group.start.id``.

An entry without one of the ``redis.fields`` (or one not UTF-8) is malformed: it is not emitted,
is logged once with its id, counted in the metric ``malformed`` and XACKed, so it never stops
the topology. A server that is down, refuses the credentials or lacks the stream or group is
one line in the log (repeated at most every 10 s), retried with exponential backoff, and
counted in the metric ``connection-errors``.

Speed: XREADGROUP's reply is taken raw (no dict per entry); redis-py parses replies
with hiredis, its C parser, which the ``[redis]`` extra installs (without it redis-py's own
Python parser is the largest part of the spout's time); a ``>`` read's entries are decoded by
``fresh_rows`` and recorded in one ``emitted_many`` pass. At least once, a full ``>`` read is
followed at once by the next one, sent (with the XACK of the acks due) before the entries just
read are emitted and read back at the next call: the server reads and the engine emits at the
same time, in one thread (``ReadAhead``). Entries read ahead belong to this consumer's pending
list as any read's do, so a crash loses none of them (the restarted task reads its own pending
entries first), a deactivated spout keeps them for its activation, and a broken connection puts
the XACK it carried back among the acks due.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from heron_py.api.metrics import IMetric
from heron_py.api.spout.spout import Spout
from heron_py.api.stream import Stream
from heron_py.connectors.base import ReplayableSource
from heron_py.connectors.common import LogThrottle, Reconnect, component_where, source_acking
from heron_py.connectors.redis.config import StreamSpoutConfig, stream_spout_config
from heron_py.connectors.redis.errors import ErrorKind, classify, describe
from heron_py.connectors.runs import RunIds

Key = tuple[str, int]  # the ReplayableSource message id: (stream, emit sequence number)


def decode_entry(fields: dict[Any, Any] | None, names: tuple[str, ...]) -> tuple[list[Any] | None, str]:
    """An entry's values of ``names`` (str), or None and why it is malformed."""
    if not fields:
        return None, "it has no fields (deleted)"
    got: dict[str, str] = {}
    for k, v in fields.items():
        try:
            ks = k.decode("utf-8") if isinstance(k, bytes) else str(k)
            got[ks] = v.decode("utf-8") if isinstance(v, bytes) else str(v)
        except UnicodeDecodeError:
            return None, f"field {k!r} is not UTF-8"
    missing = [n for n in names if n not in got]
    if missing:
        return None, f"expected fields {list(names)}, found {sorted(got)}"
    return [got[n] for n in names], ""


def decode_flat(fields: Any, names: tuple[str, ...], keys: tuple[bytes, ...]) -> tuple[list[Any] | None, str]:
    """``decode_entry`` over the raw reply's flat [k1, v1, k2, v2, ...] list. The fast path is an
    entry holding exactly ``keys`` in that order (what a producer of one field writes): no dict,
    one decode per value."""
    if type(fields) is list and len(fields) == 2 * len(keys) and tuple(fields[0::2]) == keys:
        try:
            return [v.decode("utf-8") if type(v) is bytes else str(v) for v in fields[1::2]], ""
        except UnicodeDecodeError:
            pass  # the general path names the field
    if isinstance(fields, list):
        fields = dict(zip(fields[0::2], fields[1::2], strict=False))
    return decode_entry(fields, names)


Record = tuple[int, tuple[Any, list[Any]]]  # (emit sequence number, (the entry id as read, the row))


def fresh_rows(entries: list[Any], names: tuple[str, ...], keys: tuple[bytes, ...], inflight: dict[str, Key],
               seq: int) -> tuple[list[Record], list[tuple[str, str]], int]:
    """The records to emit of a ``>`` read's raw entries, numbered from ``seq + 1``; the
    malformed ones (id, why); the last number. An entry in ``inflight`` is skipped (a group made
    again, lost or destroyed, hands out entries in flight here). One field (the default) is read
    inline: no dict, no call."""
    one = keys[0] if len(keys) == 1 else None
    records: list[Record] = []
    bad: list[tuple[str, str]] = []
    append = records.append
    for raw_id, fields in entries:
        eid = raw_id.decode("ascii") if type(raw_id) is bytes else str(raw_id)
        if eid in inflight:
            continue
        row: list[Any] | None = None
        if one is not None and type(fields) is list and len(fields) == 2 and fields[0] == one:
            v = fields[1]
            try:
                row = [eid, v.decode("utf-8") if type(v) is bytes else str(v)]
            except UnicodeDecodeError:
                pass  # decode_flat names the field
        if row is None:
            values, why = decode_flat(fields, names, keys)
            if values is None:
                bad.append((eid, why))
                continue
            values.insert(0, eid)  # the row: id, then the fields
            row = values
        seq += 1
        # the id as the server sent it goes back in the XACK (bytes: redis-py encodes nothing)
        append((seq, (raw_id, row)))
    return records, bad, seq


def emit_rows(records: list[Record], ids: list[Key | None], inflight: dict[str, Key],
              host_emit: Callable[..., Any] | None, emit: Callable[..., Any],
              emit_many: Callable[[list[Any], list[Key]], None] | None = None,
              emit_run: Callable[[list[Any], Any], None] | None = None, runs: RunIds | None = None) -> None:
    """Emits each record ``emitted_many`` gave an id (None: stale): all in one call as one
    tuple tree under a run's id from ``runs`` when ``emit_run`` is given, else in one call of
    the host's batch emit, else through the host's emit (positional, as the host takes it), else
    the spout's ``emit``."""
    if emit_run is not None and runs is None:  # refused before any record is registered in flight
        raise ValueError("emit_rows: a run emit needs the RunIds that name its runs")
    if emit_many is not None or emit_run is not None:
        rows: list[Any] = []
        keys: list[Key] = []
        for (_seq, rec), key in zip(records, ids, strict=True):
            if key is not None:
                row = rec[1]
                inflight[row[0]] = key
                rows.append(row)
                keys.append(key)
        if not rows:
            return
        if emit_run is not None and runs is not None:
            emit_run(rows, runs.add(keys))
        elif emit_many is not None:
            emit_many(rows, keys)
        return
    for (_seq, rec), key in zip(records, ids, strict=True):
        if key is not None:
            row = rec[1]
            inflight[row[0]] = key
            if host_emit is not None:
                host_emit(row, Stream.DEFAULT_STREAM_ID, None, None, False, key)
            else:
                emit(row, tup_id=key)


def _raw_entries(resp: Any, stream: str) -> list[Any]:
    """The entries of the one stream read from a raw XREADGROUP reply: RESP3 a map
    {stream: entries}, RESP2 a list [[stream, entries]]; None when nothing was read."""
    if not resp:
        return []
    if isinstance(resp, dict):
        for v in resp.values():
            return list(v or [])
        return []
    return list(resp[0][1] or [])


def _raw(response: Any, **_options: Any) -> Any:
    return response


def entry_id(raw: Any) -> str:
    return raw.decode("ascii") if isinstance(raw, bytes) else str(raw)


def _hiredis_packer() -> Callable[[tuple[Any, ...]], bytes] | None:
    """hiredis's C command packer, when the ``[redis]`` extra installed hiredis: redis-py's
    ``pack_commands`` copies each argument in a Python generator first (78 against 37 us for
    an XACK of 500 ids)."""
    try:
        from hiredis import pack_command
    except ImportError:
        return None
    return pack_command


class ReadAhead:
    """One sent and not yet read request of ``[XACK,] XREADGROUP >``, on a connection of its own
    taken from the client's pool (redis-py's pipeline sends and reads in one call; this splits
    the two, so the spout emits a read while the server serves the next). Any error drops the
    connection (a reply left unread on it would answer the next request) and puts the XACK the
    request carried back among the acks due: XACK is idempotent."""

    def __init__(self, client: Any, stream: str, group: str, consumer: str, block_ms: int) -> None:
        self.client = client
        self.stream, self.group, self.consumer, self.block_ms = stream, group, consumer, block_ms
        self.conn: Any = None
        self.due: list[Any] = []  # the entry ids the sent XACK carries
        self.count = 0  # the COUNT asked
        self.sent = False
        self.pack = _hiredis_packer()

    def send(self, count: int, acks: list[Any]) -> None:
        """Sends the XACK of ``acks`` (emptied: the acks that come in meanwhile wait for the next
        request), then XREADGROUP COUNT ``count``: the server runs a connection's commands in
        order, so the acks and the read share one round trip."""
        due = acks[:]
        del acks[:]
        cmds: list[tuple[Any, ...]] = [("XACK", self.stream, self.group, *due)] if due else []
        cmds.append(("XREADGROUP", "GROUP", self.group, self.consumer, "COUNT", count,
                     *(("BLOCK", self.block_ms) if self.block_ms else ()), "STREAMS", self.stream, ">"))
        self.due, self.count, self.sent = due, count, True
        try:
            if self.conn is None:
                self.conn = self.client.connection_pool.get_connection()
            pack = self.pack
            self.conn.send_packed_command([b"".join([pack(c) for c in cmds])] if pack is not None
                                          else self.conn.pack_commands(cmds))
        except BaseException:
            self.cancel(acks)
            raise

    def take(self, acks: list[Any]) -> list[Any]:
        """The entries of the read sent (the raw reply's)."""
        conn = self.conn
        try:
            if self.due:
                conn.read_response()  # the XACK's count
            resp = conn.read_response()
        except BaseException:
            self.cancel(acks)
            raise
        self.sent, self.due = False, []
        return _raw_entries(resp, self.stream)

    def cancel(self, acks: list[Any]) -> None:
        """Nothing stays sent: the XACK sent is due again in ``acks``, the connection is closed and
        given back to the pool (its entries stay in the consumer's pending list)."""
        if self.sent:
            acks[:0] = self.due
        self.sent, self.due = False, []
        if self.conn is not None:
            conn, self.conn = self.conn, None
            try:
                conn.disconnect()
            finally:
                self.client.connection_pool.release(conn)


class _Metrics(IMetric):
    def __init__(self, spout: RedisStreamSpout) -> None:
        self.spout = spout

    def get_value_and_reset(self) -> dict[str, float]:
        return self.spout.metrics_snapshot()


class RedisStreamSpout(Spout):
    """Configured by the component's config (``redis.*``, see docs/connectors/redis.md).
    Emits ``id`` (the entry id) and the entry's ``redis.fields`` (default ``value``)."""
    # the id read up to is one task's: it cannot be split over another parallelism
    # (heron_py/runtime/rescale.py)
    heron_state_rescale = "refuse"

    outputs = ["id", "value"]
    clock: Callable[[], float] = time.monotonic
    # bound by the engine's host when nothing needs to see each emit (no hook, no tap): a
    # read's tuples with their message ids in one call (runtime/host.py)
    heron_emit_tracked_many: Callable[[list[Any], Sequence[Key]], None] | None = None
    # a read's entries as one tuple tree under one id (contracts.TrackedRunEmitSource; connectors/runs.py)
    heron_emit_tracked_run: Callable[[list[Any], Any], None] | None = None

    @classmethod
    def spec(cls, name: str | None = None, par: int = 1, config: dict[str, Any] | None = None,
             optional_outputs: list[Any] | None = None) -> Any:
        """The outputs follow ``redis.fields``."""
        from heron_py.api.component.component_spec import HeronComponentSpec

        conf = dict(config or {})
        cfg = stream_spout_config(conf, f"redis stream spout '{name}'", "g", "c")
        return HeronComponentSpec(name, cls, True, par, inputs=None,
                                  outputs=[Stream(["id", *cfg.fields]), *list(optional_outputs or [])], config=conf)

    # --- effectively once: heronpy's StatefulComponent methods ---------------------------------
    _state: Any = None
    _restored_id: str | None = None

    def init_state(self, stateful_state: Any) -> None:
        """In EFFECTIVELY_ONCE mode the stream is read by id (XREAD, no group: the checkpoint
        holds the id read up to, and a restore reads again from it)."""
        self._state = stateful_state
        saved = stateful_state.get("last_id")
        self._restored_id = None if saved is None else str(saved)

    def pre_save(self, checkpoint_id: Any) -> None:
        self._state.put("last_id", self.last_id)

    # --- lifecycle -----------------------------------------------------------------------------
    def initialize(self, config: dict[str, Any], context: Any) -> None:
        self.context = context
        comp = context.get_component_id()
        self.where = component_where("redis stream spout", context)
        topology = context.get_topology_name()
        self.cfg: StreamSpoutConfig = stream_spout_config(config, self.where, f"heron-py-{topology}-{comp}",
                                                          f"{comp}-{context.get_task_id()}")
        from heron_py.common.config import MODE, effectively_once

        self.eo = effectively_once(config)
        # the engine acks only in at-least-once mode (Storm's acker setting included)
        self.tracked = source_acking(config)
        if not self.tracked and not self.eo:
            self.log(f"{self.where}: the topology has no acking (topology.reliability.mode "
                     f"{MODE.parse(config)}); entries are acknowledged when "
                     f"emitted (at most once); use ATLEAST_ONCE for at least once", "warn")
        self.address = self.cfg.server.address()
        self.client = self.cfg.server.client()
        # XREADGROUP's reply as the server sends it: redis-py's callback builds a dict per entry,
        # which decode_flat does not need (a third of the spout's time per entry, profiled)
        self.client.set_response_callback("XREADGROUP", _raw)
        self._keys = tuple(f.encode("utf-8") for f in self.cfg.fields)
        # no offsets: the group's pending entries list holds each entry's state, XACKed one by one
        self.source: ReplayableSource[str] = ReplayableSource(
            retry=self.cfg.retry, max_in_flight=self.cfg.max_pending, on_give_up=self._gave_up, offsets=False)
        self.source.assign(self.cfg.stream, 0)
        self.inflight: dict[str, Key] = {}  # entry id → message id
        self.runs = RunIds()  # reads emitted as one tree: their ids → their entries' keys
        self.to_xack: list[str | bytes] = []  # entry ids to XACK at the next loop
        # the next read, sent before this one is emitted
        self.ahead = ReadAhead(self.client, self.cfg.stream, self.cfg.group, self.cfg.consumer, self.cfg.block_ms)
        self.held: list[Any] = []  # entries read ahead while deactivated: emitted first at activation
        self.seq = 0
        self.recovered = 0
        self.cursor: str | None = "0"  # reading our own pending entries from here; None: new ones (">")
        self.after_outage = False  # the own pending entries are read again after an outage
        self.group_ready = not self.cfg.create_group or self.eo
        # effectively once: the id read up to (the checkpoint's, else redis.group.start.id)
        self.last_id = self._restored_id or self.cfg.start_id
        self.active = True
        self.conn = Reconnect(self.cfg.reconnect)
        self.throttle = LogThrottle(self.clock)
        self.counts = {"records": 0, "malformed": 0, "claimed": 0, "connection-errors": 0, "reconnects": 0}
        now = self.clock()
        self._next_claim = now + self.cfg.claim_period_s
        context.register_metric("redis", _Metrics(self), 10)
        self.log(f"{self.where}: reading stream '{self.cfg.stream}' of {self.address} as consumer "
                 f"'{self.cfg.consumer}' of group '{self.cfg.group}'")

    def activate(self) -> None:
        self.active = True

    def deactivate(self) -> None:
        self.active = False  # acks of tuples in flight still XACK

    def close(self) -> None:
        # a read sent ahead is not waited for: its entries stay pending for this consumer and
        # are read again first at the next start (XREADGROUP from 0), as any unacked entry is
        self.ahead.cancel(self.to_xack)
        try:
            self._flush_acks()
        except Exception as e:  # closing: the entries stay pending and are read again at the next start
            self.log(f"{self.where}: XACK at close failed ({e}); the entries will be read again", "warn")
        self.client.close()

    # --- the loop ------------------------------------------------------------------------------
    def next_tuple(self) -> None:
        now = self.clock()
        if not self.conn.ready(now):
            time.sleep(min(0.01, max(0.0, self.conn.next_try - now)))
            return
        try:
            if not self.group_ready:
                self._create_group()
            if not self.active:
                if self.ahead.sent:  # kept, not emitted, until the spout is activated again
                    self.held.extend(self.ahead.take(self.to_xack))
                self._flush_acks()
                time.sleep(0.01)
                return
            for msg_id, rec in self.source.due_retries(now):
                self.emit(list(rec[1]), tup_id=msg_id)  # rec: (the entry id as read, the row emitted)
            if now >= self._next_claim and not self.eo:
                self._claim()
                self._next_claim = now + self.cfg.claim_period_s
            if self.source.may_emit(self.cfg.stream):
                self._read()  # a read of new entries carries the XACK of the acks due
            self._flush_acks()
        except Exception as e:
            self._on_error(e, now)
            return
        if self.conn.ok():
            self.counts["reconnects"] += 1
            self.log(f"{self.where}: redis server {self.address} reachable again")
            if not self.eo and self.cursor is None:
                self._walk_own_pending()

    def _walk_own_pending(self) -> None:
        """After an outage: a read that timed out (a frozen server) or lost its reply (a reset
        connection) may still have been served, its entries handed to this consumer and emitted
        nowhere. Reading our own pending list again emits them now (those in flight here are
        skipped) instead of after redis.claim.idle.ms. The server answered this loop, so it ran
        every command sent before the outage ended."""
        try:
            if self.ahead.sent:
                # served, not emitted: in our pending list now, so the walk emits them (taken
                # first, or the walk and then this read would each emit them)
                self.ahead.take(self.to_xack)
        except Exception as e:
            self._on_error(e, self.clock())  # the read is cancelled; the next recovery walks
            return
        self.held = []  # read, not emitted: in our pending list too
        self.cursor, self.recovered, self.after_outage = "0", 0, True

    def ack(self, tup_id: Any) -> None:
        if RunIds.is_run(tup_id):  # a read's entries, one tree: each is done
            self.heron_ack_many([tup_id])
            return
        # the engine hands back the id emitted (a tuple); another sequence is made one
        key: Key = tup_id if type(tup_id) is tuple else (tup_id[0], tup_id[1])
        for raw, row in self.source.ack_many((key,)):  # the record, if it was in flight
            self.inflight.pop(row[0], None)
            self.to_xack.append(raw)

    def heron_ack_many(self, tup_ids: list[Any]) -> None:
        """``ack`` for a result frame's acked ids at once (the engine calls it instead of ``ack``
        per id when no hook must see each ack)."""
        inflight_pop, to_xack = self.inflight.pop, self.to_xack
        # the ids as emitted: (stream, sequence number), or a read's id (an int) for its entries
        for raw, row in self.source.ack_many(self.runs.expand(tup_ids) if self.runs else tup_ids):
            inflight_pop(row[0], None)
            to_xack.append(raw)

    def fail(self, tup_id: Any) -> None:
        now = self.clock()
        if RunIds.is_run(tup_id):  # each entry of the read fails, and is retried on its own
            for k in self.runs.take(tup_id):
                self.source.fail(k, now)
            return
        key: Key = (tup_id[0], tup_id[1])
        self.source.fail(key, now)  # past redis.max.retries: _gave_up

    def _gave_up(self, _stream: str, _seq: int, failures: int, record: Any) -> None:
        # acknowledged, as Storm commits past a record it gave up
        raw, row = record
        eid = row[0]
        self.inflight.pop(eid, None)
        self.to_xack.append(raw)
        self.log(f"{self.where}: entry {eid} of stream '{self.cfg.stream}' failed {failures} times; "
                 f"redis.max.retries reached, acknowledging it", "error")

    # --- reading -------------------------------------------------------------------------------
    def _create_group(self) -> None:
        import redis.exceptions as rx

        try:
            self.client.xgroup_create(self.cfg.stream, self.cfg.group, id=self.cfg.start_id, mkstream=True)
            self.log(f"{self.where}: created group '{self.cfg.group}' of stream '{self.cfg.stream}' at "
                     f"{self.cfg.start_id}")
        except rx.ResponseError as e:
            if not str(e).startswith("BUSYGROUP"):
                raise
        self.group_ready = True

    def _read(self) -> None:
        if self.eo:
            self._read_by_id()
            return
        if self.cursor is None and self.tracked:
            self._read_new()
            return
        room = self.cfg.max_pending - len(self.inflight)
        if room <= 0:
            return
        count = min(self.cfg.batch, room)
        if self.cursor is not None:
            resp = self.client.xreadgroup(self.cfg.group, self.cfg.consumer, {self.cfg.stream: self.cursor},
                                          count=count)
        elif self.to_xack:
            # the acks due and the next read in one round trip (XACK first: the server runs a
            # pipeline's commands in order), instead of one round trip each
            due = self.to_xack
            pipe = self.client.pipeline(transaction=False)
            pipe.xack(self.cfg.stream, self.cfg.group, *due)
            pipe.xreadgroup(self.cfg.group, self.cfg.consumer, {self.cfg.stream: ">"}, count=count,
                            block=self.cfg.block_ms or None)
            _acked, resp = pipe.execute()
            # what was added to to_xack meanwhile stays due
            self.to_xack = [] if due is self.to_xack else self.to_xack[len(due):]
        else:
            resp = self.client.xreadgroup(self.cfg.group, self.cfg.consumer, {self.cfg.stream: ">"}, count=count,
                                          block=self.cfg.block_ms or None)
        entries = _raw_entries(resp, self.cfg.stream)
        if self.cursor is not None:
            if not entries:
                self.cursor = None  # our own history is replayed: new entries from now on
                if self.recovered and self.after_outage:
                    self.log(f"{self.where}: re-emitted {self.recovered} entries of consumer "
                             f"'{self.cfg.consumer}' whose read was lost with its connection")
                elif self.recovered:
                    self.log(f"{self.where}: re-emitted {self.recovered} entries left pending by an earlier run "
                             f"of consumer '{self.cfg.consumer}'")
                self.after_outage = False
                return
            self.cursor = entry_id(entries[-1][0])
            if self.to_xack:  # acked here, their XACK not sent yet: pending on the server, done here
                done = {entry_id(x) for x in self.to_xack}
                entries = [e for e in entries if entry_id(e[0]) not in done]
            # not those in flight here already (after an outage most of them are)
            self.recovered += sum(1 for raw_id, _ in entries if entry_id(raw_id) not in self.inflight)
        # at most once, or our own pending history: an entry may still be in flight here (read
        # again after a reconnect), so each goes through _emit_new's check
        for raw_id, fields in entries:
            self._emit_new(entry_id(raw_id), fields)

    def _read_new(self) -> None:
        """The at-least-once hot path over ``>`` reads: the entries of the read sent ahead at
        the last call (else of one read now); the next read sent before these are emitted when
        this one came back full (more are likely there: no BLOCK wait is started for nothing);
        one ReplayableSource pass for the read."""
        cfg, ahead = self.cfg, self.ahead
        room = cfg.max_pending - len(self.inflight)
        if self.held:
            entries, self.held = self.held, []
            asked = 0  # no read-ahead behind entries that waited for an activation
        else:
            if not ahead.sent:
                if room <= 0:
                    return
                ahead.send(min(cfg.batch, room), self.to_xack)
            asked = ahead.count
            entries = ahead.take(self.to_xack)
        nxt = min(cfg.batch, room - len(entries))
        if entries and len(entries) >= asked > 0 and nxt > 0:
            try:
                ahead.send(nxt, self.to_xack)
            except BaseException:
                self.held = entries  # read, not emitted: emitted once the server is back
                raise
        records, bad, self.seq = fresh_rows(entries, cfg.fields, self._keys, self.inflight, self.seq)
        for eid, why in bad:
            self._malformed(eid, why)
        self.counts["records"] += len(records) + len(bad)
        if records:
            ids = self.source.emitted_many(cfg.stream, records)
            # emit not overridden: the host's own emit, one Python call fewer per entry
            host_emit = self.delegate.emit if type(self).emit is Spout.emit else None
            emit_rows(records, ids, self.inflight, host_emit, self.emit, self.heron_emit_tracked_many,
                      None if cfg.ack_per_entry else self.heron_emit_tracked_run, self.runs)

    def _read_by_id(self) -> None:
        if self.last_id == "$":  # "after the newest entry", made concrete so a checkpoint holds an id
            last = self.client.xrevrange(self.cfg.stream, count=1)
            self.last_id = entry_id(last[0][0]) if last else "0"
        resp = self.client.xread({self.cfg.stream: self.last_id}, count=self.cfg.batch,
                                 block=self.cfg.block_ms or None)
        for raw_id, fields in (resp[0][1] if resp else []):
            eid = entry_id(raw_id)
            self.last_id = eid
            values, why = decode_entry(fields, self.cfg.fields)
            self.counts["records"] += 1
            if values is None:
                self.counts["malformed"] += 1
                self.log(f"{self.where}: entry {eid} of stream '{self.cfg.stream}' is malformed: {why}; skipped",
                         "error")
                continue
            self.emit([eid, *values])

    def _claim(self) -> None:
        """Entries idle longer than redis.claim.idle.ms in any consumer's pending list (ours
        included: those in flight here are skipped) become ours; at most 10 XAUTOCLAIM pages a
        call, so a long pending list is walked over several calls."""
        start, before = "0-0", self.counts["claimed"]
        try:
            for _ in range(10):
                nxt, entries, *_deleted = self.client.xautoclaim(self.cfg.stream, self.cfg.group, self.cfg.consumer,
                                                                 self.cfg.claim_idle_ms, start_id=start,
                                                                 count=self.cfg.batch)
                for raw_id, fields in entries:
                    eid = entry_id(raw_id)
                    if eid not in self.inflight:
                        self.counts["claimed"] += 1
                        self._emit_new(eid, fields)
                start = entry_id(nxt)
                if start == "0-0":
                    return
        finally:
            if self.counts["claimed"] > before:
                self.log(f"{self.where}: claimed {self.counts['claimed'] - before} entries idle over "
                         f"{self.cfg.claim_idle_ms} ms in the pending lists of group '{self.cfg.group}'")

    def _emit_new(self, eid: str, fields: dict[Any, Any] | None) -> None:
        if eid in self.inflight:
            return
        values, why = decode_flat(fields, self.cfg.fields, self._keys) if isinstance(fields, list) else \
            decode_entry(fields, self.cfg.fields)
        self.counts["records"] += 1
        if values is None:
            self._malformed(eid, why)
            return
        if not self.tracked:
            self.emit([eid, *values])
            self.to_xack.append(eid)
            return
        row = [eid, *values]
        self.seq += 1
        key = self.source.emitted(self.cfg.stream, self.seq, (eid, row))  # the XACK takes str ids too
        if key is not None:
            self.inflight[eid] = key
            self.emit(row, tup_id=key)

    def _malformed(self, eid: str, why: str) -> None:
        self.counts["malformed"] += 1
        self.log(f"{self.where}: entry {eid} of stream '{self.cfg.stream}' is malformed: {why}; failed and "
                 f"acknowledged (not emitted)", "error")
        self.to_xack.append(eid)

    def _flush_acks(self) -> None:
        if self.to_xack:
            ids = self.to_xack
            self.client.xack(self.cfg.stream, self.cfg.group, *ids)
            self.to_xack = [] if ids is self.to_xack else self.to_xack[len(ids):]

    # --- errors and metrics ----------------------------------------------------------------------
    def _on_error(self, e: Exception, now: float) -> None:
        kind = classify(e)
        if kind is ErrorKind.OTHER and not _is_redis_error(e):
            raise e
        self.conn.failed(now)
        self.counts["connection-errors"] += 1
        if kind is ErrorKind.NO_GROUP and self.cfg.create_group:
            self.group_ready = False  # a server that lost its data: the group is made again
        line = describe(e, self.where, self.address, self.cfg.stream, self.cfg.group,
                        self.cfg.reconnect.max_delay_s)
        if self.throttle.should_log(line):
            self.log(line, "error" if kind in (ErrorKind.CREDENTIALS, ErrorKind.NO_GROUP) else "warn")

    def metrics_snapshot(self) -> dict[str, float]:
        out: dict[str, float] = {k: float(v) for k, v in self.counts.items()}
        for k in self.counts:
            self.counts[k] = 0
        out.update({k: float(v) for k, v in self.source.stats.take().items()})
        out["pending"] = float(len(self.inflight))
        try:
            for g in self.client.xinfo_groups(self.cfg.stream):
                name = g.get("name")
                if (name.decode() if isinstance(name, bytes) else name) == self.cfg.group and g.get("lag") is not None:
                    out["lag"] = float(g["lag"])
        except Exception:  # the server is down: no lag this period (connection-errors shows why)
            pass
        return out


def _is_redis_error(e: Exception) -> bool:
    import redis.exceptions as rx

    return isinstance(e, rx.RedisError)
