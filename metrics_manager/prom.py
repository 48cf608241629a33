"""The bridge from the store to prometheus-client: collectors read at every scrape, one for the
container's reports (``StoreCollector``) and, in container 0, one for the health manager's steps
(``AutoscaleCollector``).

The health manager's steps are read from its record (``logs/autoscale.jsonl``, which ``heron-py
autoscale`` appends to) rather than sent as a report: it runs outside the containers, wherever
the CLI runs, while a metrics manager takes reports from its own container's processes only, on
loopback, under roles the connection admits; and a report kept as the latest would export a
stopped health manager's last values as if it ran. The record is what the web page and ``heron-py
status`` show too, so the three agree. Container 0's metrics manager, on the host of the master,
exports it once per topology; the record is there when ``heron-py autoscale`` runs with the heron
home of that host (the local scheduler, or a home shared by the hosts).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry

from heron_py.common.autoscale_record import LOG_FILE, StepFollower, last_steps
from metrics_manager.store import AutoscaleTally, Families, MetricsStore

# the container whose metrics manager exports the health manager's steps: the master's
AUTOSCALE_CONTAINER = 0
# how far back, at its start, it looks for the gauges' last values (the parallelism last asked
# for, the last step's time): a restart of every container follows each update it asks for
SEED_STEPS = 500

# the KafkaSpout's metric "kafka" (heron_py/connectors/kafka/spout.py) holds per-partition
# values under keys "TOPIC-P/STAT"; Kafka topic names are [a-zA-Z0-9._-], so the partition is
# the digits after the last "-"
KAFKA_FAMILY = "heron_user_kafka"
_KAFKA_PARTITION_KEY = re.compile(r"(?P<topic>[A-Za-z0-9._-]+)-(?P<partition>[0-9]+)/(?P<stat>lag|committed|fetched)")


def kafka_partition_families(families: Families) -> Families:
    """The spout's per-partition values as families of their own, with the topic and the
    partition as labels (``heron_kafka_partition_lag{topic="in",partition="0",task=...}``),
    so a query sums or graphs lag by partition without parsing a key; the spout's other
    values (records, acked, ...) stay in ``heron_user_kafka`` by key."""
    fam = families.get(KAFKA_FAMILY)
    if fam is None or "key" not in fam[1]:
        return families
    counter, labels, rows = fam
    at = labels.index("key")
    kept: list[tuple[list[str], float]] = []
    split: dict[str, list[tuple[list[str], float]]] = {}
    rest = [n for n in labels if n != "key"]
    for values, v in rows:
        m = _KAFKA_PARTITION_KEY.fullmatch(values[at])
        if m is None:
            kept.append((values, v))
            continue
        others = [x for i, x in enumerate(values) if i != at]
        split.setdefault(m["stat"], []).append(([*others, m["topic"], m["partition"]], v))
    out = {k: v for k, v in families.items() if k != KAFKA_FAMILY}
    if kept:
        out[KAFKA_FAMILY] = (counter, labels, kept)
    for stat, srows in split.items():
        out[f"heron_kafka_partition_{stat}"] = (False, [*rest, "topic", "partition"], srows)
    return out


# what a scrape's HELP line says of the health manager's families (the others: their name)
AUTOSCALE_HELP = {
    "heron_autoscale_actions": "steps of the health manager (heron-py autoscale) since this metrics manager started, "
                               "by action (update, restart, none) and outcome (done, failed, dry_run, none, "
                               "no_observation)",
    "heron_autoscale_diagnoses": "the health manager's diagnoses since this metrics manager started, by kind and "
                                 "component",
    "heron_autoscale_asked_parallelism": "the parallelism the health manager last asked heron-py update for, per "
                                         "component",
    "heron_autoscale_last_step_timestamp_seconds": "when the health manager recorded its last step (Unix time)",
    "heron_autoscale_unreadable_lines": "lines of the health manager's record (logs/autoscale.jsonl) that were not "
                                        "a step",
}


def metric_families(families: Families) -> Iterator[Metric]:
    for name, (counter, labels, rows) in sorted(families.items()):
        doc = AUTOSCALE_HELP.get(name, f"heron-py {name}")
        kind = CounterMetricFamily if counter else GaugeMetricFamily
        fam = kind(name, doc, labels=labels)
        for values, v in rows:
            fam.add_metric(values, v)
        yield fam


class StoreCollector(Collector):
    def __init__(self, store: Callable[[], MetricsStore]) -> None:
        self._store = store

    def collect(self) -> Iterator[Metric]:
        yield from metric_families(kafka_partition_families(self._store().families()))


class AutoscaleCollector(Collector):
    """The health manager's steps as series: at each scrape, the steps appended to its record
    since the last one are counted (``AutoscaleTally``); the counters count from this
    collector's making, the gauges start from the record's last ``SEED_STEPS`` steps."""

    def __init__(self, topology: str, record: Path) -> None:
        self._topology = topology
        self._follower = StepFollower(record)  # first: a step recorded meanwhile is seeded and counted
        self._tally = AutoscaleTally()
        try:
            self._tally.seed(last_steps(record, SEED_STEPS))
        except OSError:
            pass  # unreadable now: the gauges start empty, the counters as ever

    def collect(self) -> Iterator[Metric]:
        try:
            steps = self._follower.new_steps()
        except OSError:
            steps = []  # the record unreadable (a permission changed): counted from the next scrape that reads it
        for step in steps:
            self._tally.add(step)
        yield from metric_families(self._tally.families(self._topology, self._follower.unreadable))


def autoscale_collector(topology: str, container: int, logs: Path) -> AutoscaleCollector | None:
    """The collector of the health manager's steps, for the metrics manager of container 0 (one
    per topology); ``logs``: the topology's logs folder, where the record is."""
    return AutoscaleCollector(topology, logs / LOG_FILE) if container == AUTOSCALE_CONTAINER else None


def registry_for(store: Callable[[], MetricsStore], autoscale: Collector | None = None) -> CollectorRegistry:
    reg = CollectorRegistry(auto_describe=False)
    reg.register(StoreCollector(store))
    if autoscale is not None:
        reg.register(autoscale)
    return reg
