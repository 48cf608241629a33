"""Redis stream → split → RedisStreamBolt at least once on real processes, 2 containers and a real
redis-server (AOF on): lines XADDed while the topology runs, kill -9 of a spout task and of a
sink task mid-run, and in a second run the server restarted mid-run. Every line's words reach
the output stream at least once, exactly once after de-duplication by (entry id, position);
every input entry ends acknowledged (the group's pending list empties); malformed entries are
failed, logged once each with their id, and do not stop the topology."""

from __future__ import annotations

import os
import re
import signal
import threading
import time
from pathlib import Path

import psutil
import pytest

from heron_py.scheduler.local import exited
from heron_py.testing import run_local
from heron_py.testing.local import kill_local
from tests.conftest import EXAMPLES
from tests.connector_support import task_logs as _logs
from tests.connector_support import task_pid as _pid
from tests.connector_support import task_pids as _pids
from tests.redis_server import redis_or_skip
from tests.support import wait_for

pytestmark = pytest.mark.integration

N = 6000  # lines of 3 words
TOPOLOGY = EXAMPLES / "redis" / "redis_word_count.py"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    s = redis_or_skip(tmp_path_factory.mktemp("redis-wc"))
    yield s
    s.stop()


class Producer(threading.Thread):
    """XADDs N lines over ~``seconds`` (and a malformed entry every 2000), retrying through a
    server restart; ``expected`` maps each line's id to its words."""

    def __init__(self, server, stream: str, seconds: float) -> None:
        super().__init__(daemon=True)
        self.server, self.stream, self.seconds = server, stream, seconds
        self.expected: dict[str, list[str]] = {}
        self.malformed: list[str] = []

    def _xadd(self, client, eid, fields):
        # explicit ids: an XADD the server applied but whose reply a restart lost is not written
        # twice when retried (the retry is refused as not above the top id)
        while True:
            try:
                return client.xadd(self.stream, fields, id=eid).decode()
            except Exception as e:
                if "equal or smaller than the target stream top item" in str(e):
                    return eid
                time.sleep(0.05)  # the server is restarting

    def run(self) -> None:
        c = self.server.client()
        for i in range(N):
            words = [f"w{i % 97}", f"x{i % 13}", f"y{i}"]
            self.expected[self._xadd(c, f"{i + 1}-0", {"value": " ".join(words)})] = words
            if i % 2000 == 1000:
                self.malformed.append(self._xadd(c, f"{i + 1}-1", {"not-value": str(i)}))
            if i % 100 == 99:
                time.sleep(self.seconds / (N / 100))


def _output(server, out: str) -> tuple[dict[tuple[str, int], str], int]:
    """(id, pos) → word, de-duplicated; and how many entries (with duplicates)."""
    seen: dict[tuple[str, int], str] = {}
    try:
        entries = server.client().xrange(out)
    except Exception:
        return {}, 0
    for _eid, f in entries:
        seen[(f[b"id"].decode(), int(f[b"pos"]))] = f[b"word"].decode()
    return seen, len(entries)


def _exact(server, out: str, producer: Producer) -> None:
    seen, total = _output(server, out)
    want = {(eid, pos): w for eid, words in producer.expected.items() for pos, w in enumerate(words)}
    assert seen == want
    assert total >= len(want)


def _start(home: Path, server, name: str, stream: str, out: str, claim_idle_ms: int = 3000):
    # 2 ms a line in each of the 2 split tasks: 1,000 lines/s of the 1,500 offered, so lines queue
    # up to the spouts' max pending and every kill and the restart catch entries in flight
    return run_local(TOPOLOGY, ["--url", server.url, "--stream", stream, "--group", "g", "--out", out,
                                "--claim-idle-ms", str(claim_idle_ms), "--split-delay-ms", "2"],
                     home=home, name=name, keep_running=True)


def _covered(server, out: str, producer: Producer) -> bool:
    """Every input word is in the output (extra ones fail _exact, with a clear message)."""
    seen = _output(server, out)[0]
    return all((eid, pos) in seen for eid, words in producer.expected.items() for pos in range(len(words)))


def _all_acked(server, stream: str) -> bool:
    try:
        return int(server.client().xpending(stream, "g")["pending"]) == 0
    except Exception:
        return False


def _consumer_pending(server, stream: str) -> dict[str, int]:
    info = server.client().xpending(stream, "g")
    return {c["name"].decode(): int(c["pending"]) for c in info.get("consumers") or []}


def _server_links(proc: psutil.Process, port: int) -> set[int]:
    """The local ports of ``proc``'s connections to the server on ``port``."""
    return {c.laddr.port for c in proc.net_connections(kind="tcp") if c.raddr and c.raddr.port == port}


def _client_ports(server) -> set[int]:
    """The client ports of the connections the server still has open."""
    return {int(c["addr"].rsplit(":", 1)[1]) for c in server.client().client_list()}


def _kill_a_spout_holding_entries(home: Path, name: str, server, stream: str) -> tuple[str, int]:
    """kill -9 a spout task while its consumer holds unacknowledged entries; returns the consumer
    and the entries it held once dead (a dead task acknowledges nothing more). Under load a task
    can have everything acknowledged at the moment of the kill, which would prove nothing: then
    the task is killed again after its restart, up to three times."""
    def holder() -> tuple[int, int] | None:
        pending = _consumer_pending(server, stream)
        for task, pid in _pids(home, name, "spout").items():
            if pending.get(f"spout-{task}", 0) > 0:  # the consumer is named after its task
                return task, pid
        return None

    for _attempt in range(3):
        task, pid = wait_for(holder, 30, "a spout task holding unacknowledged entries")
        consumer = f"spout-{task}"
        proc = psutil.Process(pid)
        ports = _server_links(proc, server.port)
        os.kill(pid, signal.SIGKILL)
        wait_for(lambda p=proc: exited(p), 10, f"spout task {pid} gone")
        # an XACK the task wrote just before it died can still sit in the server's socket: once
        # the server has closed the task's connections it has read (and applied) all they carried
        wait_for(lambda p=ports: not p & _client_ports(server), 10, f"the server closed {consumer}'s connections")
        held = _consumer_pending(server, stream).get(consumer, 0)
        if held > 0:
            return consumer, held
        wait_for(lambda t=task, p=pid: _pids(home, name, "spout").get(t, p) != p, 30, f"{consumer} restarted")
    raise AssertionError("three spout kills found nothing pending: the test proves nothing")


def test_kill_9_of_the_spout_and_of_the_sink_loses_nothing(heron_home, server):
    # no claims within the test: the restarted spout task itself must emit its pending entries again
    run = _start(heron_home, server, "rwc_kill", "lines1", "words1", claim_idle_ms=600_000)
    producer = Producer(server, "lines1", seconds=4)
    try:
        producer.start()
        wait_for(lambda: _output(server, "words1")[1] > 3000, 40, "1000 lines written")
        held = _kill_a_spout_holding_entries(heron_home, run.name, server, "lines1")
        wait_for(lambda: _output(server, "words1")[1] > 8000, 40, "2700 lines written")
        os.kill(_pid(heron_home, run.name, "sink"), signal.SIGKILL)
        assert not _all_acked(server, "lines1") or producer.is_alive(), \
            "every line was done before the kills: the test proves nothing"
        producer.join(30)
        want = 3 * N
        wait_for(lambda: _covered(server, "words1", producer) and _all_acked(server, "lines1"), 45,
                 f"all {want} words written and every line acknowledged")
        _exact(server, "words1", producer)
        executor_log = _logs(heron_home, run.name, "executor-*.log")
        assert re.search(r"spout-\d+ exited with code -9", executor_log)
        assert re.search(r"sink-\d+ exited with code -9", executor_log)
        spout_log = _logs(heron_home, run.name, "container-*/spout-*.log")
        # the restarted spout task emitted again exactly what its first run left unacknowledged
        consumer, count = held
        assert f"re-emitted {count} entries left pending by an earlier run of consumer '{consumer}'" in spout_log
        assert _output(server, "words1")[1] > want  # replays wrote some words twice; de-duplication made it exact
        for eid in producer.malformed:
            line = (f"entry {eid} of stream 'lines1' is malformed: expected fields ['value'], found ['not-value']; "
                    f"failed and acknowledged (not emitted)")
            assert spout_log.count(line) == 1, line
    finally:
        kill_local(heron_home, run.name)


def test_redis_server_restart_mid_run_resumes(heron_home, server):
    run = _start(heron_home, server, "rwc_restart", "lines2", "words2")
    producer = Producer(server, "lines2", seconds=4)
    try:
        producer.start()
        wait_for(lambda: _output(server, "words2")[1] > 3000, 40, "1000 lines written")
        server.stop()
        time.sleep(1.5)  # down long enough for reads, XACKs and writes to fail
        server.start()
        assert not _all_acked(server, "lines2") or producer.is_alive(), \
            "every line was done before the restart: the test proves nothing"
        producer.join(30)
        want = 3 * N
        wait_for(lambda: _covered(server, "words2", producer) and _all_acked(server, "lines2"), 45,
                 f"all {want} words written and every line acknowledged after the restart")
        _exact(server, "words2", producer)
        logs = _logs(heron_home, run.name, "container-*/*.log")
        assert re.search(rf"redis server redis://127.0.0.1:{server.port}/0 unreachable \(ConnectionError: ", logs)
        assert f"redis server redis://127.0.0.1:{server.port}/0 reachable again" in logs
    finally:
        kill_local(heron_home, run.name)
