"""topology.serializer.classname (heronpy's PythonSerializer / IHeronSerializer, our safe
MsgpackSerializer), heronpy's global_metrics and context.get_metrics_collector()."""

from __future__ import annotations

import json

import pytest

from heron_py.api import global_metrics
from heron_py.api.bolt.bolt import Bolt
from heron_py.api.serializer import IHeronSerializer, MsgpackSerializer, PythonSerializer, load_serializer
from heron_py.api.spout.spout import Spout
from heron_py.api.stream import Grouping
from heron_py.api.topology import TopologyBuilder
from heron_py.planner.errors import TopologyError
from heron_py.planner.logical import validate
from heron_py.testing import run_in_process

WIRE: list[bytes] = []  # what JsonSerializer produced: proof that values crossed as its bytes


class JsonSerializer(IHeronSerializer):
    def initialize(self, config=None):
        pass

    def serialize(self, obj):
        data = json.dumps(obj).encode()
        WIRE.append(data)
        return data

    def deserialize(self, input_str):
        return json.loads(input_str)


class ValuesSpout(Spout):
    outputs = ["a", "b"]
    ROWS: list = [("x", 1), ("y", (2, 3)), ("z", {"k": [1.5, None]})]

    def initialize(self, config, context):
        self.rows = list(self.ROWS)

    def next_tuple(self):
        if self.rows:
            self.emit(list(self.rows.pop(0)))


class SetSpout(ValuesSpout):
    ROWS = [("x", {1, 2})]


class CountingBolt(Bolt):
    outputs = ["a"]

    def initialize(self, config, context):
        self.seen = []
        self.collector = context.get_metrics_collector()

    def process(self, tup):
        global_metrics.safe_incr("processed")
        self.seen.append(list(tup.values))


def _topology(serializer: str | None, spout: type = ValuesSpout) -> TopologyBuilder:
    b = TopologyBuilder("ser")
    s = b.add_spout("s", spout, par=1)
    b.add_bolt("b", CountingBolt, par=1, inputs={s: Grouping.SHUFFLE})
    if serializer is not None:
        b.set_config({"topology.serializer.classname": serializer})
    return b


def _seen(result) -> list:
    return next(c for c in result.components.values() if isinstance(c, CountingBolt)).seen


def test_default_serializer_keeps_values_as_emitted() -> None:
    assert _seen(run_in_process(_topology(None))) == [["x", 1], ["y", (2, 3)], ["z", {"k": [1.5, None]}]]
    assert _seen(run_in_process(_topology("heronpy.api.serializer.PythonSerializer")))[1] == ["y", (2, 3)]


def test_a_user_serializer_carries_every_value() -> None:
    WIRE.clear()
    seen = _seen(run_in_process(_topology(f"{__name__}.JsonSerializer")))
    assert seen == [["x", 1], ["y", [2, 3]], ["z", {"k": [1.5, None]}]]  # JSON has no tuples
    assert WIRE == [b'"x"', b"1", b'"y"', b"[2, 3]", b'"z"', b'{"k": [1.5, null]}']


def test_msgpack_serializer_round_trips_plain_values_and_refuses_others() -> None:
    seen = _seen(run_in_process(_topology("heron_py.api.serializer.MsgpackSerializer")))
    assert seen == [["x", 1], ["y", [2, 3]], ["z", {"k": [1.5, None]}]]
    with pytest.raises(TypeError) as e:
        run_in_process(_topology("heron_py.api.serializer.MsgpackSerializer", SetSpout))
    assert str(e.value) == ("MsgpackSerializer: cannot serialize a value of type set (can not serialize 'set' "
                            "object); expected None, bool, int, float, str, bytes, list or dict")


def test_python_serializer_is_heronpys() -> None:
    ser = PythonSerializer()
    ser.initialize(None)
    assert ser.deserialize(ser.serialize(lambda x: x + 1))(1) == 2  # cloudpickle: functions travel
    assert MsgpackSerializer().deserialize(MsgpackSerializer().serialize({"a": b"\x00"})) == {"a": b"\x00"}
    assert load_serializer("") is None and load_serializer("heronpy.api.serializer.PythonSerializer") is None


@pytest.mark.parametrize(("name", "message"), [
    ("NoModule", "config topology.serializer.classname: 'NoModule' is not a class path; expected 'module.Class'"),
    ("nosuch_mod.Ser", "config topology.serializer.classname: 'nosuch_mod.Ser' cannot be imported "
                       "(No module named 'nosuch_mod'); expected 'module.Class' of an IHeronSerializer"),
    ("json.JSONDecoder", "config topology.serializer.classname: 'json.JSONDecoder' has no serialize/deserialize "
                         "methods; expected an IHeronSerializer"),
])
def test_a_bad_serializer_is_refused_at_submit(name: str, message: str) -> None:
    with pytest.raises(TopologyError) as e:
        validate(_topology(name).build())  # what submit runs
    assert str(e.value) == f"topology 'ser': {message}"


def test_global_metrics_are_a_user_metric_of_the_task() -> None:
    from heron_py.api.metrics import MultiCountMetric
    from heronpy.api import global_metrics as alias

    assert alias is global_metrics  # one counter, whichever name the user imports
    global_metrics.metricsContainer.get_value_and_reset()
    result = run_in_process(_topology(None))
    bolt = next(c for c in result.components.values() if isinstance(c, CountingBolt))
    # registered once per process (one task per process in a topology): here, by the first task
    assert global_metrics.registered
    assert global_metrics.metricsContainer.get_value_and_reset() == {"processed": 3}
    m = MultiCountMetric()
    bolt.collector.register_metric("mine", m, 5)
    assert bolt.collector._context.registered_metrics["mine"] == (m, 5)
