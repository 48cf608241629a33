"""The liveness rule in elapsed time (heron_py/common/session.py ``Silence``, its clock injected):
late ticks do not stretch the timeout, a pause of our own reading does not reset the peer's
silence, and silence is judged only once we could read for a whole interval (what the peer
sends while we do not read waits in the kernel). The rule on a real connection too."""

from __future__ import annotations

import asyncio
import logging

from heron_py.common.net import BaseHandler, Connection, Counters, Liveness, connect, serve
from heron_py.common.session import Silence, Verdict

SECRET = bytes(range(32))
LOG = logging.getLogger("test.silence")


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _silence(clock: Clock) -> Silence:
    return Silence(2.0, 10.0, 0, 0, clock=clock)


def _tick(s: Silence, clock: Clock, at: float, bytes_in: int = 0, reading: bool = True) -> Verdict:
    clock.now = 100.0 + at
    v = s.tick(bytes_in, 0, reading=reading, writing_paused=False)
    s.mark(bytes_in, 0)
    return v


def test_late_ticks_do_not_stretch_the_timeout() -> None:
    clock = Clock()
    s = _silence(clock)
    # under load the 2 s timer fires every 4 s: the abort comes at the first tick 10 s after the
    # last bytes (the third), not after five ticks (20 s)
    assert not _tick(s, clock, 4.0).abort
    assert not _tick(s, clock, 8.0).abort
    v = _tick(s, clock, 12.0)
    assert (v.abort, v.silent_s) == (True, 12.0)


def test_silence_counts_from_the_tick_that_last_saw_bytes() -> None:
    clock = Clock()
    s = _silence(clock)
    assert _tick(s, clock, 2.0, bytes_in=50).silent_s == 0.0
    assert _tick(s, clock, 4.0, bytes_in=50).silent_s == 2.0
    assert not _tick(s, clock, 11.9, bytes_in=50).abort
    v = _tick(s, clock, 12.0, bytes_in=50)
    assert (v.abort, v.silent_s) == (True, 10.0)


def test_a_pause_of_our_reading_does_not_reset_the_peers_silence() -> None:
    clock = Clock()
    s = _silence(clock)
    clock.now = 101.0
    s.paused()  # our own backpressure, one second after the peer's last bytes
    for at in (2.0, 4.0, 6.0, 8.0):
        v = _tick(s, clock, at, reading=False)
        assert not v.abort and v.silent_s == at  # counted, but not judged: pings may wait unread
    clock.now = 109.0
    s.resumed()
    v = _tick(s, clock, 10.0)  # we read again since 9 s, not since the previous tick: not judged yet
    assert (v.abort, v.silent_s) == (False, 10.0)
    v = _tick(s, clock, 12.0)  # a whole interval of reading, and nothing came: silent since 0 s
    assert (v.abort, v.silent_s) == (True, 12.0)


def test_pings_that_waited_in_the_kernel_during_a_pause_keep_the_peer() -> None:
    clock = Clock()
    s = _silence(clock)
    clock.now = 100.5
    s.paused()
    for at in range(2, 62, 2):
        assert not _tick(s, clock, float(at), reading=False).abort  # a minute paused: never judged
    clock.now = 161.0
    s.resumed()
    assert not _tick(s, clock, 62.0).abort  # the loop has not read what waited yet
    v = _tick(s, clock, 64.0, bytes_in=300)  # it had: the peer's pings, read after the resume
    assert (v.abort, v.silent_s) == (False, 0.0)


def test_a_pause_between_two_ticks_defers_the_judgement_by_one_interval() -> None:
    clock = Clock()
    s = _silence(clock)
    for at in (2.0, 4.0, 6.0, 8.0):
        assert not _tick(s, clock, at).abort
    clock.now = 108.5
    s.paused()
    clock.now = 109.0
    s.resumed()
    v = _tick(s, clock, 10.0)  # reading at both ticks, but not all along: bytes may have waited
    assert (v.abort, v.silent_s) == (False, 10.0)
    assert _tick(s, clock, 12.0).abort


def test_a_pause_the_transport_reports_only_at_a_tick_counts_as_a_pause() -> None:
    clock = Clock()
    s = _silence(clock)
    assert not _tick(s, clock, 8.0, reading=False).abort
    assert not _tick(s, clock, 10.0).abort  # reading again since this tick only
    assert _tick(s, clock, 12.0).abort


class _Closed(BaseHandler):
    def __init__(self) -> None:
        self.opened: list[Connection] = []
        self.closed = asyncio.Event()

    def on_open(self, conn: Connection) -> None:
        self.opened.append(conn)

    def on_close(self, conn: Connection) -> None:
        self.closed.set()


async def test_a_connection_judges_a_silent_peer_soon_after_its_own_pause_ends() -> None:
    """A mute client (its heartbeats off) whose reads the server paused for 1.5 s: not aborted
    while paused, then aborted within about one interval of the resume, its silence counted
    from its handshake (not from the resume, which would take another full second)."""
    counters = Counters()
    server_side = _Closed()
    server = await serve("127.0.0.1", 0, lambda: server_side, SECRET, role="stmgr", log=LOG, counters=counters,
                         liveness=Liveness(0.1, 1.0))
    mute = await connect("127.0.0.1", server.sockets[0].getsockname()[1], BaseHandler(), SECRET, role="instance",
                         peer_id="1", log=LOG, liveness=Liveness(0.1, 0.0))
    loop = asyncio.get_running_loop()
    try:
        for _ in range(100):
            if server_side.opened:
                break
            await asyncio.sleep(0.01)
        server_side.opened[0].pause_reading()
        await asyncio.sleep(1.5)
        assert not server_side.closed.is_set() and counters.silent_peers == 0
        resumed = loop.time()
        server_side.opened[0].resume_reading()
        await asyncio.wait_for(server_side.closed.wait(), 3)
        assert loop.time() - resumed < 0.6
        assert counters.silent_peers == 1
    finally:
        mute.abort("test over")
        server.close()
