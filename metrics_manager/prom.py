"""The bridge from the store to prometheus-client: a collector read at every scrape."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry

from metrics_manager.store import MetricsStore

Families = dict[str, tuple[bool, list[str], list[tuple[list[str], float]]]]

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


class StoreCollector(Collector):
    def __init__(self, store: Callable[[], MetricsStore]) -> None:
        self._store = store

    def collect(self) -> Iterator[Metric]:
        for name, (counter, labels, rows) in sorted(kafka_partition_families(self._store().families()).items()):
            fam: CounterMetricFamily | GaugeMetricFamily
            if counter:
                fam = CounterMetricFamily(name, f"heron-py {name}", labels=labels)
            else:
                fam = GaugeMetricFamily(name, f"heron-py {name}", labels=labels)
            for values, v in rows:
                fam.add_metric(values, v)
            yield fam


def registry_for(store: Callable[[], MetricsStore]) -> CollectorRegistry:
    reg = CollectorRegistry(auto_describe=False)
    reg.register(StoreCollector(store))
    return reg
