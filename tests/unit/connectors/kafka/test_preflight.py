"""The dry-run warning for unreachable Kafka brokers, on real sockets."""

import socket

from heron_py.api.bolt.bolt import Bolt
from heron_py.api.stream import Grouping
from heron_py.api.topology import TopologyBuilder
from heron_py.connectors.kafka import KafkaBolt, KafkaSpout
from heron_py.connectors.kafka.preflight import broker_warnings


def _closed_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed when the block ends: nothing listens there


class Pass(Bolt):
    outputs = ["key", "message"]


def _topology(spout_servers, bolt_servers):
    b = TopologyBuilder("t")
    spout = KafkaSpout.spec(name="in", config={"kafka.bootstrap.servers": spout_servers, "kafka.topics": ["a"]})
    b.add_spec(spout)
    p = b.add_bolt("pass", Pass, par=1, inputs={spout: Grouping.SHUFFLE})
    b.add_bolt("out", KafkaBolt, par=1, inputs={p: Grouping.SHUFFLE},
               config={"kafka.bootstrap.servers": bolt_servers, "kafka.topic": "b"})
    return b.build()


def test_unreachable_broker_warns_once_per_component_and_a_listening_one_does_not():
    closed = _closed_port()
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        open_port = listener.getsockname()[1]
        # the spout has one dead and one live address: reachable; the bolt only the dead one
        lines = broker_warnings(_topology(f"127.0.0.1:{closed},127.0.0.1:{open_port}", f"127.0.0.1:{closed}"))
    assert len(lines) == 1
    assert lines[0].startswith(f"component 'out': kafka.bootstrap.servers: no broker reachable: 127.0.0.1:{closed} (")
    assert lines[0].endswith("); the task will retry with backoff once running")


def test_bad_address_is_a_warning_not_a_crash():
    lines = broker_warnings(_topology("nohostport", "127.0.0.1:notaport"), timeout_s=0.2)
    assert len(lines) == 2 and all("no broker reachable" in line for line in lines)
