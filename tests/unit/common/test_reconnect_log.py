"""A link behind a relay that changes frames (real sockets on 127.0.0.1): the relay passes the
handshake on, then flips a byte of every frame after it; the server aborts each connection at
its first frame and the link reconnects about 5 times a second. Its log says so at most 5
times in 10 s, then how many lines it held back."""

from __future__ import annotations

import asyncio
import logging

import pytest

from heron_py.common.net import BaseHandler, Counters, connect, serve
from heron_py.common.reconnect import run_link
from proto import heron_py_pb2 as pb

SECRET = b"s3cret"


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, tamper: bool) -> None:
    first = True
    try:
        while data := await reader.read(65536):
            # the client's first write is its ClientHello; whatever it sends after the
            # handshake has its last byte (a frame's tag) flipped
            if tamper and not first:
                data = data[:-1] + bytes([data[-1] ^ 1])
            first = False
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        writer.close()


async def test_a_tampering_relay_costs_at_most_5_reconnect_lines_in_10_s(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    server = await serve("127.0.0.1", 0, BaseHandler, SECRET, role="stmgr", log=logging.getLogger("srv"),
                         counters=Counters())
    port = server.sockets[0].getsockname()[1]

    async def relay_one(c_reader: asyncio.StreamReader, c_writer: asyncio.StreamWriter) -> None:
        s_reader, s_writer = await asyncio.open_connection("127.0.0.1", port)
        await asyncio.gather(_pipe(c_reader, s_writer, tamper=True), _pipe(s_reader, c_writer, tamper=False))

    relay = await asyncio.start_server(relay_one, "127.0.0.1", 0)
    relay_port = relay.sockets[0].getsockname()[1]
    sessions = 0

    async def link_connect():  # type: ignore[no-untyped-def]
        return await connect("127.0.0.1", relay_port, BaseHandler(), SECRET, role="instance", peer_id="1",
                             log=logging.getLogger("cli"))

    async def session(conn) -> None:  # type: ignore[no-untyped-def]
        nonlocal sessions
        sessions += 1
        conn.send_msg(pb.AdminRequest(command="status"))  # any frame: the relay changes it
        await asyncio.Event().wait()

    stop = asyncio.Event()
    link_log = logging.getLogger("instance-link")
    link = asyncio.ensure_future(run_link("stream manager", link_connect, session, stop=stop, log=link_log))
    await asyncio.sleep(3.0)
    stop.set()
    await asyncio.wait_for(link, 5)
    relay.close()
    server.close()
    lines = [r.getMessage() for r in caplog.records if r.name == "instance-link"]
    assert sessions >= 8  # about 5 attempts a second, each cut at its first frame
    assert len(lines) == 5, lines
    assert all(line.startswith("connection to stream manager ") and line.endswith("; reconnecting")
               for line in lines), lines
