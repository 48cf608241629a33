"""The KafkaSpout's own cost per processing guarantee, in one process against Tansu: a bare
confluent-kafka loop (consume, decode the value) and the spout's ``next_tuple`` loop for
NO_GUARANTEE, AT_MOST_ONCE and AT_LEAST_ONCE (every emit acked at once, as a fast topology
would), with the emit bound to a counter the way the instance binds its fast emit. No topology
and no stream manager, so the figures isolate the spout (issue 35, acceptance 7: >= 0.8x of the
bare loop; bench/kafka_bench.py measures the whole topology). The lead runs it:

    .venv/bin/python bench/kafka_modes.py [--records 200000] [--modes bare,NO_GUARANTEE,...]
    .venv/bin/python bench/kafka_modes.py --records 30000 --profile AT_LEAST_ONCE   (cProfile's top 25)
"""

from __future__ import annotations

import sys
from pathlib import Path

# bench/ is first on the path when this file runs, and bench/profile.py would shadow the
# standard library's profile module that cProfile imports
HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]
sys.path.insert(0, str(HERE.parent))

import argparse  # noqa: E402
import cProfile  # noqa: E402
import logging  # noqa: E402
import pstats  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from typing import Any  # noqa: E402

from tests.kafka_broker import TansuBroker  # noqa: E402

TOPIC = "modes"
MODES = ("bare", "NO_GUARANTEE", "AT_MOST_ONCE", "AT_LEAST_ONCE")


class _Context:
    """What the spout reads of a TopologyContext: one task of one component."""

    def __init__(self, task: int = 1) -> None:
        self.task = task

    def get_component_id(self) -> str:
        return "kafka"

    def get_topology_name(self) -> str:
        return "modes"

    def get_task_id(self) -> int:
        return self.task

    def get_component_tasks(self, _comp: str) -> list[int]:
        return [self.task]

    def register_metric(self, *_args: Any) -> None:
        """Metrics are not collected here."""


class _Delegate:
    logger = logging.getLogger("kafka_modes")

    def log(self, message: str, level: Any = None) -> None:
        self.logger.info(message)


def bare(bootstrap: str, n: int, group: str = "bare") -> tuple[float, float]:
    """The same client work as the spout, without the spout: its consumer settings (built by
    the spout's own ``spout_config``), its start (metadata, the group's commits, then assign),
    ``consume(max.poll.records, poll timeout)`` batches, and both key and value decoded into a
    list per record. Timed from before the metadata request, as ``spout_rate`` is timed from
    before the first ``next_tuple`` (which makes the same requests).

    The earlier loop assigned with no metadata yet: librdkafka then learned the partition's
    leader on its own timer and the first record came ~0.55 s later, which at 200k records
    was most of the loop's time (55k records/s against the spout's 316k)."""
    from confluent_kafka import Consumer, TopicPartition

    from heron_py.connectors.kafka.config import spout_config
    cfg = spout_config({"kafka.bootstrap.servers": bootstrap, "kafka.topics": [TOPIC], "kafka.group.id": group},
                       "bare loop", "bare")
    c = Consumer(cfg.client_config())
    got, t0, c0 = 0, time.perf_counter(), time.thread_time()
    c.list_topics(timeout=5)
    c.committed([TopicPartition(TOPIC, 0)], timeout=10)
    c.assign([TopicPartition(TOPIC, 0, -2)])
    batch, timeout = cfg.max_poll_records, cfg.poll_timeout_s
    out: list[Any] = []
    while got < n:
        for m in c.consume(batch, timeout):
            if m.error() is None:
                k, v = m.key(), m.value()
                out.append([m.topic(), m.partition(), m.offset(), None if k is None else k.decode("utf-8", "replace"),
                            None if v is None else v.decode("utf-8", "replace")])
                got += 1
        out.clear()
    dt, cpu = time.perf_counter() - t0, time.thread_time() - c0
    c.close()
    return n / dt, cpu / n * 1e6


def spout_rate(bootstrap: str, n: int, mode: str) -> tuple[float, float]:
    """Records per second (wall) and the loop thread's CPU microseconds per record: the
    broker's fetch rate bounds the first at large counts (both loops then wait in consume),
    the second is the spout's own cost."""
    from heron_py.connectors.kafka import KafkaSpout

    spout = KafkaSpout(_Delegate())  # type: ignore[arg-type]
    config = {"kafka.bootstrap.servers": bootstrap, "kafka.topics": [TOPIC], "kafka.group.id": f"modes-{mode}",
              "kafka.processing.guarantee": mode, "kafka.first.poll.offset.strategy": "EARLIEST",
              "topology.reliability.mode": "ATLEAST_ONCE" if mode == "AT_LEAST_ONCE" else "ATMOST_ONCE",
              "kafka.offset.commit.period.ms": 1000}
    spout.initialize(config, _Context())
    count = [0]
    ids: list[Any] = []
    tracked = mode == "AT_LEAST_ONCE"

    def emit(tup: Any, tup_id: Any = None, stream: str = "default", direct_task: Any = None,
             need_task_ids: bool = False) -> None:
        count[0] += 1
        if tracked:
            ids.append(tup_id)

    spout.emit = emit  # type: ignore[method-assign]
    t0, c0 = time.perf_counter(), time.thread_time()
    while count[0] < n:
        spout.next_tuple()
        for i in ids:  # the acks a fast topology sends back
            spout.ack(i)
        ids.clear()
    dt, cpu = time.perf_counter() - t0, time.thread_time() - c0
    spout.close()
    return n / dt, cpu / n * 1e6


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--profile", choices=MODES[1:], help="profile this mode's loop instead of timing them all")
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
    with tempfile.TemporaryDirectory() as tmp:
        broker = TansuBroker(Path(tmp))
        try:
            broker.create_topic(TOPIC, 1)
            broker.produce(TOPIC, [(None, f"record {i} of the modes bench".encode()) for i in range(args.records)],
                           partition=0)
            if args.profile:
                prof = cProfile.Profile()
                prof.enable()
                rate, _ = spout_rate(broker.bootstrap, args.records, args.profile)
                prof.disable()
                print(f"{args.profile}: {rate:,.0f} records/s under cProfile ({1e6 / rate:.2f} us/record)")
                pstats.Stats(prof).sort_stats("tottime").print_stats(25)
                return
            # warm-up: the broker's first read of the log is slower; it also warms the group's
            # coordinator lookup every later loop makes (each with a group of its own)
            bare(broker.bootstrap, args.records, "warm-up")
            rates = {}
            for mode in args.modes.split(","):
                rates[mode] = bare(broker.bootstrap, args.records) if mode == "bare" else \
                    spout_rate(broker.bootstrap, args.records, mode)
            base = rates.get("bare")
            for mode, (r, cpu) in rates.items():
                ratio = f"  {r / base[0]:.2f}x of bare ({base[1] / cpu:.2f}x in CPU)" if base else ""
                print(f"{mode:>14}: {r:>12,.0f} records/s  {cpu:6.2f} us CPU/record{ratio}")
        finally:
            broker.stop()


if __name__ == "__main__":
    main()
