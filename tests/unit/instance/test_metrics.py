"""An instance's metrics reports (instance/metrics.py): a user metric JSON cannot carry is
reported once and left out, the rest kept."""

import json
import logging
import queue
from types import SimpleNamespace

from instance.metrics import TaskReports
from instance.queues import QueueBytes


class _Outbox:
    bytes = QueueBytes(1)
    time_blocked_s = 0.0
    dropped_tuples = 0  # what a stop could not send (instance/queues.py Outbox)

    def qsize(self):
        return 0


def _host(user):
    metrics = SimpleNamespace(acked=0, failed=0, timed_out=0, percentile=lambda q: None)
    emitter = SimpleNamespace(emitted_by_stream={}, emitted=0, storm_arity=None)
    return SimpleNamespace(emitter=emitter, metrics=metrics, user_metrics=user)


def test_a_user_metric_json_cannot_carry_is_reported_once_and_left_out_the_rest_kept(caplog):
    reports = TaskReports(3, "count", queue.Queue(), QueueBytes(1), _Outbox())
    reports.host = _host({"good": 5, "by_key": {"a": 1}, "tuple_keys": {(1, 2): 3}, "obj": object()})
    with caplog.at_level(logging.WARNING):
        for _ in range(3):
            doc = reports.report()
            json.dumps(doc)  # what the gateway sends: before, a tuple key made this raise every time
    assert doc["user"] == {"good": 5, "by_key": {"a": 1}}
    assert doc["gauges"]["__user-metrics-skipped"] == 2
    warned = [r.getMessage() for r in caplog.records]
    assert len(warned) == 2 and all("is left out of reports" in w for w in warned)
    assert warned[0].startswith("user metric 'tuple_keys' of task 3: expected a number, or a dict of numbers "
                                "with string keys (JSON), found dict (keys must be str")
