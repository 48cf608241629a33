"""heron-py's Node.js multilang adapter (heron_py/multilang/adapters/storm.js) speaking the
protocol: scripts written against Storm's storm.js API, in a folder with no storm.js of its
own, get ours written beside them by heron-py (as a shell component's launch does) and are
driven over their pipes with heron-py's codec and messages."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import pytest

from heron_py.multilang import messages as m
from heron_py.multilang.adapters import NODE_ADAPTER
from heron_py.multilang.scripts import provide_node_adapter
from tests.unit.multilang.adapter_child import Child

pytestmark = pytest.mark.skipif(shutil.which("node") is None,
                                reason="Node.js is not installed (`node` not on PATH; Debian's nodejs)")

BOLTS = r'''
var storm = require('./storm');

function Split() { storm.BasicBolt.call(this); }
Split.prototype = Object.create(storm.BasicBolt.prototype);
Split.prototype.constructor = Split;
Split.prototype.initialize = function(conf, context, done) {
    var self = this;
    setTimeout(function() {  // an initialize that takes its time: the pid waits for done()
        self.log('conf', conf['test.key'], 'task', context.taskid, {nested: [1]});
        done();
    }, 50);
};
Split.prototype.process = function(tup, done) {
    var self = this;
    if (tup.values[0] === 'boom') {
        throw new Error('cannot split boom');
    }
    if (tup.values[0] === 'later') {
        setTimeout(function() { done(new Error('gave up')); }, 20);
        return;
    }
    var words = tup.values[0].split(' ');
    words.forEach(function(word, i) {
        self.emit({tuple: [word], anchorTupleId: tup.id}, function(taskIds) {
            self.logDebug('ids of ' + word, taskIds);
            if (i === words.length - 1) {
                done();
            }
        });
    });
    console.log('logged while processing');
};

function Manual() { storm.Bolt.call(this); }
Manual.prototype = Object.create(storm.Bolt.prototype);
Manual.prototype.constructor = Manual;
Manual.prototype.process = function(tup) {
    var kind = tup.values[0];
    if (kind === 'direct') {
        this.emitDirect({tuple: ['d'], task: 4, stream: 's', anchorTupleId: [tup.id, 'x']});
    } else if (kind === 'no-callback') {
        this.emit({tuple: ['n']});
    } else if (kind === 'task-in-emit') {
        try { this.emit({tuple: ['t'], task: 0}, function() {}); } catch (e) { this.logWarn(e.message); }
    } else if (kind === 'levels') {
        this.logTrace('t'); this.logDebug('d'); this.logInfo('i'); this.logWarn('w'); this.logError('e');
        this.rpcMetrics('latency', [1, 2.5]);
        this.reportError('reported');
    }
    if (tup.isTickTuple()) {
        this.log('tick');
    }
    if (kind === 'fail') { this.fail(tup); } else { this.ack(tup); }
};

var which = process.argv[2];
(which === 'split' ? new Split() : new Manual()).run();
'''

SPOUT = r'''
var storm = require('./storm');

function Numbers() { storm.Spout.call(this); this.n = 0; }
Numbers.prototype = Object.create(storm.Spout.prototype);
Numbers.prototype.constructor = Numbers;
Numbers.prototype.nextTuple = function(done) {
    var self = this;
    this.n += 1;
    var n = this.n;
    setTimeout(function() {
        self.emit({tuple: [n, 'é☃'], id: 'm' + n}, function(taskIds) { self.log('ids', taskIds); done(); });
    }, 10);
};
Numbers.prototype.ack = function(id, done) { this.log('acked ' + id); done(); };
Numbers.prototype.fail = function(id, done) { this.log('failed ' + id); done(); };
// activate and deactivate: the adapter's defaults

new Numbers().run();
'''


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A script folder without storm.js, given heron-py's as a shell component's launch does."""
    (tmp_path / "bolts.js").write_text(BOLTS)
    (tmp_path / "spout.js").write_text(SPOUT)
    (tmp_path / "pids").mkdir()
    log = logging.getLogger("test")
    for script in ("bolts.js", "spout.js"):
        provide_node_adapter(["node", script], tmp_path, log, "test")
    assert (tmp_path / "storm.js").read_bytes() == NODE_ADAPTER.read_bytes()
    return tmp_path


def start(project: Path, *args: str, chunk: int | None = None) -> Child:
    child = Child(["node", *args], project, chunk=chunk)
    child.handshake(project / "pids", conf={"test.key": "v", "topology.name": "t"})
    assert (project / "pids" / str(child.proc.pid)).is_file()
    return child


def test_basic_bolt_initializes_then_emits_with_task_id_callbacks_and_acks_on_done(project):
    child = start(project, "bolts.js", "split")
    try:
        assert child.command() == m.Log('conf v task 7 {"nested":[1]}', 2)  # from initialize
        child.send(m.BoltTuple("1", "spout", "default", 3, ["the cow"]))
        assert child.command() == m.Emit(["the"], anchors=("1",))
        assert child.command() == m.Emit(["cow"], anchors=("1",))
        child.send(m.heartbeat("2"))
        assert child.command() == m.Sync()  # answered at once, emits still unanswered
        child.send(m.TaskIds([5]))
        assert child.command() == m.Log("ids of the [5]", 1)
        assert child.quiet()  # done() only after the last word's ids
        child.send(m.TaskIds([6, 7]))
        assert child.command() == m.Log("ids of cow [6,7]", 1)
        assert child.command() == m.Ack("1")
        child.send(m.BoltTuple("3", "spout", "default", 3, ["later"]))
        assert child.command() == m.Fail("3")  # done(err)
        assert child.close() == 0
        assert child.ended()
        assert "logged while processing" in child.stderr.decode()  # console.log kept off the protocol
    finally:
        child.kill()


def test_initialize_gets_conf_and_context_and_what_it_logs_follows_the_pid(project):
    child = Child(["node", "bolts.js", "split"], project)
    try:
        child.send(m.Setup({"test.key": "v"}, str(project / "pids"), {"taskid": 7}))
        assert m.parse_pid(child.recv()).pid == child.proc.pid  # the engine reads the pid first
        assert child.command() == m.Log('conf v task 7 {"nested":[1]}', 2)
    finally:
        child.kill()


def test_basic_bolt_whose_process_throws_reports_and_fails_the_tuple(project):
    child = start(project, "bolts.js", "split")
    try:
        child.command()  # initialize's log
        child.send(m.BoltTuple("1", "spout", "default", 3, ["boom"]))
        error = child.command()
        assert isinstance(error, m.Error) and error.msg.startswith("Error: cannot split boom")
        assert child.command() == m.Fail("1")
        child.send(m.heartbeat("2"))
        assert child.command() == m.Sync()
    finally:
        child.kill()


def test_bolt_acks_itself_direct_and_callback_less_emits_ask_no_task_ids(project):
    child = start(project, "bolts.js", "manual")
    try:
        child.send(m.BoltTuple("1", "spout", "default", 3, ["direct"]))
        assert child.command() == m.Emit(["d"], stream="s", anchors=("1", "x"), task=4)
        assert child.command() == m.Ack("1")
        child.send(m.BoltTuple("2", "spout", "default", 3, ["no-callback"]))
        assert child.command() == m.Emit(["n"], need_task_ids=False)
        assert child.command() == m.Ack("2")
        child.send(m.BoltTuple("3", "spout", "default", 3, ["task-in-emit"]))
        assert child.command() == m.Log("storm.js: emit() got a task (0); emit to one task with emitDirect()", 3)
        assert child.command() == m.Ack("3")
        child.send(m.BoltTuple("4", "spout", "default", 3, ["levels"]))
        assert [child.command() for _ in range(8)] == [
            m.Log("t", 0), m.Log("d", 1), m.Log("i", 2), m.Log("w", 3), m.Log("e", 4),
            m.Metrics("latency", [1, 2.5]), m.Error("reported"), m.Ack("4")]
        child.send(m.BoltTuple("5", "spout", "default", 3, ["fail"]))
        assert child.command() == m.Fail("5")
        child.send(m.tick("6", 2))
        assert child.command() == m.Log("tick", 2)
        assert child.command() == m.Ack("6")
    finally:
        child.kill()


@pytest.mark.parametrize("chunk", [None, 1, 7])
def test_spout_syncs_when_done_and_reads_messages_in_any_pieces(project, chunk):
    child = start(project, "spout.js", chunk=chunk)  # 1: multi-byte UTF-8 split across reads
    try:
        for n in (1, 2):
            child.send(m.SpoutCommand("next"))
            assert child.command() == m.Emit([n, "é☃"], id=f"m{n}")
            assert child.quiet(0.1)  # done() waits for the task ids
            child.send(m.TaskIds([3, n]))
            assert child.command() == m.Log(f"ids [3,{n}]", 2)
            assert child.command() == m.Sync()
        for command, logged in (("ack", "acked m1"), ("fail", "failed m2")):
            child.send(m.SpoutCommand(command, logged[-2:]))
            assert child.command() == m.Log(logged, 2)
            assert child.command() == m.Sync()
        for command in ("deactivate", "activate"):  # the defaults call done() themselves
            child.send(m.SpoutCommand(command))
            assert child.command() == m.Sync()
        assert child.close() == 0
    finally:
        child.kill()


def test_messages_over_several_lines_and_with_crlf_are_read_whole(project):
    child = start(project, "spout.js")
    try:
        assert child.proc.stdin is not None
        child.proc.stdin.write(b'\n{"command":\r\n "next",\n "id": ""}\r\nend\r\n')
        assert child.command() == m.Emit([1, "é☃"], id="m1")
    finally:
        child.kill()
