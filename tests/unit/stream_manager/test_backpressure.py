"""The stream manager's backpressure decisions (pure), and the watermark hysteresis of the
real transports it relies on (uvloop, a real socket pair)."""

import asyncio
import logging
import socket

import pytest

from heron_py.common.frameauth import TAG_SIZE, FrameMac
from heron_py.common.net import Connection
from stream_manager.backpressure import Action, BackpressureState, ConnKey, ConnKind, describe
from tests.fakes import ManualClock


def test_first_slow_connection_starts_last_drained_one_stops():
    clock = ManualClock(0.0)
    bp = BackpressureState(clock)
    assert bp.connection_high(ConnKey.task(4)) == [Action.BROADCAST_START, Action.PAUSE_SPOUTS]
    clock.t = 1.0
    assert bp.connection_high(ConnKey.stmgr(1)) == []  # already in backpressure: nothing new to say
    assert bp.connection_low(ConnKey.task(4)) == []  # one connection still above the high mark
    clock.t = 3.0
    assert bp.connection_low(ConnKey.stmgr(1)) == [Action.BROADCAST_STOP, Action.RESUME_SPOUTS]
    assert bp.time_in_backpressure() == 3.0 and bp.episodes == 1
    assert bp.connection_low(ConnKey.stmgr(1)) == []  # idempotent


def test_peer_backpressure_pauses_spouts_but_is_not_rebroadcast():
    bp = BackpressureState(ManualClock(0.0))
    assert bp.peer_start(2) == [Action.PAUSE_SPOUTS]
    assert bp.connection_high(ConnKey.task(3)) == [Action.BROADCAST_START]
    assert bp.connection_low(ConnKey.task(3)) == [Action.BROADCAST_STOP]
    assert bp.spouts_paused  # the peer is still slow
    assert bp.peer_stop(2) == [Action.RESUME_SPOUTS]


def test_a_peer_that_disconnects_in_backpressure_does_not_leave_us_stuck():
    bp = BackpressureState(ManualClock(0.0))
    bp.peer_start(1)
    bp.peer_start(2)
    assert bp.peer_stop(1) == []  # what the stream manager calls when peer 1's connection closes
    assert bp.peer_stop(2) == [Action.RESUME_SPOUTS]
    assert not bp.spouts_paused


@pytest.fixture(scope="module")
def event_loop_policy():
    import uvloop  # the daemons' loop: test its transports, not only asyncio's

    return uvloop.EventLoopPolicy()


class Recorder:
    def __init__(self):
        self.events = []

    def on_open(self, conn):
        pass

    def on_frame(self, conn, msg_type, frame):
        pass

    def on_close(self, conn):
        pass

    def on_writing(self, conn, paused):
        self.events.append(paused)


@pytest.mark.asyncio
async def test_transport_watermarks_have_hysteresis_no_flapping():
    a, b = socket.socketpair()
    b.setblocking(False)
    a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 64 * 1024)
    b.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
    loop = asyncio.get_running_loop()
    assert type(loop).__module__.startswith("uvloop")
    rec = Recorder()
    _, conn = await loop.create_connection(
        lambda: Connection(rec, b"s", client_role="x", client_id="1", log=logging.getLogger("t")), sock=a)
    conn.set_write_limits(high=1_000_000, low=500_000)
    chunk = b"x" * 100_000
    for _ in range(15):  # 1.5 MB into a socket nobody reads: above the high mark once
        conn.transport.write(chunk)
    assert rec.events == [True]
    # drain to just above the low mark, then refill below the high mark: no new event
    drained = 0
    while conn.write_buffer_size() > 700_000:
        try:
            drained += len(b.recv(65536))
        except BlockingIOError:
            await asyncio.sleep(0.001)
    for _ in range(2):
        conn.transport.write(chunk)
    assert conn.write_buffer_size() <= 1_000_000
    assert rec.events == [True]
    # drain fully: exactly one resume
    while conn.write_buffer_size() > 0:
        try:
            b.recv(65536)
        except BlockingIOError:
            await asyncio.sleep(0.001)
    await asyncio.sleep(0.01)
    assert rec.events == [True, False]
    conn.close()
    b.close()


def test_time_is_attributed_to_the_connection_that_caused_it():
    clock = ManualClock(0.0)
    bp = BackpressureState(clock)
    bp.connection_high(ConnKey.task(4))
    clock.t = 2.0
    bp.connection_high(ConnKey.task(5))
    clock.t = 3.0
    bp.connection_low(ConnKey.task(4))
    clock.t = 4.0
    assert bp.time_by_cause() == {ConnKey.task(4): 3.0, ConnKey.task(5): 2.0}


def test_connection_keys_print_as_the_metric_labels_they_replace():
    assert str(ConnKey.task(4)) == "task 4" and str(ConnKey.stmgr(2)) == "stmgr 2"
    assert ConnKey.task(2) != ConnKey.stmgr(2) and ConnKey(ConnKind.TASK, 2) == ConnKey.task(2)
    # sorted by label, as the backpressure cause always was ("task 10" before "task 4")
    assert describe({ConnKey.task(4), ConnKey.task(10), ConnKey.stmgr(1)}) == "stmgr 1, task 10, task 4"


@pytest.mark.asyncio
async def test_frames_sent_in_one_turn_go_out_in_order_in_one_write_and_close_flushes_them():
    a, b = socket.socketpair()
    b.setblocking(False)
    loop = asyncio.get_running_loop()
    rec = Recorder()
    _, conn = await loop.create_connection(
        lambda: Connection(rec, b"s", client_role="x", client_id="1", log=logging.getLogger("t")), sock=a)
    conn.state = type(conn.state).OPEN  # past the handshake, which this test does not run
    conn._tx = FrameMac(b"k" * 32)  # the key the handshake would have given: each frame gets its tag
    writes = []

    class Counting:  # uvloop's transport methods are read-only: count through a proxy
        def __init__(self, tr):
            self._tr = tr

        def writelines(self, frames):
            writes.append(len(frames))
            self._tr.writelines(frames)

        def __getattr__(self, name):
            return getattr(self._tr, name)

    conn.transport = Counting(conn.transport)
    conn.send(b"one")
    conn.send_many([b"two", b"three"])
    conn.send(b"four")
    # queued and counted, each frame with its 16-byte tag
    assert writes == [] and conn.write_buffer_size() == len(b"onetwothreefour") + 4 * TAG_SIZE
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert writes == [8]  # the four frames and their tags, in one write
    conn.send(b"five")
    conn.close("done")  # before the loop turns: what was sent still goes
    rx = FrameMac(b"k" * 32)
    expected = b"".join(f + rx.tag(f) for f in (b"one", b"two", b"three", b"four", b"five"))
    got = b""
    for _ in range(100):
        try:
            got += b.recv(65536)
        except BlockingIOError:
            await asyncio.sleep(0.001)
            continue
        if len(got) >= len(expected):
            break
    assert got == expected  # in order, each tag under the key for its place in the sequence
    b.close()
