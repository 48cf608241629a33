"""heron-py's Python multilang adapter (heron_py/multilang/adapters/storm.py) speaking the
protocol: scripts written against Storm's storm.py API, with no storm.py of their own, run as
subprocesses that import ours through the PYTHONPATH heron-py gives them, and are driven over
their pipes with heron-py's codec and messages."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from heron_py.multilang import messages as m
from heron_py.multilang.adapters import PYTHON_ADAPTER
from tests.unit.multilang.adapter_child import Child

BOLTS = '''
import sys
import storm


class Split(storm.BasicBolt):
    def initialize(self, conf, context):
        storm.logInfo("adapter " + storm.__file__)
        storm.logInfo("conf %s task %s" % (conf["test.key"], context["taskid"]))

    def process(self, tup):
        if tup.values[0] == "boom":
            raise ValueError("cannot split boom")
        for word in tup.values[0].split(" "):
            ids = storm.emit([word])
            storm.logDebug("ids %r" % (ids,))
        print("printed while processing")


class Manual(storm.Bolt):
    def process(self, tup):
        kind = tup.values[0]
        if kind == "direct":
            storm.emitDirect(4, ["d"], stream="s")
            storm.logInfo("direct returned")
        elif kind == "no-ids":
            storm.logInfo("returned %r" % (storm.emit(["n"], need_task_ids=False),))
        elif kind == "anchored":
            storm.emit(["a"], "words", [tup, "other-id"])
        elif kind == "levels":
            storm.logTrace("t"); storm.logDebug("d"); storm.logInfo("i"); storm.logWarn("w"); storm.logError("e")
            storm.log("default")
            storm.rpcMetrics("latency", [1, 2.5])
            storm.reportError("reported")
        if tup.stream == "__tick":
            storm.logInfo("tick %r" % (tup.is_tick_tuple(),))
        if kind == "fail":
            storm.fail(tup)
        else:
            storm.ack(tup)


class BadInit(storm.BasicBolt):
    def initialize(self, conf, context):
        raise RuntimeError("no database")


{"split": Split, "manual": Manual, "badinit": BadInit}[sys.argv[1]]().run()
'''

SPOUT = '''
import storm


class Numbers(storm.Spout):
    def initialize(self, conf, context):
        self.n = 0

    def nextTuple(self):
        self.n += 1
        ids = storm.emit([self.n, "é☃"], id="m%d" % self.n)
        storm.logInfo("ids %r" % (ids,))

    def ack(self, id):
        storm.logInfo("acked " + id)

    def fail(self, id):
        storm.logInfo("failed " + id)

    def activate(self):
        storm.logInfo("activated")

    def deactivate(self):
        storm.logInfo("deactivated")


Numbers().run()
'''


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A script folder without a storm.py: ``import storm`` can only find heron-py's."""
    (tmp_path / "bolts.py").write_text(BOLTS)
    (tmp_path / "spout.py").write_text(SPOUT)
    (tmp_path / "pids").mkdir()
    return tmp_path


def start(project: Path, *args: str) -> Child:
    child = Child([sys.executable, *args], project)
    child.handshake(project / "pids", conf={"test.key": "v", "topology.name": "t"})
    return child


def test_handshake_writes_the_pid_file_and_hands_conf_and_context_to_initialize(project):
    child = start(project, "bolts.py", "split")
    try:
        assert (project / "pids" / str(child.proc.pid)).is_file()
        assert child.command() == m.Log(f"adapter {PYTHON_ADAPTER}", 2)  # ours, from the PYTHONPATH
        assert child.command() == m.Log("conf v task 7", 2)
    finally:
        child.kill()


def test_basic_bolt_anchors_waits_for_task_ids_and_acks(project):
    child = start(project, "bolts.py", "split")
    try:
        child.command(), child.command()
        child.send(m.BoltTuple("1", "spout", "default", 3, ["the cow"]))
        assert child.command() == m.Emit(["the"], anchors=("1",))
        # a tuple (and a heartbeat) sent while the bolt waits for the task ids is kept for later
        child.send(m.BoltTuple("2", "spout", "default", 3, ["moon"]))
        child.send(m.heartbeat("3"))
        assert child.quiet()  # nothing until the task ids come
        child.send(m.TaskIds([5, 6]))
        assert child.command() == m.Log("ids [5, 6]", 1)
        assert child.command() == m.Emit(["cow"], anchors=("1",))
        child.send(m.TaskIds([]))
        assert child.command() == m.Log("ids []", 1)
        assert child.command() == m.Ack("1")
        assert child.command() == m.Emit(["moon"], anchors=("2",))
        child.send(m.TaskIds([9]))
        assert child.command() == m.Log("ids [9]", 1)
        assert child.command() == m.Ack("2")
        assert child.command() == m.Sync()  # the heartbeat's answer
        assert child.close() == 0  # the end of stdin ends it quietly:
        assert child.ended()  # no error reported for it
        # print() went to stderr, which the engine logs, not into the protocol
        assert child.stderr.decode().count("printed while processing") == 2
    finally:
        child.kill()


def test_basic_bolt_fails_a_tuple_whose_process_raises_and_goes_on(project):
    child = start(project, "bolts.py", "split")
    try:
        child.command(), child.command()
        child.send(m.BoltTuple("1", "spout", "default", 3, ["boom"]))
        error = child.command()
        assert isinstance(error, m.Error)
        assert "ValueError: cannot split boom" in error.msg and error.msg.startswith("Traceback")
        assert child.command() == m.Fail("1")
        child.send(m.heartbeat("2"))
        assert child.command() == m.Sync()
    finally:
        child.kill()


def test_bolt_acks_itself_emits_direct_without_ids_and_every_log_level(project):
    child = start(project, "bolts.py", "manual")
    try:
        child.send(m.BoltTuple("1", "spout", "default", 3, ["direct"]))
        assert child.command() == m.Emit(["d"], stream="s", task=4)
        assert child.command() == m.Log("direct returned", 2)  # no wait for task ids
        assert child.command() == m.Ack("1")
        child.send(m.BoltTuple("2", "spout", "default", 3, ["no-ids"]))
        assert child.command() == m.Emit(["n"], need_task_ids=False)
        assert child.command() == m.Log("returned None", 2)
        assert child.command() == m.Ack("2")
        child.send(m.BoltTuple("3", "spout", "default", 3, ["anchored"]))
        assert child.command() == m.Emit(["a"], stream="words", anchors=("3", "other-id"))
        child.send(m.TaskIds([1]))
        assert child.command() == m.Ack("3")
        child.send(m.BoltTuple("4", "spout", "default", 3, ["levels"]))
        assert [child.command() for _ in range(9)] == [
            m.Log("t", 0), m.Log("d", 1), m.Log("i", 2), m.Log("w", 3), m.Log("e", 4), m.Log("default", 2),
            m.Metrics("latency", [1, 2.5]), m.Error("reported"), m.Ack("4")]
        child.send(m.BoltTuple("5", "spout", "default", 3, ["fail"]))
        assert child.command() == m.Fail("5")
        child.send(m.tick("6", 2))
        assert child.command() == m.Log("tick True", 2)
        assert child.command() == m.Ack("6")
    finally:
        child.kill()


def test_an_error_in_initialize_is_reported_and_ends_the_process_with_code_1(project):
    child = start(project, "bolts.py", "badinit")
    try:
        error = child.command()
        assert isinstance(error, m.Error) and "RuntimeError: no database" in error.msg
        assert child.proc.wait(timeout=10) == 1
        assert "RuntimeError: no database" in child.stderr.decode()  # the engine shows stderr's tail
    finally:
        child.kill()


def test_spout_answers_every_command_with_sync_after_its_emits(project):
    child = start(project, "spout.py")
    try:
        child.send(m.SpoutCommand("next"))
        assert child.command() == m.Emit([1, "é☃"], id="m1")  # UTF-8 both ways, whatever the locale
        assert child.quiet()
        child.send(m.TaskIds([3]))
        assert child.command() == m.Log("ids [3]", 2)
        assert child.command() == m.Sync()
        for command, logged in (("ack", "acked m1"), ("fail", "failed m1")):
            child.send(m.SpoutCommand(command, "m1"))
            assert child.command() == m.Log(logged, 2)
            assert child.command() == m.Sync()
        for command in ("deactivate", "activate"):
            child.send(m.SpoutCommand(command))
            assert child.command() == m.Log(f"{command}d", 2)
            assert child.command() == m.Sync()
        assert child.close() == 0
    finally:
        child.kill()


def test_messages_written_in_pieces_and_over_several_lines_are_read_whole(project):
    child = Child([sys.executable, "spout.py"], project, chunk=3)
    try:
        child.handshake(project / "pids")
        assert child.proc.stdin is not None
        child.proc.stdin.write(b'{"command":\n "next",\r\n "id": ""}\r\nend\r\n')  # Storm's framing allows both
        assert child.command() == m.Emit([1, "é☃"], id="m1")
        child.send(m.TaskIds([3]))
        assert child.command() == m.Log("ids [3]", 2)
        assert child.command() == m.Sync()
    finally:
        child.kill()


def test_a_storm_py_beside_the_script_wins_over_heron_pys(tmp_path):
    (tmp_path / "pids").mkdir()
    (tmp_path / "storm.py").write_text(textwrap.dedent('''
        import json, os, sys

        def run():
            setup = sys.stdin.readline(); sys.stdin.readline()
            pid_dir = json.loads(setup)["pidDir"]
            print(json.dumps({"pid": os.getpid()})); print("end")
            print(json.dumps({"command": "log", "msg": "own adapter " + __file__})); print("end")
            sys.stdout.flush()
    '''))
    (tmp_path / "bolt.py").write_text("import storm\nstorm.run()\n")
    child = Child([sys.executable, "bolt.py"], tmp_path)
    try:
        child.handshake(tmp_path / "pids")
        assert child.command() == m.Log(f"own adapter {tmp_path / 'storm.py'}", 2)
    finally:
        child.kill()
