"""Garbage, a wrong secret and an oversized frame sent to the SM and TM ports: the daemon
logs it, drops that connection and the topology keeps running."""

import re
import socket
import struct
import time

import pytest

from heron_py.common.container_layout import TopologyPaths
from heron_py.common.framing import FrameDecoder, MsgType
from heron_py.common.handshake import ClientHandshake
from heron_py.state import LocalFsStateManager
from heron_py.testing import run_local
from heron_py.testing.local import kill_local
from tests.conftest import EXAMPLES

pytestmark = pytest.mark.integration


def _closed_by_peer(sock: socket.socket, timeout: float = 5.0) -> bytes:
    """Reads until the peer closes; returns what it sent. Fails if it never closes."""
    sock.settimeout(timeout)
    got = b""
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            return got
        got += chunk


def _garbage(port):
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(struct.pack(">IH", 16, 4660) + b"\xde\xad" * 7)
        _closed_by_peer(s)


def _wrong_secret(port):
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.settimeout(5)
        dec = FrameDecoder("server")
        frames = []
        while not frames:
            frames = dec.feed(s.recv(4096))
        hs = ClientHandshake(b"not the secret", "stmgr", "0", "server")
        s.sendall(hs.on_frame(*frames[0]))
        reply = _closed_by_peer(s)
        [(t, _)] = FrameDecoder("server").feed(reply)
        assert t == MsgType.AUTH_FAILED


def _oversized(port):
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(struct.pack(">IH", 1 << 30, MsgType.CLIENT_HELLO))
        _closed_by_peer(s)


def _words(home, name):
    """Words counted so far: the sum of each count task's latest "counted N words" log line."""
    total = 0
    for log in TopologyPaths.of(name, home).logs.glob("container-*/count-*.log"):
        counts = re.findall(r"counted (\d+) words", log.read_text())
        total += int(counts[-1]) if counts else 0
    return total


def test_daemons_drop_hostile_connections_and_keep_serving(heron_home):
    # the spout paced (its output rate limit): the test needs the counts growing, not two cores busy
    run = run_local(EXAMPLES / "word_count.py", ["--spout-output-bps", "1000000"], home=heron_home, containers=2,
                    keep_running=True)
    try:
        state = LocalFsStateManager(heron_home)
        es = state.get_execution_state(run.name)
        sm_port = es["stmgrs"]["1"]["port"]
        tm_port = state.get_tmanager_location(run.name).port
        for port in (sm_port, tm_port):
            _garbage(port)
            _wrong_secret(port)
            _oversized(port)
        before = _words(heron_home, run.name)
        time.sleep(2.5)  # the count tasks log their totals every second
        assert _words(heron_home, run.name) > before, "the topology stopped flowing"
        logs = TopologyPaths.of(run.name, heron_home).logs
        sm_log = (logs / "container-1" / "stmgr.log").read_text()
        tm_log = (logs / "container-0" / "tmanager.log").read_text()
        for log in (sm_log, tm_log):
            assert "has unknown message type" in log
            assert "failed authentication: wrong topology secret" in log
            assert ("announces 1073741824 bytes before authenticating, over the limit of 4096 bytes; "
                    "closing the connection") in log
        # the master counted the refused peers
        es = state.get_execution_state(run.name)
        assert es["auth_failures"] >= 1 and es["bad_frames"] >= 2
        assert all(i["ready"] for i in es["instances"].values())
    finally:
        kill_local(heron_home, run.name)
