"""The bridge from the store to prometheus-client: a collector read at every scrape."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry

from metrics_manager.store import MetricsStore


class StoreCollector(Collector):
    def __init__(self, store: Callable[[], MetricsStore]) -> None:
        self._store = store

    def collect(self) -> Iterator[Metric]:
        for name, (counter, labels, rows) in sorted(self._store().families().items()):
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
