"""The KafkaSpout's records/s against a bare confluent-kafka consumer loop that commits, on the
same Tansu broker and topic (goals: at least once >= 0.6x, no guarantee >= 0.8x). The lead runs it:

    .venv/bin/python bench/kafka_bench.py [--records 200000] [--guarantee AT_LEAST_ONCE]
    .venv/bin/python bench/kafka_bench.py --rev REV [--reps 3] [--guarantee AT_LEAST_ONCE]   # A/B

It produces the records once, times a bare loop (assign, consume until all are read, committing
every 200 ms, the last commit synchronous), then runs
a topology KafkaSpout (par 1, NO_GUARANTEE by default: acking off) -> a counting bolt (which acks)
on the local scheduler, on a consumer group of its own, and times from the group's first commit
until its committed offsets reach the log end (submit and the group's join are not counted; the
spout commits every 200 ms). With ``AT_LEAST_ONCE`` the topology acks and a record is committed
once its tuple is acked.

With ``--rev`` the spout runs ``--reps`` times on each side, alternating which goes first, beside
a bare loop per pair: A is the engine and connector at a git revision (a worktree, as
``bench/ab.py --rev`` makes it), B this tree."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from connector_common import ab_against_bare, add_ab_args, topology_head  # noqa: E402

from tests.kafka_broker import TansuBroker  # noqa: E402

TOPOLOGY = topology_head("from heron_py.connectors.kafka import KafkaSpout") + '''
guarantee = sys.argv[3]
b = TopologyBuilder("kafka_bench")
spout = KafkaSpout.spec(name="kafka", par=1, config={"kafka.bootstrap.servers": sys.argv[1],
    "kafka.topics": ["bench"], "kafka.group.id": sys.argv[2], "kafka.processing.guarantee": guarantee,
    "kafka.offset.commit.period.ms": 200})
b.add_spec(spout)
b.add_bolt("count", Count, par=1, inputs={spout: Grouping.SHUFFLE})
b.set_config({"topology.stmgrs": 1, "topology.max.spout.pending": 5000,
              "topology.reliability.mode": "ATLEAST_ONCE" if guarantee == "AT_LEAST_ONCE" else "ATMOST_ONCE"})
b.build_and_submit()
'''


def bare(bootstrap: str, n: int) -> float:
    """A bare consumer that commits as the spout does: what it consumed, every 200 ms (the
    topology's kafka.offset.commit.period.ms here), timed until its last commit is done."""
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bare", "enable.auto.commit": False})
    c.assign([TopicPartition("bench", 0, -2)])
    got, t0 = 0, time.perf_counter()
    next_commit = t0 + 0.2
    last = -1
    while got < n:
        for m in c.consume(500, 1.0):
            if m.error() is None:
                got += 1
                last = m.offset()
        if time.perf_counter() >= next_commit and last >= 0:
            c.commit(offsets=[TopicPartition("bench", 0, last + 1)], asynchronous=True)
            next_commit = time.perf_counter() + 0.2
    c.commit(offsets=[TopicPartition("bench", 0, last + 1)], asynchronous=False)
    dt = time.perf_counter() - t0
    c.close()
    return n / dt


def spout(broker: TansuBroker, home: Path, n: int, group: str = "bench", guarantee: str = "NO_GUARANTEE",
          python: str = sys.executable) -> float:
    """The spout's records/s on a consumer group of its own, the topology submitted by
    ``python``'s CLI (another interpreter runs another checkout: ``--rev``)."""
    f = home / "kafka_bench_topology.py"
    f.write_text(TOPOLOGY)
    env = {**os.environ, "HERON_PY_HOME": str(home)}
    env.pop("PYTHONPATH", None)
    cli = [python, "-m", "heron_py.cli.main"]
    # cwd: the interpreter must not import the tree it is started from (another checkout)
    p = subprocess.run([*cli, "submit", "local", str(f), broker.bootstrap, group, guarantee], env=env, cwd=home,
                       capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"kafka bench: submit failed:\n{p.stdout}\n{p.stderr}")
    try:
        while (r0 := broker.committed(group, "bench").get(0, -1)) <= 0:
            time.sleep(0.02)
        t0 = time.perf_counter()
        while (r := broker.committed(group, "bench").get(0, -1)) < n:
            time.sleep(0.02)
        return (r - r0) / (time.perf_counter() - t0)
    finally:
        subprocess.run([*cli, "kill", "local", "kafka_bench"], env=env, cwd=home, capture_output=True)


def ab(broker: TansuBroker, home: Path, n: int, rev: str, reps: int, guarantee: str) -> None:
    ab_against_bare(rev, reps, f"{n} records per run, {guarantee}", lambda _rep: bare(broker.bootstrap, n),
                    lambda side, rep, python: spout(broker, home, n, f"{side}{rep}", guarantee, python))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--guarantee", default="NO_GUARANTEE", choices=["NO_GUARANTEE", "AT_MOST_ONCE", "AT_LEAST_ONCE"])
    add_ab_args(ap)
    args = ap.parse_args()
    home = Path(tempfile.mkdtemp(prefix="kafka_bench"))
    broker = TansuBroker(home)
    try:
        broker.create_topic("bench", 1)
        broker.produce("bench", [(None, f"record {i} " .encode() + b"x" * 80) for i in range(args.records)],
                       partition=0)
        if args.rev:
            ab(broker, home, args.records, args.rev, args.reps, args.guarantee)
            return
        b = bare(broker.bootstrap, args.records)
        s = spout(broker, home, args.records, guarantee=args.guarantee)
        print(f"| records | bare confluent-kafka loop (records/s) | KafkaSpout {args.guarantee} (records/s) | ratio |\n"
              f"|---|---|---|---|\n| {args.records} | {b:,.0f} | {s:,.0f} | {s / b:.2f}x |")
    finally:
        broker.stop()


if __name__ == "__main__":
    main()
