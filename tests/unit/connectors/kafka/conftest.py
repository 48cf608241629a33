"""The Kafka connector's unit tests: the stand-in client (stand_in.py) as a fixture."""

from __future__ import annotations

import sys
import types
from typing import Any

import pytest

from tests.unit.connectors.kafka.stand_in import Broker, Consumer, TopicPartition


@pytest.fixture
def broker(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> Broker:
    b = Broker()
    fake = types.ModuleType("confluent_kafka")
    fake.Consumer = type("Consumer", (Consumer,), {"broker": b})  # type: ignore[attr-defined]
    fake.TopicPartition = TopicPartition  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "confluent_kafka", fake)
    # no heron home and no checkpoint root: the spout needs neither (it reads no checkpoint)
    monkeypatch.delenv("HERON_PY_HOME", raising=False)
    monkeypatch.chdir(tmp_path)

    def no_storage(*_a: Any, **_kw: Any) -> Any:
        raise AssertionError("the Kafka spout opened the checkpoint storage")

    import heron_py.checkpoint.select as select

    monkeypatch.setattr(select, "open_checkpoint_storage", no_storage)
    return b
