"""Kafka → split → count at least once on real processes and a real Kafka-protocol broker
(Tansu): 50,000 records on 3 partitions produced while the topology runs, kill -9 of a spout
task and of a count task mid-run. Every record is counted at least once and exactly once after
de-duplication by (partition, offset); the group's committed offsets reach the log end; and no
commit ever covers a record whose words were not all counted (acked) before it."""

import os
import re
import signal
import threading
import time
from collections import defaultdict

import pytest

from heron_py.common.container_layout import TopologyPaths
from heron_py.testing import run_local
from heron_py.testing.local import kill_local
from tests.connector_support import task_pid as _pid
from tests.kafka_broker import broker_or_skip
from tests.support import wait_for

pytestmark = pytest.mark.integration

N = 50_000
TOPOLOGY = os.path.join(os.path.dirname(__file__), "..", "kafka", "kafka_word_count.py")
COMMIT = re.compile(r"committed (.*) at (\d+\.\d+)")


def _counted(out):
    """(partition, offset) → the time all its words were first counted; and the lines seen."""
    first: dict[tuple[int, int, int], float] = {}
    lines = 0
    for f in out.glob("count-*.txt"):
        for line in f.read_text().splitlines():
            p, o, pos, t = line.split()
            lines += 1
            key = (int(p), int(o), int(pos))
            first[key] = min(first.get(key, float("inf")), float(t))
    done: dict[tuple[int, int], float] = defaultdict(float)
    for (p, o, _pos), t in first.items():
        done[(p, o)] = max(done[(p, o)], t)
    return done, lines


def test_kafka_word_count_at_least_once_with_kill_9(heron_home, tmp_path):
    broker = broker_or_skip(tmp_path)
    out = tmp_path / "out"
    try:
        broker.create_topic("words", 3)
        ends: dict[int, int] = {}
        # the last third is produced only once this is set, after both kills: the input is still
        # incomplete at the kills by construction, however slow the machine
        resume = threading.Event()

        def produce():  # the first two thirds paced over ~5 s, then the gate
            from confluent_kafka import Producer
            p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})

            def delivered(err, msg):
                assert err is None, err
                ends[msg.partition()] = max(ends.get(msg.partition(), 0), msg.offset() + 1)
            for i in range(N):
                if i == 2 * N // 3:
                    p.poll(0)
                    resume.wait(120)
                p.produce("words", value=f"w{i % 97} x{i % 13} y{i}".encode(), partition=i % 3, on_delivery=delivered)
                if i % 500 == 0:
                    p.poll(0)
                    time.sleep(0.08)
            assert p.flush(60) == 0
        run = run_local(TOPOLOGY, ["--bootstrap", broker.bootstrap, "--topic", "words", "--group", "g1",
                                   "--out", str(out)], home=heron_home, name="kwc", keep_running=True)
        producer = threading.Thread(target=produce)
        producer.start()
        try:
            wait_for(lambda: _counted(out)[1] > 30_000, 60, "10,000 records counted")
            os.kill(_pid(heron_home, run.name, "kafka"), signal.SIGKILL)
            wait_for(lambda: _counted(out)[1] > 75_000, 60, "25,000 records counted")
            os.kill(_pid(heron_home, run.name, "count"), signal.SIGKILL)
            resume.set()  # the last third of the records is produced only now, after both kills
            producer.join(120)
            wait_for(lambda: broker.committed("g1", "words") == ends, 120,
                     f"committed offsets to reach the log end {ends}")
            done, _lines = _counted(out)
            assert len(done) == N and sum(ends.values()) == N
            assert set(done) == {(p, o) for p, end in ends.items() for o in range(end)}
            # no commit covered a record not yet counted: commits never ran ahead of acks
            logs = "".join(f.read_text() for f in TopologyPaths.of(run.name, heron_home).logs.glob(
                "container-*/kafka-*.log"))
            commits = COMMIT.findall(logs)
            assert commits
            for what, at in commits:
                for part in what.split(", "):
                    tp, off = part.rsplit("@", 1)
                    p = int(tp.rsplit("-", 1)[1])
                    late = [o for o in range(int(off)) if done[(p, o)] > float(at)]
                    assert not late, f"commit {tp}@{off} at {at} ran ahead of the acks of offsets {late[:5]}"
            executor_log = "".join(f.read_text() for f in TopologyPaths.of(run.name, heron_home).logs.glob(
                "executor-*.log"))
            assert re.search(r"kafka-\d+ exited with code -9", executor_log)
            assert re.search(r"count-\d+ exited with code -9", executor_log)
        finally:
            resume.set()
            kill_local(heron_home, run.name)
    finally:
        broker.stop()
