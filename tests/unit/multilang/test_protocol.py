"""The multilang codec, messages and session state machine: pure, no subprocess."""

import logging

import msgpack
import pytest
from hypothesis import given
from hypothesis import strategies as st

from heron_py.multilang import messages as m
from heron_py.multilang.codec import JsonDecoder, MsgpackDecoder, decoder, encode
from heron_py.multilang.errors import ProtocolError
from heron_py.multilang.session import Session, State
from heron_py.multilang.setup import parse_command, spec_config, working_dir
from tests.fakes import ManualClock

TO_CHILD = [
    m.Setup({"topology.name": "t", "n": 3}, "/tmp/pids", {"taskid": 3, "task->component": {"3": "split"}}),
    m.BoltTuple("17", "spout", "default", 1, [5, "the cow"]),
    m.heartbeat("18"),
    m.tick("19", 2),
    m.SpoutCommand("next"),
    m.SpoutCommand("ack", 42),
    m.SpoutCommand("fail", "x-1"),
    m.SpoutCommand("activate"),
    m.SpoutCommand("deactivate"),
    m.TaskIds([4, 5]),
    m.TaskIds([]),
]
COMMANDS = [
    m.Emit(["the", 1, 0]),
    m.Emit(["w"], stream="words", anchors=("17", "18"), need_task_ids=False),
    m.Emit(["w"], task=7),
    m.Emit([1, "s"], id=12),
    m.Ack("17"),
    m.Fail("17"),
    m.Log("hello", 3),
    m.Error("Traceback ..."),
    m.Metrics("sentences", 1),
    m.Metrics("latency", [1, 2.5]),
    m.Sync(),
]


def _decode(serializer, data):
    return decoder(serializer, 1 << 20).feed(data)


@pytest.mark.parametrize("serializer", ["json", "msgpack"])
@pytest.mark.parametrize("msg", TO_CHILD, ids=repr)
def test_messages_to_the_subprocess_round_trip(serializer, msg):
    (value,) = _decode(serializer, encode(m.to_wire(msg), serializer))
    assert m.parse_to_child(value) == msg


@pytest.mark.parametrize("serializer", ["json", "msgpack"])
@pytest.mark.parametrize("msg", COMMANDS, ids=repr)
def test_commands_from_the_subprocess_round_trip(serializer, msg):
    (value,) = _decode(serializer, encode(m.to_wire(msg), serializer))
    assert m.parse_command(value) == msg


@pytest.mark.parametrize("serializer", ["json", "msgpack"])
def test_pid_reply_round_trips(serializer):
    (value,) = _decode(serializer, encode(m.to_wire(m.PidReply(4242)), serializer))
    assert m.parse_pid(value) == m.PidReply(4242)


@given(st.lists(st.sampled_from(COMMANDS), min_size=1, max_size=8), st.lists(st.integers(1, 40), max_size=6),
       st.sampled_from(["json", "msgpack"]))
def test_any_chunking_yields_the_same_messages(msgs, cuts, serializer):
    data = b"".join(encode(m.to_wire(x), serializer) for x in msgs)
    dec = decoder(serializer, 1 << 20)
    out, pos = [], 0
    for c in cuts:
        out += dec.feed(data[pos:pos + c])
        pos += c
    out += dec.feed(data[pos:])
    dec.finish()
    assert [m.parse_command(v) for v in out] == msgs


def test_storm_wire_format_of_json():
    assert encode({"command": "sync"}, "json") == b'{"command":"sync"}\nend\n'
    # Storm's adapters write print(json) then print("end"); multi-line JSON and \r\n are read too
    assert JsonDecoder().feed(b'{"command":\r\n "sync"}\r\nend\r\n\n{"pid": 7}\nend\n') == [
        {"command": "sync"}, {"pid": 7}]


def test_storm_defaults_when_fields_are_left_out():
    assert m.parse_command({"command": "emit", "tuple": [1]}) == m.Emit([1], "default", (), None, True, None)
    assert m.parse_command({"command": "emit", "tuple": [1], "anchors": "5"}).anchors == ("5",)
    assert m.parse_command({"command": "log", "msg": "x"}) == m.Log("x", 2)
    assert m.Emit([1], task=3).wants_task_ids is False  # a direct emit is not answered
    assert m.Emit([1], need_task_ids=False).wants_task_ids is False


@pytest.mark.parametrize(("level", "python"), [(0, logging.DEBUG), (1, logging.DEBUG), (2, logging.INFO),
                                               (3, logging.WARNING), (4, logging.ERROR), (9, logging.INFO)])
def test_storm_log_levels_map_to_python_levels(level, python):
    assert m.Log("x", level).python_level == python


def test_non_json_line_is_refused_at_once():
    with pytest.raises(ProtocolError) as e:
        JsonDecoder().feed(b"this line is not JSON\n")
    assert str(e.value) == ("multilang: the subprocess wrote a line that is not JSON: 'this line is not JSON'; "
                            "expected JSON messages each followed by a line \"end\"")


def test_text_that_is_not_json_is_refused_at_its_end_line():
    with pytest.raises(ProtocolError) as e:
        JsonDecoder().feed(b'{"command": sync}\nend\n')
    assert str(e.value) == ("multilang: a message from the subprocess is not JSON (Expecting value: line 1 "
                            "column 13); expected one JSON value before the line \"end\", found '{\"command\": sync}'")


def test_over_size_message_is_refused_before_its_end():
    dec = JsonDecoder(max_bytes=100)
    dec.feed(b'{"command": "log", "msg": "' + b"x" * 50)
    with pytest.raises(ProtocolError) as e:
        dec.feed(b"x" * 60)  # no newline yet: refused all the same
    assert str(e.value) == ("multilang: a message from the subprocess is over the size limit: 137 bytes read "
                            "without its end, limit 100 bytes (heron_py.shell.max.message.bytes)")


def test_over_size_msgpack_message_is_refused():
    data = msgpack.packb({"command": "log", "msg": "x" * 500})
    dec = MsgpackDecoder(max_bytes=100)
    with pytest.raises(ProtocolError) as e:
        dec.feed(data[:300])  # fed in slices of at most the limit: refused after the second
    assert str(e.value) == ("multilang: a message from the subprocess is over the size limit: 200 bytes read "
                            "without its end, limit 100 bytes (heron_py.shell.max.message.bytes)")


def test_unknown_command_is_refused():
    with pytest.raises(ProtocolError) as e:
        m.parse_command({"command": "launch", "id": 1})
    assert str(e.value) == ("multilang: unknown command 'launch' from the subprocess; expected one of ack, emit, "
                            "error, fail, log, metrics, sync")


def test_missing_end_is_reported_when_the_output_ends():
    dec = JsonDecoder()
    assert dec.feed(b'{"command": "sync"}\n') == []
    with pytest.raises(ProtocolError) as e:
        dec.finish()
    assert str(e.value) == ("multilang: the subprocess's output ended inside a message: '{\"command\": \"sync\"}' "
                            "has no line \"end\" after it")


def test_truncated_msgpack_is_reported_when_the_output_ends():
    dec = MsgpackDecoder()
    dec.feed(msgpack.packb({"command": "sync"})[:-2])
    with pytest.raises(ProtocolError) as e:
        dec.finish()
    assert str(e.value) == ("multilang: the subprocess's output ended inside a message: 12 bytes of an "
                            "incomplete msgpack value")


def test_malformed_fields_say_what_was_expected():
    with pytest.raises(ProtocolError) as e:
        m.parse_command({"command": "emit", "tuple": "word"})
    assert str(e.value) == "multilang: 'emit' command field 'tuple' must be list; found 'word'"
    with pytest.raises(ProtocolError) as e:
        m.parse_command({"command": "ack"})
    assert str(e.value) == "multilang: 'ack' command has no 'id' field; found {'command': 'ack'}"
    with pytest.raises(ProtocolError) as e:
        m.parse_pid({"pid": "12"})
    assert str(e.value) == "multilang: the handshake reply field 'pid' must be int; found '12'"
    with pytest.raises(ProtocolError) as e:
        m.parse_command([1, 2])
    assert str(e.value) == ("multilang: a message from the subprocess must be a map with a 'command'; "
                            "found [1, 2]")


def test_values_json_cannot_carry_are_refused_with_a_clear_error():
    with pytest.raises(TypeError, match="tuple values for a shell component must be JSON values"):
        encode({"tuple": [object()]}, "json")




def test_bolt_session_tracks_inputs_heartbeats_and_timeout():
    clock = ManualClock(100.0)
    s = Session(timeout_s=5.0, clock=clock, heartbeat_s=1.0)
    assert s.state is State.STARTING
    with pytest.raises(ProtocolError, match="sending a tuple in state starting; expected state ready"):
        s.input_sent("t0")
    s.started(77)
    a, b = s.input_sent("ta"), s.input_sent("tb")
    assert s.anchor(a) == "ta" and s.take_input(b, "ack") == "tb"
    with pytest.raises(ProtocolError) as e:
        s.take_input(b, "fail")
    assert str(e.value) == ("multilang: 'fail' of tuple id '2', which is unknown or already acked/failed; "
                            "expected the id of a tuple sent and not yet acked or failed")
    assert s.heartbeat_due() is None
    clock.t += 1.0
    assert s.heartbeat_due() is not None and not s.settled
    s.synced()
    assert s.settled
    clock.t += 5.5
    assert s.timed_out()
    s.heard()
    assert not s.timed_out()


def test_forced_heartbeat_is_sent_once_per_new_input():
    s = Session(timeout_s=5.0, clock=ManualClock(100.0))
    s.started(1)
    s.input_sent("x")
    assert s.heartbeat_due(force=True) is not None
    assert s.heartbeat_due(force=True) is None  # one is on its way already
    s.synced()
    assert s.settled


def test_spout_session_waits_for_sync():
    s = Session(timeout_s=5.0, clock=ManualClock(100.0))
    s.started(1)
    s.command_sent("next")
    assert s.state is State.WAITING and s.waiting_for == "next"
    with pytest.raises(ProtocolError, match="sending 'ack' in state waiting; expected state ready"):
        s.command_sent("ack")
    s.synced()
    assert s.state is State.READY


def test_commands_and_specs(tmp_path):
    assert parse_command("python3 split.py --x 'a b'", "w") == ["python3", "split.py", "--x", "a b"]
    with pytest.raises(ValueError, match="command is empty"):
        parse_command([], "w")
    conf = spec_config(["node", "s.js"], "msgpack", {"a": 1}, "w")
    assert conf == {"a": 1, "heron_py.shell.command": ["node", "s.js"], "heron_py.shell.serializer": "msgpack"}
    with pytest.raises(ValueError) as e:
        spec_config(["x"], "xml", None, "ShellBolt.spec()")
    assert str(e.value) == "ShellBolt.spec(): serializer must be one of json, msgpack; found 'xml'"
    # Storm's rule: the package's resources/ folder, else the package folder
    assert working_dir(package=tmp_path) == tmp_path
    (tmp_path / "resources").mkdir()
    assert working_dir(package=tmp_path) == tmp_path / "resources"
    assert working_dir("/elsewhere", package=tmp_path).as_posix() == "/elsewhere"


def test_a_heartbeat_does_not_cover_tuples_still_queued_for_the_writer():
    # heartbeats jump ahead of queued tuples: its sync says nothing of those (the in-process
    # runner once finished with tuples still unread by the subprocess)
    clock = ManualClock(100.0)
    s = Session(timeout_s=5.0, clock=clock, heartbeat_s=1.0)
    s.started(77)
    for i in range(5):
        s.input_sent(f"t{i}")
    clock.t += 1.0
    assert s.heartbeat_due(unwritten=2) is not None
    s.synced()
    assert not s.settled  # 3 of 5 were in the pipe before it
    assert s.heartbeat_due(force=True) is not None
    s.synced()
    assert s.settled
