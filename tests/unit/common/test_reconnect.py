"""The shared reconnect loop on real sockets (127.0.0.1): connect, session, lost, reconnect, stop."""

import asyncio
import logging

from heron_py.common.framing import MsgType
from heron_py.common.net import BaseHandler, Counters, connect, serve
from heron_py.common.reconnect import Unreachable, run_link, watch_close
from proto import heron_py_pb2 as pb

SECRET = b"s3cret"


class Server:
    """A listening server that records its accepted connections."""

    def __init__(self):
        self.accepted = []
        self.server = None

    async def start(self):
        outer = self

        class H(BaseHandler):
            def on_open(self, conn):
                outer.accepted.append(conn)

        self.server = await serve("127.0.0.1", 0, H, SECRET, role="test", log=logging.getLogger("srv"),
                                  counters=Counters())
        return self.server.sockets[0].getsockname()[1]

    def close(self):
        self.server.close()


async def until(cond, timeout=5.0):
    deadline = asyncio.get_running_loop().time() + timeout
    while not cond():
        assert asyncio.get_running_loop().time() < deadline, "condition not met in time"
        await asyncio.sleep(0.01)


def connector(port, handler=None):
    async def factory():
        return await connect("127.0.0.1", port, handler or BaseHandler(), SECRET, role="client", peer_id="1",
                             log=logging.getLogger("cli"))
    return factory


async def test_a_lost_connection_is_made_again_and_a_new_session_runs(caplog):
    caplog.set_level(logging.INFO)
    srv = Server()
    port = await srv.start()
    sessions = []

    async def session(conn):
        sessions.append(conn)
        await asyncio.Event().wait()  # runs until the loop cancels it

    stop = asyncio.Event()
    link = asyncio.ensure_future(run_link("test server", connector(port), session, stop=stop,
                                          log=logging.getLogger("link"), retry_s=0.05, reconnect_s=0.05))
    await until(lambda: len(sessions) == 1 and len(srv.accepted) == 1)
    srv.accepted[0].close("test drops it")
    await until(lambda: len(sessions) == 2)
    assert sessions[0] is not sessions[1] and not sessions[0].is_open and sessions[1].is_open
    assert "connection to test server lost; reconnecting" in caplog.text
    stop.set()
    await asyncio.wait_for(link, 2)
    assert not sessions[1].is_open  # stopping closes the live connection
    srv.close()


async def test_failures_are_retried_and_each_reason_logged_once(caplog):
    caplog.set_level(logging.INFO)
    srv = Server()
    port = await srv.start()
    attempts = []
    real = connector(port)

    async def factory():
        attempts.append(1)
        if len(attempts) <= 3:
            raise ConnectionRefusedError("refused for the test")
        if len(attempts) == 4:
            raise Unreachable("nothing to connect to yet")
        return await real()

    connected = asyncio.Event()

    async def session(conn):
        connected.set()
        await asyncio.Event().wait()

    stop = asyncio.Event()
    link = asyncio.ensure_future(run_link("test server", factory, session, stop=stop,
                                          log=logging.getLogger("link"), retry_s=0.01))
    await asyncio.wait_for(connected.wait(), 5)
    assert len(attempts) == 5
    assert caplog.text.count("test server not reachable (refused for the test); retrying") == 1
    assert caplog.text.count("nothing to connect to yet") == 1
    stop.set()
    await asyncio.wait_for(link, 2)
    srv.close()


async def test_a_session_that_closes_with_a_reason_is_logged_and_reconnected(caplog):
    caplog.set_level(logging.INFO)
    srv = Server()
    port = await srv.start()
    seen = []

    async def session(conn):
        seen.append(conn)
        if len(seen) == 1:
            conn.close("the master moved")  # e.g. a new location
            return
        await asyncio.Event().wait()

    stop = asyncio.Event()
    link = asyncio.ensure_future(run_link("test server", connector(port), session, stop=stop,
                                          log=logging.getLogger("link"), reconnect_s=0.01))
    await until(lambda: len(seen) == 2)
    assert seen[0].close_reason == "the master moved"
    assert "connection to test server closed (the master moved); reconnecting" in caplog.text
    stop.set()
    await asyncio.wait_for(link, 2)
    srv.close()


async def test_stop_ends_the_loop_while_it_waits_to_retry():
    attempts = []

    async def factory():
        attempts.append(1)
        raise OSError("down")

    async def session(conn):
        raise AssertionError("never connected")

    stop = asyncio.Event()
    link = asyncio.ensure_future(run_link("nowhere", factory, session, stop=stop, log=logging.getLogger("link"),
                                          retry_s=60.0))
    await until(lambda: attempts)
    stop.set()
    await asyncio.wait_for(link, 1)  # not after the 60 s retry delay
    assert len(attempts) == 1


async def test_a_failing_session_does_not_end_the_link(caplog):
    srv = Server()
    port = await srv.start()
    runs = []

    async def session(conn):
        runs.append(conn)
        if len(runs) == 1:
            raise RuntimeError("bug in a session")
        await asyncio.Event().wait()

    stop = asyncio.Event()
    link = asyncio.ensure_future(run_link("test server", connector(port), session, stop=stop,
                                          log=logging.getLogger("link"), reconnect_s=0.01))
    await until(lambda: len(runs) == 2)
    assert "bug in a session" in caplog.text and not runs[0].is_open
    stop.set()
    await asyncio.wait_for(link, 2)
    srv.close()


async def test_watch_close_keeps_the_links_handler_and_signals_the_close():
    srv = Server()
    port = await srv.start()
    frames, closes = [], []

    class H(BaseHandler):
        def on_frame(self, conn, msg_type, frame):
            frames.append(msg_type)

        def on_close(self, conn):
            closes.append(conn)

    conn = await connector(port, H())()
    closed = watch_close(conn)
    await until(lambda: srv.accepted)
    srv.accepted[0].send_msg(pb.StmgrHello())
    await until(lambda: frames)
    assert frames == [MsgType.STMGR_HELLO] and not closed.done()
    srv.accepted[0].close("bye")
    await asyncio.wait_for(closed, 2)
    assert closes == [conn]  # the link's own handler still heard of it
    srv.close()


async def test_watch_close_of_a_connection_that_is_already_gone():
    srv = Server()
    port = await srv.start()
    conn = await connector(port)()
    conn.close("gone")
    await until(lambda: not conn.is_open)
    assert watch_close(conn).done()
    srv.close()


async def test_cancelling_the_link_closes_its_connection_and_leaves_no_task_behind():
    srv = Server()
    port = await srv.start()
    sessions = []

    async def session(conn):
        sessions.append(conn)
        await asyncio.Event().wait()

    before = asyncio.all_tasks()
    link = asyncio.ensure_future(run_link("test server", connector(port), session, stop=asyncio.Event(),
                                          log=logging.getLogger("link")))
    await until(lambda: sessions)
    link.cancel()  # what a daemon's stop does to its tasks
    await asyncio.wait([link])
    assert link.cancelled() and sessions[0].close_reason == "stopping"
    await asyncio.sleep(0)  # the stop waiter's own cancellation
    assert asyncio.all_tasks() - before == set()
    srv.close()
