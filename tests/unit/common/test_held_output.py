"""A connection that holds back its output (``Connection.hold_output``): at most its share in
the transport, the rest where ``drop_held`` can take it back; the watermarks count both; the
frame tags stay in sequence whatever is dropped. The pure part (``HeldOutput``) alone, then
real connections on a Unix socket (an instance's, by default) whose reader stops reading."""

from __future__ import annotations

import asyncio
import logging

import pytest

from heron_py.common.framing import MsgType, encode_batch_frame, encode_frame, frame_type
from heron_py.common.held_output import HeldOutput
from heron_py.common.net import BaseHandler, Connection, Counters, connect_unix, serve_unix
from stream_manager.forwarder import is_old_run
from tests.support import until

SECRET = b"topology-secret"
LOG = logging.getLogger("test_held_output")
SHARE = 64 << 10


def test_take_fills_the_share_with_the_last_frame_crossing_it() -> None:
    held = HeldOutput(100)
    for size in (40, 40, 40, 40):
        held.add(b"x" * size)
    assert held.nbytes == 160
    assert [len(f) for f in held.take(0)] == [40, 40, 40]  # 120 crosses 100: the transport pauses us
    assert held.nbytes == 40
    assert held.take(101) == []  # above the share: nothing more until it drains
    assert [len(f) for f in held.take(100)] == [40]  # at the share exactly: one more, so it crosses
    assert not held and held.nbytes == 0


def test_drop_takes_what_it_picks_and_keeps_the_rest_in_order() -> None:
    held = HeldOutput(10)
    held.add_many([b"a1", b"b22"])
    held.add_many([b"a3", b"b44"])
    assert held.nbytes == 10
    assert held.drop(lambda f: f.startswith(b"a")) == [b"a1", b"a3"]
    assert list(held.frames) == [b"b22", b"b44"] and held.nbytes == 6
    assert held.take_all() == [b"b22", b"b44"] and held.nbytes == 0


def test_a_share_that_is_not_positive_is_refused() -> None:
    with pytest.raises(ValueError) as e:
        HeldOutput(0)
    assert str(e.value) == "held output: the transport's share must be positive, found 0 bytes"
    assert HeldOutput(1).cap == 1  # a byte is a share


class Reader(BaseHandler):
    """The instance's end: records what arrives."""

    def __init__(self) -> None:
        self.frames: list[bytes] = []

    def on_frame(self, conn: Connection, msg_type: int, frame: bytes) -> None:
        self.frames.append(frame)


class Writer(BaseHandler):
    """The stream manager's end: its connection, and the watermark crossings."""

    def __init__(self) -> None:
        self.conn: Connection | None = None
        self.opened = asyncio.Event()
        self.writing: list[bool] = []

    def on_open(self, conn: Connection) -> None:
        self.conn = conn
        self.opened.set()

    def on_writing(self, conn: Connection, paused: bool) -> None:
        assert conn is self.conn
        self.writing.append(paused)


async def _pair(tmp_path) -> tuple[Writer, Reader, Connection, asyncio.Server, Counters]:
    writer, reader, counters = Writer(), Reader(), Counters()
    path = str(tmp_path / "stmgr.sock")
    server = await serve_unix(path, lambda: writer, SECRET, role="stmgr", log=LOG, counters=counters)
    client = await connect_unix(path, reader, SECRET, role="instance", peer_id="3", log=LOG)
    await asyncio.wait_for(writer.opened.wait(), 5)
    return writer, reader, client, server, counters


async def _held(tmp_path) -> tuple[Writer, Reader, Connection, asyncio.Server, Connection]:
    """A pair whose reader does not read, the writer's connection holding its output back."""
    writer, reader, client, server, _counters = await _pair(tmp_path)
    conn = writer.conn
    assert conn is not None
    client.pause_reading()
    conn.hold_output(SHARE)
    return writer, reader, client, server, conn


def _batch(i: int) -> bytes:
    return encode_batch_frame(3, 1, i.to_bytes(4, "big") + b"w" * 8188, count=1)


async def test_a_reader_that_stops_leaves_the_backlog_held_and_the_watermark_counts_it(tmp_path) -> None:
    writer, reader, client, server, conn = await _held(tmp_path)  # a slow task: its gateway stopped reading
    conn.set_write_limits(1 << 20, 512 << 10)
    transport = conn.transport
    assert transport is not None
    assert transport.get_write_buffer_limits() == (SHARE // 2, SHARE)  # the transport's share
    for i in range(512):  # 4 MB
        conn.send(_batch(i))
    await asyncio.sleep(0.3)
    # the transport holds its share and one frame at the most; the rest is held back
    assert transport.get_write_buffer_size() <= SHARE + len(_batch(0)) + 16
    assert conn.write_buffer_size() >= 3 * (1 << 20)  # the socket's buffers took less than 1 MB
    assert writer.writing == [True] and conn.writing_paused

    # a restore: the held batches go, the command sent after them is next after the socket's
    dropped = conn.drop_held(is_old_run)
    assert len(dropped) > 256 and all(frame_type(f) == MsgType.TUPLE_BATCH for f in dropped)
    conn.send(encode_frame(MsgType.ADMIN_REQUEST, b"restore"))
    client.resume_reading()
    await until(lambda: reader.frames and reader.frames[-1].endswith(b"restore"), 10.0)
    got = reader.frames
    assert len(got) == 512 - len(dropped) + 1  # every batch not dropped, then the command
    assert [int.from_bytes(f[18:22], "big") for f in got[:-1]] == list(range(512 - len(dropped)))
    assert client.is_open  # the tags were made as frames were handed over: no gap (one would abort it)
    await until(lambda: writer.writing == [True, False], 10.0)
    assert not conn.writing_paused and conn.write_buffer_size() == 0
    client.close()
    server.close()


async def test_what_is_held_arrives_whole_and_in_order_when_nothing_is_dropped(tmp_path) -> None:
    writer, reader, client, server, conn = await _held(tmp_path)
    conn.set_write_limits(16 << 20, 8 << 20)  # above what is sent: the spouts are never paused
    conn.send_many([_batch(i) for i in range(300)])
    for i in range(300, 600):
        conn.send(_batch(i))
    await asyncio.sleep(0.1)
    client.resume_reading()
    await until(lambda: len(reader.frames) == 600, 10.0)
    assert [int.from_bytes(f[18:22], "big") for f in reader.frames] == list(range(600))
    assert client.is_open and writer.writing == []
    conn.send(_batch(600))  # a send in a later turn, with nothing held: handed over in its turn too
    await until(lambda: len(reader.frames) == 601, 10.0)
    client.close()
    server.close()


async def test_a_close_writes_what_was_held(tmp_path) -> None:
    _writer, reader, client, server, conn = await _held(tmp_path)
    conn.set_write_limits(16 << 20, 8 << 20)
    for i in range(100):
        conn.send(_batch(i))
    await asyncio.sleep(0.1)
    conn.close("stopping")
    client.resume_reading()
    await until(lambda: len(reader.frames) == 100, 10.0)
    assert int.from_bytes(reader.frames[-1][18:22], "big") == 99
    server.close()


async def test_the_share_is_at_most_the_low_watermark(tmp_path) -> None:
    """An empty hold must mean below the low watermark, or the spouts would stay paused: a low
    mark under the share makes the transport's share that mark."""
    writer, reader, client, server, conn = await _held(tmp_path)
    conn.set_write_limits(64 << 10, 16385)
    transport = conn.transport
    assert transport is not None
    assert transport.get_write_buffer_limits() == (8192, 16385)
    for i in range(64):
        conn.send(_batch(i))
    await asyncio.sleep(0.2)
    assert transport.get_write_buffer_size() <= 16385 + len(_batch(0)) + 16
    assert writer.writing == [True]
    client.resume_reading()
    await until(lambda: len(reader.frames) == 64, 10.0)
    await until(lambda: writer.writing == [True, False], 10.0)
    client.close()
    server.close()


async def test_holding_starts_with_the_transports_own_watermarks(tmp_path) -> None:
    """Until ``set_write_limits`` the watermarks are those the transport had (asyncio's 64 KB
    and 16 KB here): a backlog past them pauses the spouts as before."""
    writer, reader, client, server, conn = await _held(tmp_path)
    for i in range(256):  # 2 MB
        conn.send(_batch(i))
    await asyncio.sleep(0.2)
    assert writer.writing == [True] and conn.writing_paused
    client.resume_reading()
    await until(lambda: len(reader.frames) == 256, 10.0)
    await until(lambda: writer.writing == [True, False], 10.0)
    client.close()
    server.close()


async def test_holding_starts_paused_on_a_connection_that_was(tmp_path) -> None:
    """A connection already paused (its backlog between the watermarks: the transport has not
    resumed it) that starts holding stays paused until the backlog is below the low watermark,
    then resumes: the hold takes the connection's state, so the spouts are not held forever."""
    writer, reader, client, server, _counters = await _pair(tmp_path)
    conn = writer.conn
    assert conn is not None
    client.pause_reading()
    conn.set_write_limits(1 << 20, 512 << 10)
    for i in range(384):  # 3 MB: past the high watermark, the socket's buffers take some
        conn.send(_batch(i))
    await asyncio.sleep(0.2)
    assert writer.writing == [True] and conn.writing_paused
    backlog = conn.write_buffer_size()
    # the watermarks move around the backlog: the transport resumes nobody on that
    conn.set_write_limits(2 * backlog, backlog // 2)
    conn.hold_output(SHARE)
    assert writer.writing == [True] and conn.writing_paused  # one pause, still in force
    client.resume_reading()
    await until(lambda: len(reader.frames) == 384, 10.0)
    await until(lambda: writer.writing == [True, False], 10.0)
    assert not conn.writing_paused
    client.close()
    server.close()
