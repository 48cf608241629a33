"""Kafka → transform → Kafka (2 containers, at least once) through broker outages, on real
processes and a real Kafka-protocol broker (Tansu):

- the broker frozen with SIGSTOP for 20 s while records flow, then SIGCONT: its connections
  hang with no FIN, as a hung or partitioned broker's do, and its in-memory log survives (the
  pinned Tansu has no persistent storage engine, so a stop-and-restart would lose the log:
  docs/connectors/kafka.md). The topology resumes and every input's output is in the output
  topic at least once; the spout's failed/retries metrics moved (what it had in flight timed
  out and was replayed);
- the broker killed and restarted on the same port with empty memory (its topics gone): the
  spout tasks stay up, log that the topic does not exist, and take it again once it is made.
"""

import json
import os
import re
import threading
import time
import urllib.request

import pytest

from heron_py.scheduler.paths import TopologyPaths
from heron_py.state import LocalFsStateManager
from heron_py.testing import run_local
from heron_py.testing.local import kill_local
from tests.kafka_broker import OutputReader, broker_or_skip
from tests.support import wait_for

pytestmark = pytest.mark.integration

N = 4_000
FREEZE_S = 20
TOPOLOGY = os.path.join(os.path.dirname(__file__), "..", "kafka", "kafka_to_kafka.py")


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = broker_or_skip(tmp_path_factory.mktemp("tansu"))  # its own: these tests stop it
    yield b
    b.stop()


def _spout_pids(home, name):
    es = LocalFsStateManager(home).get_execution_state(name)
    return sorted(info["pid"] for info in es["instances"].values() if info["component"] == "kafka")


def _spout_totals(home, name):
    """The spout's ``kafka`` metric summed over its intervals, from the metrics managers' file
    sinks. A task reports more often than the metric's 10 s interval and repeats the last
    values until the next one, so the same values of a task are counted once (the
    per-partition offsets in them make two intervals' values differ while records flow)."""
    seen: dict[tuple[int, str], dict[str, float]] = {}
    for f in TopologyPaths.of(name, home).logs.glob("container-*/metrics.jsonl"):
        for line in f.read_text().splitlines():
            for rep in json.loads(line).get("reports", []):
                kafka = rep.get("user", {}).get("kafka")
                if rep.get("component") == "kafka" and isinstance(kafka, dict):
                    seen[(rep["task"], json.dumps(kafka, sort_keys=True))] = kafka
    totals: dict[str, float] = {}
    for kafka in seen.values():
        for k in ("failed", "retries", "errors", "records"):
            totals[k] = totals.get(k, 0) + kafka.get(k, 0)
    return totals


def _spout_logs(home, name):
    logs = TopologyPaths.of(name, home).logs
    return "".join(f.read_text(errors="replace") for f in logs.glob("container-*/kafka-*.log"))


def _check_lag_is_exported(home, name):
    """Each spout task's lag per partition: in the JSON the web page reads (/topologies/tasks)
    and in the metrics managers' Prometheus text, with topic and partition as labels."""
    loc = LocalFsStateManager(home).get_tmanager_location(name)
    base = f"{getattr(loc, 'http_scheme', 'http')}://{loc.host}:{loc.http_port}"

    def lag_rows():
        with urllib.request.urlopen(base + "/topologies/tasks", timeout=5) as r:
            tasks = json.loads(r.read())["result"]["tasks"]
        rows = {t: row["kafka_lag"] for t, row in tasks.items() if "kafka_lag" in row}
        return rows if len(rows) == 2 else None

    rows = wait_for(lag_rows, 30, "kafka_lag of both spout tasks in /topologies/tasks")
    assert sorted(p for r in rows.values() for p in r) == ["out-in-0", "out-in-1", "out-in-2"], rows
    assert {tasks_component(home, name, int(t)) for t in rows} == {"kafka"}
    text = ""
    for k in (0, 1):
        mm = json.loads((TopologyPaths.of(name, home).container(k) / "metricsmgr.json").read_text())
        with urllib.request.urlopen(f"http://127.0.0.1:{mm['http_port']}/metrics", timeout=5) as r:
            text += r.read().decode()
    found = set(re.findall(r'^heron_kafka_partition_lag\{[^}]*partition="(\d)"[^}]*topic="out-in"[^}]*\} \d', text,
                           re.M))
    assert found == {"0", "1", "2"}, "heron_kafka_partition_lag is missing partitions"


def tasks_component(home, name, task):
    es = LocalFsStateManager(home).get_execution_state(name)
    return es["instances"][str(task)]["component"]


def test_broker_frozen_20s_mid_run_loses_nothing(broker, heron_home):
    broker.create_topic("out-in", 3)
    broker.create_topic("out-out", 2)
    sent: dict[str, str] = {}

    def produce():  # paced over ~8 s of its own, so records are still coming when the broker stops
        from confluent_kafka import Producer
        p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})

        def delivered(err, msg):
            assert err is None, err
            sent[f"out-in:{msg.partition()}:{msg.offset()}"] = msg.value().decode()
        for i in range(N):
            p.produce("out-in", value=f"record {i} of the outage".encode(), partition=i % 3, on_delivery=delivered)
            if i % 200 == 0:
                p.poll(0)
                time.sleep(0.4)
        assert p.flush(90) == 0

    reader = OutputReader(broker.bootstrap, "out-out")
    reader.poll()  # assigned before the topology writes (Tansu's earliest-offset answer, as in test_kafka_pipeline)
    run = run_local(TOPOLOGY, ["--bootstrap", broker.bootstrap, "--input", "out-in", "--output", "out-out",
                               "--group", "outage"], home=heron_home, name="koutage", keep_running=True,
                    # the file sink writes every second, so each 10 s report of the spout is kept
                    properties={"topology.metrics.export.interval.secs": "1"})
    producer = threading.Thread(target=produce)
    producer.start()
    try:
        wait_for(lambda: reader.poll() > 500, 60, "500 records in the output topic")
        pids = _spout_pids(heron_home, run.name)
        broker.freeze()
        try:
            assert producer.is_alive(), "the producer ended before the outage: the test proves nothing"
            time.sleep(FREEZE_S)
        finally:
            broker.thaw()
        producer.join(120)
        assert len(sent) == N
        wait_for(lambda: reader.poll() >= N, 120, f"all {N} records in the output topic after the outage")
        assert set(reader.got) == set(sent)
        wrong = {k: v for k, v in reader.got.items() if v != {sent[k].upper()}}
        assert not wrong, f"outputs differ from their inputs: {list(wrong.items())[:3]}"
        assert _spout_pids(heron_home, run.name) == pids, "a spout task restarted during the outage"
        # the spout saw the outage (its metadata refreshes timed out) and counted it; records in
        # flight at the bolts then (if any) timed out and were replayed: failed and retries
        totals = wait_for(lambda: (t := _spout_totals(heron_home, run.name)).get("errors", 0) > 0 and
                          t.get("records", 0) >= N and t, 30, "the spout's errors metric to move")
        assert totals["retries"] <= totals["failed"], totals
        print(f"spout totals through the outage: {totals}")
        _check_lag_is_exported(heron_home, run.name)
    finally:
        reader.c.close()
        kill_local(heron_home, run.name)


def test_broker_restarted_empty_the_spout_waits_for_its_topic(broker, heron_home):
    broker.create_topic("gone-in", 2)
    broker.create_topic("gone-out", 1)
    broker.produce("gone-in", [(None, f"a{i}".encode()) for i in range(100)])
    reader = OutputReader(broker.bootstrap, "gone-out")
    reader.poll()
    run = run_local(TOPOLOGY, ["--bootstrap", broker.bootstrap, "--input", "gone-in", "--output", "gone-out",
                               "--group", "gone"], home=heron_home, name="kgone", keep_running=True)
    try:
        wait_for(lambda: reader.poll() >= 100, 40, "the first 100 records out")
        reader.c.close()
        # (the KafkaBolt's idempotent producer does not deliver to the new broker: not tested here)
        pids = _spout_pids(heron_home, run.name)
        broker.stop()
        broker.start()  # same port, empty memory: both topics are gone
        line = "topic 'gone-in' does not exist on " + broker.bootstrap
        wait_for(lambda: line in _spout_logs(heron_home, run.name), 30, f"the spout to log {line!r}")
        time.sleep(3)  # a crash loop would show as new pids within this
        assert _spout_pids(heron_home, run.name) == pids, "a spout task restarted while its topic was missing"
        broker.create_topic("gone-in", 2)
        broker.produce("gone-in", [(None, f"b{i}".encode()) for i in range(100)])

        def retaken():  # each task's partition assigned again after its "does not exist" line
            files = list(TopologyPaths.of(run.name, heron_home).logs.glob("container-*/kafka-*.log"))
            texts = [f.read_text(errors="replace") for f in files]
            return len(texts) == 2 and all(line in t and "assigned 1 partitions: gone-in-" in t[t.index(line):]
                                           for t in texts)
        wait_for(retaken, 30, "both spout tasks to take the topic made again")
        assert _spout_pids(heron_home, run.name) == pids
    finally:
        try:
            reader.c.close()
        except RuntimeError:  # closed already, before the restart
            pass
        kill_local(heron_home, run.name)
