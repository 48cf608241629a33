"""Kafka → split → stateful count effectively once on real processes and Tansu: kill -9 of a
KafkaSpout task, a count task and a stream manager mid-run (one after the other, each after
the topology restored from the previous one), and the final state is exact: the counts of
the newest completed checkpoint whose spout positions reach the log end equal a plain Python
count of the input. No acking, no de-duplication anywhere: a record replayed into the counts
twice would show as a count too high. The group's committed offsets follow the complete
checkpoints up to the log end: the spouts commit them at the master's word that a checkpoint is
complete, and at each restore (they never read the checkpoint storage)."""

import os
import pickle
import re
import signal
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from heron_py.checkpoint.storage import IncompleteCheckpointError, LocalFsStorage
from heron_py.common.container_layout import TopologyPaths
from heron_py.connectors.kafka.delivery import positions_from_state
from heron_py.state import config as statecfg
from heron_py.state import open_state
from heron_py.testing import run_local
from heron_py.testing.local import kill_local
from tests.kafka_broker import broker_or_skip
from tests.support import wait_for

pytestmark = pytest.mark.integration

N = 24_000
TOPOLOGY = os.path.join(os.path.dirname(__file__), "..", "kafka", "kafka_stateful_count.py")


def words(i):
    return f"w{i % 50} x{i % 7}"


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = broker_or_skip(tmp_path_factory.mktemp("tansu"))
    yield b
    b.stop()


def _state():
    home = Path(os.environ["HERON_PY_HOME"])
    return open_state(statecfg.resolve(home=home), home)


def _tasks(name):
    out: dict[str, list[int]] = {}
    for t in _state().get_packing_plan(name).tasks:
        out.setdefault(t.component, []).append(t.task_id)
    return out


def _logs(home, name, pattern):
    return "".join(f.read_text() for f in TopologyPaths.of(name, home).logs.glob(pattern))


def _checkpoints(home, name):
    return len(re.findall(r"checkpoint \d+ complete", _logs(home, name, "container-0/tmanager*.log")))


def _restores(home, name):
    return len(re.findall(r"restore \d+ to .*\(failure: ", _logs(home, name, "container-0/tmanager*.log")))


def _final(home, name, ends):
    """(checkpoint id, counts) of the newest completed checkpoint whose spouts' positions are
    the log end of every partition, or None."""
    storage = LocalFsStorage(home / "checkpoints")
    tasks = _tasks(name)
    for cid in reversed(storage.completed_ids(name)):
        try:
            positions: dict[int, int] = {}
            for t in tasks["kafka"]:
                state = pickle.loads(storage.load(name, cid, t) or pickle.dumps({}))
                saved = positions_from_state(state.get("kafka.positions"))
                positions.update({p: o for (_topic, p), o in saved.items()})
            if positions != ends:
                continue
            counts: Counter = Counter()
            for t in tasks["count"]:
                counts.update(pickle.loads(storage.load(name, cid, t) or pickle.dumps({})))
        except IncompleteCheckpointError:
            continue  # removed by the master's garbage collection after it was listed
        return cid, counts
    return None


def _pid(name, component):
    for _t, info in sorted(_state().get_execution_state(name)["instances"].items()):
        if info["component"] == component and info.get("pid"):
            return int(info["pid"])
    raise AssertionError(f"no running {component} task")


def _produce(broker, topic, n, ends, resume, *, pause_at, sleep_s):
    """``words(i)`` for i < n over 3 partitions, paced (``sleep_s`` every 150), held at ``pause_at``
    until ``resume``; ``ends`` gets each partition's log end."""
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})

    def delivered(err, msg):
        assert err is None, err
        ends[msg.partition()] = max(ends.get(msg.partition(), 0), msg.offset() + 1)
    for i in range(n):
        if i == pause_at:
            assert p.flush(30) == 0
            resume.wait(180)
        p.produce(topic, value=words(i).encode(), partition=i % 3, on_delivery=delivered)
        if i % 150 == 0:
            p.poll(0)
            time.sleep(sleep_s)
    assert p.flush(30) == 0


def test_kafka_stateful_count_exact_through_three_kills(broker, heron_home):
    broker.create_topic("eo-words", 3)
    ends: dict[int, int] = {}
    # the last third of the input waits for the three kills: the input is still arriving at each
    # kill however slow the machine (a producer paced by the clock alone can finish first)
    resume = threading.Event()

    def produce():  # two thirds paced over ~11 s, the rest after the kills
        _produce(broker, "eo-words", N, ends, resume, pause_at=2 * N // 3, sleep_s=0.1)
    run = run_local(TOPOLOGY, ["--bootstrap", broker.bootstrap, "--topic", "eo-words", "--group", "eo"],
                    home=heron_home, name="keo", keep_running=True)
    producer = threading.Thread(target=produce)
    producer.start()
    try:
        kills = [("spout", lambda: _pid(run.name, "kafka")), ("count", lambda: _pid(run.name, "count")),
                 ("stream manager", lambda: int(_state().get_execution_state(run.name)["stmgrs"]["1"]["pid"]))]
        for i, (what, pid) in enumerate(kills):
            base = _checkpoints(heron_home, run.name)
            wait_for(lambda b=base: _checkpoints(heron_home, run.name) >= b + 2, 40,
                     f"two checkpoints before the {what} kill")
            os.kill(pid(), signal.SIGKILL)
            wait_for(lambda n=i + 1: _restores(heron_home, run.name) >= n, 40, f"a restore after the {what} kill")
        resume.set()
        producer.join(60)
        assert sum(ends.values()) == N
        cid, counts = wait_for(lambda: _final(heron_home, run.name, ends), 60,
                               f"a completed checkpoint whose positions reach the log end {ends}")
        expected = Counter(w for i in range(N) for w in words(i).split())
        assert sum(counts.values()) == 2 * N, f"checkpoint {cid}: {sum(counts.values())} words, expected {2 * N}"
        assert counts == expected
        # the group's commits follow the master's words for complete checkpoints up to the log end
        wait_for(lambda: broker.committed("eo", "eo-words") == ends, 20, f"commits to reach {ends}")
        spout_logs = _logs(heron_home, run.name, "container-*/kafka-*.log")
        assert "restored positions eo-words-" in spout_logs
    finally:
        resume.set()
        kill_local(heron_home, run.name)


def test_kafka_spout_rescaled_twice_mid_run_counts_stay_exact(broker, heron_home):
    """The Kafka spout's positions merge at a rescale (each saved by the task that had the
    partition): kafka 2 -> 3 -> 1 mid-run, and the final checkpoint's counts are exact, every
    partition's position at its log end."""
    from tests.support import run_cli

    n = 12_000
    broker.create_topic("eo-rescale", 3)
    ends: dict[int, int] = {}
    resume = threading.Event()

    def produce():  # half paced over ~4 s, the rest after the two rescales
        _produce(broker, "eo-rescale", n, ends, resume, pause_at=n // 2, sleep_s=0.05)
    run = run_local(TOPOLOGY, ["--bootstrap", broker.bootstrap, "--topic", "eo-rescale", "--group", "eor"],
                    home=heron_home, name="keor", keep_running=True)
    producer = threading.Thread(target=produce)
    producer.start()
    try:
        for step in ("kafka:3", "kafka:1"):
            base = _checkpoints(heron_home, run.name)
            wait_for(lambda b=base: _checkpoints(heron_home, run.name) >= b + 2, 40, f"two checkpoints before {step}")
            u = run_cli(heron_home, "update", "local", run.name, "--component-parallelism", step, "--wait", "90")
            assert u.returncode == 0, u.stderr
        assert len(_tasks(run.name)["kafka"]) == 1
        resume.set()
        producer.join(60)
        assert sum(ends.values()) == n
        cid, counts = wait_for(lambda: _final(heron_home, run.name, ends), 90,
                               f"a completed checkpoint whose positions reach the log end {ends}")
        expected = Counter(w for i in range(n) for w in words(i).split())
        assert counts == expected, f"checkpoint {cid}: {sum(counts.values())} words, expected {2 * n}"
        spout_logs = _logs(heron_home, run.name, "container-*/kafka-*.log")
        assert "restored positions eo-rescale-" in spout_logs
    finally:
        resume.set()
        kill_local(heron_home, run.name)
