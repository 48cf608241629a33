"""Kafka → word count → Kafka end to end, on a Tansu broker it starts (issue 57, goal 1):
heron-py's topology beside the floors it is held to, in one run. The lead runs it:

    .venv/bin/python bench/kafka_e2e.py [--records 100000] [--seconds 10] [--par 2] [--quick]
    .venv/bin/python bench/kafka_e2e.py --ab KEY A B --rate R [--reps 2]   # a config switch's A/B
    .venv/bin/python bench/kafka_e2e.py --rev REV --rate R [--reps 2]      # A the engine at REV, B this tree

Each phase gets a broker of its own (Tansu's memory engine lists a partition's whole history on
every fetch, so a phase on a used broker would pay for the phases before it):

1. **peak**: the input produced first, then consumed as fast as it goes: the bare loop (one
   Python process: confluent-kafka consume → split → count → produce, offsets committed after
   the producer's flush) and the topology (KafkaSpout par P, at least once → split → count
   (fields) → KafkaBolt par P). Records/s from the first count out to the last.
2. **latency at half the topology's peak**, the input paced by a producer thread: the broker's
   own floor (produce → consume, one hop), the bare loop (two hops, the same transform) and the
   topology. Each output record's latency is its arrival minus its input's send time, cut in
   three where the code marks it: *in* (send → the split step: the bench's producer, the broker,
   the consumer's fetch and, in the topology, the spout and one engine hop), *engine* (the
   split step → the sink's produce call, the output record's CreateTime: the engine's hops and
   the count) and *out* (produce → read back: linger, the broker, the reader's fetch).

Every consumer here (the spout's, the bare loop's, the readers') waits at most
``--fetch-wait-ms`` for a fetch: Tansu 0.6.0 answers a fetch that waits for data by sleeping
half of the time left instead of waking when a record arrives, so librdkafka's default (500 ms)
costs up to 250 ms per hop on it and nothing on a real Kafka broker. The topology gets it as
``kafka.consumer.fetch.wait.max.ms`` (docs/connectors/kafka.md, "Latency"); nothing else is
tuned. ``--quick`` is the smoke run of ``bench/run.py --quick``: fewer records, the latency at a
fixed 5,000 records/s, no bare loop.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.kafka_broker import TansuBroker, tansu_binary  # noqa: E402

WORDS = 4  # per input record
TOPOLOGY = '''
import sys, time
from heron_py.connectors.kafka import KafkaBolt, KafkaSpout
from heronpy.api.bolt.bolt import Bolt
from heronpy.api.stream import Grouping
from heronpy.api.topology import TopologyBuilder

class Split(Bolt):
    outputs = ["word", "sent"]
    def process(self, tup):
        sent, _, text = tup.values[4].partition(" ")
        marks = f"{sent} {time.time():.6f}"
        for w in text.split():
            self.emit([w, marks], anchors=[tup])
        self.ack(tup)

class Count(Bolt):
    outputs = ["key", "message"]
    def initialize(self, config, context):
        self.counts = {}
    def process(self, tup):
        word, marks = tup.values
        n = self.counts[word] = self.counts.get(word, 0) + 1
        self.emit([word, f"{n} {marks}"], anchors=[tup])
        self.ack(tup)

bootstrap, par, fetch_wait = sys.argv[1], int(sys.argv[2]), sys.argv[3]
b = TopologyBuilder("kafka_e2e")
spout = KafkaSpout.spec(name="kafka", par=par, config={"kafka.bootstrap.servers": bootstrap,
    "kafka.topics": ["in"], "kafka.group.id": "e2e", "kafka.offset.commit.period.ms": 1000,
    "kafka.consumer.fetch.wait.max.ms": int(fetch_wait)})
b.add_spec(spout)
split = b.add_bolt("split", Split, par=par, inputs={spout: Grouping.SHUFFLE})
count = b.add_bolt("count", Count, par=par, inputs={split: Grouping.fields("word")})
b.add_bolt("out", KafkaBolt, par=par, inputs={count: Grouping.SHUFFLE},
           config={"kafka.bootstrap.servers": bootstrap, "kafka.topic": "out"})
b.set_config({"topology.stmgrs": 1, "topology.reliability.mode": "ATLEAST_ONCE",
              "topology.max.spout.pending": 2000})
b.build_and_submit()
'''


def produce(bootstrap: str, topic: str, n: int, rate: float, bare: bool = False) -> None:
    """``n`` sentences of WORDS words, each prefixed with its send time; ``rate`` 0: unpaced.
    ``bare``: the send time alone (the floor probe's records, read back as they are)."""
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 2})
    t0 = time.perf_counter()
    for i in range(n):
        if rate and i % 20 == 0:
            ahead = i / rate - (time.perf_counter() - t0)
            if ahead > 0:
                time.sleep(ahead)
        text = "" if bare else f" w{i % 101} x{i % 13} y{i % 7} z{i % 3}"
        p.produce(topic, value=f"{time.time():.6f}{text}".encode())
        if i % 500 == 0:
            p.poll(0)
    p.flush(120)


@dataclass
class Readings:
    """What a reader saw: per record its latency and, when the record carries the split step's
    mark and a CreateTime, its three parts (seconds)."""
    total: list[float] = field(default_factory=list)
    at: list[float] = field(default_factory=list)  # each record's arrival (time.time()), as ``total``
    parts: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    first: float = 0.0
    last: float = 0.0
    errors: list[str] = field(default_factory=list)  # the client's error events, if any
    broker_cpu: list[tuple[float, float]] = field(default_factory=list)  # the phase's (Phase.cpu)


class Reader:
    """The output topic's reader, assigned and past its first fetch before any input is sent
    (a reader that started with the input stamped the first second's records late)."""

    def __init__(self, bootstrap: str, topic: str, fetch_wait_ms: int) -> None:
        from confluent_kafka import Consumer, TopicPartition
        self.c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{topic}",
                           "enable.auto.commit": False, "fetch.wait.max.ms": fetch_wait_ms})
        parts = self.c.list_topics(topic, timeout=10).topics[topic].partitions
        self.c.assign([TopicPartition(topic, p, -2) for p in parts])
        self.c.consume(1, 1.0)  # the first fetch: connections up, positions resolved
        self.errors: list[str] = []  # error events the client handed over instead of records

    def collect(self, expected: int, timeout_s: float) -> Readings:
        from confluent_kafka import TIMESTAMP_CREATE_TIME
        c, r = self.c, Readings()
        deadline = time.monotonic() + timeout_s
        quiet_until = time.monotonic() + 60  # nothing new for 20 s once output flowed: the rest is lost
        while len(r.total) < expected and time.monotonic() < min(deadline, quiet_until):
            # the first record ends the wait, then what else is ready: consume(n, t) returns when
            # n records came or t ran out, which would stamp a batch's records late by up to t
            msgs = c.consume(1, 0.2)
            if msgs:
                msgs += c.consume(999, 0)
            if msgs:
                quiet_until = time.monotonic() + 20
            for m in msgs:
                if m.error() is not None:
                    self.errors.append(str(m.error()))
                    continue
                now = time.time()
                r.first = r.first or now
                r.last = now
                r.at.append(now)
                fields = (m.value() or b"").split()
                if len(fields) == 1:  # the floor probe: the send time alone
                    r.total.append(now - float(fields[0]))
                    continue
                sent, split = float(fields[1]), float(fields[2])
                r.total.append(now - sent)
                kind, ts = m.timestamp()
                if kind == TIMESTAMP_CREATE_TIME:
                    produced = ts / 1000.0
                    r.parts["in"].append(split - sent)
                    r.parts["engine"].append(produced - split)
                    r.parts["out"].append(now - produced)
        c.close()
        r.errors = self.errors
        return r


def bare_loop(bootstrap: str, fetch_wait_ms: int, stop: threading.Event, ready: threading.Event) -> None:
    """The loop a user would write without an engine: consume (waiting for the first record,
    then what is ready), split, count, produce each word's count, commit after the flush."""
    from confluent_kafka import Consumer, Producer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bare", "enable.auto.commit": False,
                  "auto.offset.reset": "earliest", "fetch.wait.max.ms": fetch_wait_ms})
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    # assigned, as the spout assigns its partitions (a group join on Tansu took ~20 s)
    parts = c.list_topics("in", timeout=10).topics["in"].partitions
    c.assign([TopicPartition("in", p, -2) for p in parts])
    counts: defaultdict[str, int] = defaultdict(int)
    c.consume(1, 1.0)  # connected and positioned before the input starts, as the topology is
    p.poll(0)
    ready.set()
    next_commit = time.monotonic() + 1.0
    while not stop.is_set():
        msgs = c.consume(1, 0.02)
        if not msgs:
            continue
        msgs += c.consume(499, 0)
        for m in msgs:
            if m.error() is not None:
                continue
            sent, _, text = m.value().decode().partition(" ")
            marks = f"{sent} {time.time():.6f}"
            for w in text.split():
                counts[w] += 1
                while True:
                    try:
                        p.produce("out", key=w.encode(), value=f"{counts[w]} {marks}".encode())
                        break
                    except BufferError:
                        p.poll(0.01)
        p.poll(0)
        if time.monotonic() >= next_commit:  # at least once: commit only what was delivered
            p.flush(30)
            c.commit(asynchronous=True)
            next_commit = time.monotonic() + 1.0
    p.flush(30)
    c.close()


def q(xs: list[float], k: int) -> float:
    return statistics.quantiles(xs, n=100)[k - 1] * 1000 if len(xs) >= 100 else float("nan")


class Phase:
    """One broker with fresh topics ``in`` and ``out`` for one measurement, and the broker's CPU
    sampled every second (``cpu``: (time.time(), CPU seconds so far)): Tansu's memory engine
    costs more per fetch as a partition's history grows, so its share of the two vCPUs climbs
    through a paced run."""

    def __init__(self, home: Path, par: int) -> None:
        self.broker = TansuBroker(home)
        self.broker.create_topic("in", par)
        self.broker.create_topic("out", par)
        self.bootstrap = self.broker.bootstrap
        self.cpu: list[tuple[float, float]] = []
        self._stop = threading.Event()
        self._sampler = threading.Thread(target=self._sample, daemon=True)
        self._sampler.start()

    def _sample(self) -> None:
        import psutil
        proc = psutil.Process(self.broker.pid)
        while not self._stop.wait(1.0):
            try:
                c = proc.cpu_times()
            except psutil.Error:
                return
            self.cpu.append((time.time(), c.user + c.system))

    def __enter__(self) -> Phase:
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._sampler.join()
        self.broker.stop()


WINDOW_S = 2.0


def windows(r: Readings, cpu: list[tuple[float, float]]) -> list[str]:
    """The run's records by arrival in WINDOW_S windows: per window the records, p50 and p99 (ms)
    of the whole and of each part, and the broker's CPU (cores) over the window."""
    out: list[str] = []
    if not r.at:
        return out
    t, i, n = r.at[0], 0, len(r.at)
    while i < n:
        j = i
        while j < n and r.at[j] < t + WINDOW_S:
            j += 1
        steps = [(tb - ta, b - a) for (ta, a), (tb, b) in pairwise(cpu) if t <= tb <= t + WINDOW_S]
        span = sum(d for d, _ in steps)
        cores = f"{sum(c for _, c in steps) / span:.2f}" if span > 0 else "-"
        sl = Readings(total=r.total[i:j], parts={k: v[i:j] for k, v in r.parts.items()})
        out.append(f"| {t - r.at[0]:.0f}-{t - r.at[0] + WINDOW_S:.0f} s | {j - i:,} | {q(sl.total, 50):.1f} / "
                   f"{q(sl.total, 99):.1f} | {parts(sl)} | {cores} |")
        i, t = j, t + WINDOW_S
    return out


def run_bare(home: Path, args: argparse.Namespace, records: int, rate: float) -> Readings:
    with Phase(home, args.par) as ph:
        stop, ready = threading.Event(), threading.Event()
        if not rate:
            produce(ph.bootstrap, "in", records, 0)
        reader = Reader(ph.bootstrap, "out", args.fetch_wait_ms)
        loop = threading.Thread(target=bare_loop, args=(ph.bootstrap, args.fetch_wait_ms, stop, ready))
        loop.start()
        ready.wait(30)
        feeder = _feeder(ph.bootstrap, records, rate)
        try:
            r = reader.collect(records * WORDS, 300)
        finally:
            stop.set()
            loop.join()
            if feeder:
                feeder.join()
        r.broker_cpu = ph.cpu
        return r


def run_topology(home: Path, args: argparse.Namespace, records: int, rate: float,
                 properties: dict[str, str] | None = None) -> Readings:
    from heron_py.testing import run_local
    from heron_py.testing.local import kill_local
    with Phase(home, args.par) as ph:
        f = home / "kafka_e2e_topology.py"
        f.write_text(TOPOLOGY)
        if not rate:
            produce(ph.bootstrap, "in", records, 0)
        reader = Reader(ph.bootstrap, "out", args.fetch_wait_ms)
        run = run_local(f, [ph.bootstrap, str(args.par), str(args.fetch_wait_ms)], home=home, name="kafka_e2e",
                        keep_running=True, properties=properties)
        try:
            if rate:
                time.sleep(2.0)  # the spouts' partitions assigned and their first fetch made
            feeder = _feeder(ph.bootstrap, records, rate)
            r = reader.collect(records * WORDS, 300)
            if feeder:
                feeder.join()
        finally:
            kill_local(home, run.name)
        r.broker_cpu = ph.cpu
        return r


def run_probe(home: Path, args: argparse.Namespace, records: int, rate: float) -> Readings:
    with Phase(home, args.par) as ph:
        reader = Reader(ph.bootstrap, "out", args.fetch_wait_ms)
        feeder = _feeder(ph.bootstrap, records, rate, topic="out", bare=True)
        r = reader.collect(records, 300)
        if feeder:
            feeder.join()
        r.broker_cpu = ph.cpu
        return r


def _feeder(bootstrap: str, records: int, rate: float, topic: str = "in",
            bare: bool = False) -> threading.Thread | None:
    if not rate:
        return None
    t = threading.Thread(target=produce, args=(bootstrap, topic, records, rate, bare))
    t.start()
    return t


def peak(r: Readings, records: int) -> float:
    return records / (r.last - r.first) if r.last > r.first else float("nan")


def parts(r: Readings) -> str:
    """The table's in, engine and out cells: p50 / p99 ms each, "-" where the run has no part."""
    return " | ".join(f"{q(r.parts[k], 50):.1f} / {q(r.parts[k], 99):.1f}" if r.parts.get(k) else "-"
                      for k in ("in", "engine", "out"))


def ab(home: Path, args: argparse.Namespace) -> None:
    """``--ab KEY A B``: the topology's peak and its latency at ``--rate`` with the topology
    config property KEY set to A and to B, ``--reps`` times, which side goes first alternating."""
    key, a, b = args.ab
    n = int(args.rate * args.seconds)
    got: dict[str, list[tuple[float, Readings]]] = {"A": [], "B": []}
    print(f"A: {key}={a}, B: {key}={b}; latency at {args.rate:,.0f} records/s ({n:,} records)\n\n"
          "| rep | side | peak (records/s) | outputs | p50 (ms) | p99 (ms) | in p50/p99 | engine p50/p99 "
          "| out p50/p99 |\n"
          "|---|---|---|---|---|---|---|---|---|")
    for rep in range(args.reps):
        for side in ("AB" if rep % 2 == 0 else "BA"):
            props = {key: a if side == "A" else b}
            top_peak = peak(run_topology(home, args, args.records, 0, props), args.records)
            r = run_topology(home, args, n, args.rate, props)
            got[side].append((top_peak, r))
            print(f"| {rep + 1} | {side} | {top_peak:,.0f} | {len(r.total):,} of {n * WORDS:,} | "
                  f"{q(r.total, 50):.1f} | {q(r.total, 99):.1f} | {parts(r)} |")
    for side in "AB":
        runs = got[side]
        print(f"{side} medians: peak {statistics.median(p for p, _ in runs):,.0f}, "
              f"p50 {statistics.median(q(r.total, 50) for _, r in runs):.1f} ms, "
              f"p99 {statistics.median(q(r.total, 99) for _, r in runs):.1f} ms")


# a side of ``--rev``: run in a child under that side's interpreter, with that side's own
# bench/kafka_e2e.py first on sys.path, so the topology's processes run that side's engine
SIDE = """
import json, sys, tempfile, argparse
from pathlib import Path
sys.path.insert(0, sys.argv[1])
import kafka_e2e as k
a = argparse.Namespace(**json.loads(sys.argv[2]))
home = Path(tempfile.mkdtemp(prefix="kafka_e2e"))
top = k.peak(k.run_topology(home, a, a.records, 0), a.records)
r = k.run_topology(home, a, int(a.rate * a.seconds), a.rate)
print(json.dumps({"peak": top, "outputs": len(r.total), "p50": k.q(r.total, 50), "p99": k.q(r.total, 99),
                  "parts": k.parts(r)}))
"""


def rev_ab(args: argparse.Namespace) -> None:
    """``--rev REV``: the topology's peak and its latency at ``--rate``, A the engine at REV (a
    worktree, as bench/ab.py --rev makes it), B this tree, ``--reps`` times, alternating."""
    import json
    import subprocess

    sys.path.insert(0, str(REPO / "bench"))
    from ab import checkout  # type: ignore[import-not-found]

    py_a, tree_a = checkout(args.rev)
    tansu = Path(py_a).parent / "tansu"  # tests/kafka_broker.py finds the broker beside the interpreter
    if not tansu.exists():
        tansu.symlink_to(Path(tansu_binary() or "tansu"))
    sides = {"A": (py_a, tree_a / "bench"),
             "B": (sys.executable, REPO / "bench")}
    n = int(args.rate * args.seconds)
    conf = json.dumps({k: getattr(args, k) for k in ("records", "seconds", "par", "fetch_wait_ms", "rate", "quick")})
    got: dict[str, list[dict[str, Any]]] = {"A": [], "B": []}
    print(f"A: {args.rev}, B: this tree; latency at {args.rate:,.0f} records/s ({n:,} records)\n\n"
          "| rep | side | peak (records/s) | outputs | p50 (ms) | p99 (ms) | in p50/p99 | engine p50/p99 "
          "| out p50/p99 |\n|---|---|---|---|---|---|---|---|---|")
    for rep in range(args.reps):
        for side in ("AB" if rep % 2 == 0 else "BA"):
            py, bench = sides[side]
            p = subprocess.run([py, "-c", SIDE, str(bench), conf], capture_output=True, text=True, cwd=bench,
                               check=True)
            r = json.loads(p.stdout.strip().splitlines()[-1])
            got[side].append(r)
            print(f"| {rep + 1} | {side} | {r['peak']:,.0f} | {r['outputs']:,} of {n * WORDS:,} | {r['p50']:.1f} | "
                  f"{r['p99']:.1f} | {r['parts']} |", flush=True)
    med = {s: {k: statistics.median(r[k] for r in got[s]) for k in ("peak", "p50", "p99")} for s in "AB"}
    for s in "AB":
        print(f"{s} medians: peak {med[s]['peak']:,.0f}, p50 {med[s]['p50']:.1f} ms, p99 {med[s]['p99']:.1f} ms")
    print(f"B/A: peak {med['B']['peak'] / med['A']['peak']:.3f}, p99 {med['B']['p99'] / med['A']['p99']:.3f}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=100_000, help="input records of the peak phases")
    ap.add_argument("--seconds", type=float, default=10.0, help="length of each paced phase")
    ap.add_argument("--par", type=int, default=2)
    ap.add_argument("--fetch-wait-ms", type=int, default=10)
    ap.add_argument("--rate", type=float, default=0, help="the paced rate (records/s); 0: half the topology's peak")
    ap.add_argument("--quick", action="store_true", help="fewer records: bench/run.py --quick's smoke figures")
    ap.add_argument("--ab", nargs=3, metavar=("KEY", "A", "B"),
                    help="A/B of a topology config property at --rate (required): peak and latency per side")
    ap.add_argument("--rev", help="A/B at --rate (required): A the engine at this git revision, B this tree")
    ap.add_argument("--reps", type=int, default=2, help="--ab, --rev: runs per side")
    args = ap.parse_args()
    if args.rev:
        if not args.rate:
            ap.error("--rev needs --rate")
        rev_ab(args)
        return
    if args.ab:
        if not args.rate:
            ap.error("--ab needs --rate")
        ab(Path(tempfile.mkdtemp(prefix="kafka_e2e")), args)
        return
    if args.quick:
        args.records, args.seconds = 10_000, 3.0
    home = Path(tempfile.mkdtemp(prefix="kafka_e2e"))
    out = run_topology(home, args, args.records, 0)
    top_peak = peak(out, args.records)
    if args.quick:  # the smoke run: the topology's figures alone
        print(f"peak (records/s, first count out to last): topology {top_peak:,.0f}")
    else:
        bare_peak = peak(run_bare(home, args, args.records, 0), args.records)
        print(f"peak (records/s, first count out to last): topology {top_peak:,.0f}, bare loop {bare_peak:,.0f}, "
              f"ratio {top_peak / bare_peak:.2f}x")
    # the smoke run paces at a fixed 5,000 records/s: its short peak phase is a burst, not a
    # steady peak, and a fixed rate keeps one CI run's figure comparable with the next
    rate = args.rate or (5_000 if args.quick else round(top_peak / 2, -2))
    n = int(rate * args.seconds)
    rows = [("broker floor (produce → consume)", run_probe(home, args, n, rate))]
    if not args.quick:
        rows.append(("bare loop (consume → count → produce)", run_bare(home, args, n, rate)))
    rows.append(("heron-py topology", run_topology(home, args, n, rate)))
    print(f"\nlatency at {rate:,.0f} records/s ({n:,} records, fetch.wait.max.ms {args.fetch_wait_ms}):\n")
    print("| run | outputs | p50 (ms) | p99 (ms) | in p50/p99 | engine p50/p99 | out p50/p99 |\n"
          "|---|---|---|---|---|---|---|")
    for name, r in rows:
        if r.errors:
            print(f"{name}: the reader's client reported {len(r.errors)} errors, the first: {r.errors[0]}")
    for name, r in rows:
        expected = n if name.startswith("broker") else n * WORDS
        got = f"{len(r.total):,}" + ("" if len(r.total) == expected else f" of {expected:,}")
        print(f"| {name} | {got} | {q(r.total, 50):.1f} | {q(r.total, 99):.1f} | {parts(r)} |")
    if not args.quick:
        for name, r in rows[1:]:
            print(f"\n{name}, by arrival (the broker's CPU beside each window):\n\n| window | outputs | "
                  "p50 / p99 (ms) | in p50/p99 | engine p50/p99 | out p50/p99 | broker (cores) |\n"
                  "|---|---|---|---|---|---|---|")
            print("\n".join(windows(r, r.broker_cpu)))
    top = rows[-1][1]
    if not args.quick:
        bare_r = rows[1][1]
        print(f"\nheron-py adds over the bare loop: p50 {q(top.total, 50) - q(bare_r.total, 50):+.1f} ms, "
              f"p99 {q(top.total, 99) - q(bare_r.total, 99):+.1f} ms")


if __name__ == "__main__":
    main()
