"""Task hooks (heron_py/runtime/hooks.py) through the component host: a hook that counts
every event sees exactly what the task's own counters count."""

from __future__ import annotations

import collections
import random

import pytest

from heron_py.api.bolt.bolt import Bolt
from heron_py.api.spout.spout import Spout
from heron_py.api.stream import Grouping
from heron_py.api.task_hook import ITaskHook
from heron_py.api.topology import TopologyBuilder
from heron_py.common.framing import (
    ACK_RECORD,
    BODY_OFFSET,
    RESULT_ACKED,
    RESULT_FAILED,
    RESULT_RECORD,
    MsgType,
    encode_batch_frame,
    frame_type,
)
from heron_py.common.serialization import dumps_batch
from heron_py.planner.model import PhysicalPlan, StmgrLocation, TopologyState
from heron_py.planner.packing import round_robin
from heron_py.runtime.hooks import HookError
from heron_py.runtime.host import HostOptions, make_host

SEEN: list = []  # hooks made from topology.auto.task.hooks, for the test to find


class CountingHook(ITaskHook):
    def __init__(self):
        self.counts = collections.Counter()
        self.infos = []
        SEEN.append(self)

    def prepare(self, conf, context):
        self.counts["prepare"] += 1

    def clean_up(self):
        self.counts["clean_up"] += 1

    def emit(self, info):
        self.counts["emit"] += 1
        self.infos.append(info)

    def spout_ack(self, info):
        self.counts["spout_ack"] += 1

    def spout_fail(self, info):
        self.counts["spout_fail"] += 1

    def bolt_execute(self, info):
        self.counts["bolt_execute"] += 1

    def bolt_ack(self, info):
        self.counts["bolt_ack"] += 1

    def bolt_fail(self, info):
        self.counts["bolt_fail"] += 1


class Numbers(Spout):
    outputs = ["n"]

    def initialize(self, config, context):
        self.n = 0
        if config.get("hooked"):
            context.add_task_hook(CountingHook())

    def next_tuple(self):
        self.n += 1
        self.emit([self.n], tup_id=self.n)


class Halver(Bolt):
    outputs = ["n"]

    def initialize(self, config, context):
        if config.get("hooked"):
            context.add_task_hook(CountingHook())

    def process(self, tup):
        if tup.values[0] % 2:
            self.fail(tup)
            return
        self.emit([tup.values[0] // 2], anchors=[tup])
        self.ack(tup)


class Sink(Bolt):
    outputs = []

    def process(self, tup):
        pass


def _plan(config):
    b = TopologyBuilder("hooks")
    s = b.add_spout("numbers", Numbers, par=1)
    h = b.add_bolt("halver", Halver, par=1, inputs={s: Grouping.SHUFFLE})
    b.add_bolt("sink", Sink, par=2, inputs={h: Grouping.SHUFFLE})
    b.set_config(config)
    topo = b.build()
    return PhysicalPlan(topo, round_robin(topo, 1), (StmgrLocation(0, "h", 1, 2),), TopologyState.RUNNING, 1)


def _hook(host):
    return host.context.task_hooks[0] if host.context.task_hooks else SEEN[-1]


def test_a_counting_hook_sees_what_the_bolt_counts():
    plan = _plan({"hooked": True, "topology.reliability.mode": "ATLEAST_ONCE"})
    frames = []
    host = make_host(plan, plan.packing.tasks_of("halver")[0], frames.extend, HostOptions(rng=random.Random(3)))
    host.initialize()
    hook = _hook(host)
    assert hook.counts["prepare"] == 1
    assert "emit" not in vars(host.user)  # hooks see emits: no bound fast path
    src = plan.packing.tasks_of("numbers")[0]
    rows = [("default", [v], ((src, 100 + v, 7),)) for v in range(1, 11)]
    host.process_body(src, dumps_batch(rows))
    host.close()
    assert hook.counts["bolt_execute"] == host.counters.processed == 10
    assert hook.counts["emit"] == host.emitter.emitted == 5
    assert hook.counts["bolt_ack"] == 5 and hook.counts["bolt_fail"] == 5
    assert host.metrics.acked == 5 and host.metrics.failed == 5
    assert hook.counts["clean_up"] == 1
    sinks = set(plan.packing.tasks_of("sink"))
    assert all(info.stream_id == "default" and info.task_id == host.task_id and set(info.out_tasks) <= sinks
               and len(info.out_tasks) == 1 for info in hook.infos)


def test_a_counting_hook_sees_what_the_spout_counts():
    plan = _plan({"hooked": True, "topology.reliability.mode": "ATLEAST_ONCE"})
    frames = []
    host = make_host(plan, plan.packing.tasks_of("numbers")[0], frames.extend, HostOptions(rng=random.Random(3)))
    host.initialize()
    host.start()
    hook = _hook(host)
    host.next_tuples(4)
    host.flush()
    roots = [r[1] for f in frames if frame_type(f) == MsgType.ACK_BATCH
             for r in ACK_RECORD.iter_unpack(memoryview(f)[BODY_OFFSET:])]
    body = b"".join([RESULT_RECORD.pack(RESULT_ACKED, roots[0]), RESULT_RECORD.pack(RESULT_ACKED, roots[1]),
                     RESULT_RECORD.pack(RESULT_FAILED, roots[2])])
    host.on_results(encode_batch_frame(host.task_id, 0, body, MsgType.ACK_RESULT, 3))
    assert hook.counts["emit"] == host.emitter.emitted == 4
    assert hook.counts["spout_ack"] == host.metrics.acked == 2
    assert hook.counts["spout_fail"] == host.metrics.failed == 1


def test_no_hooks_keeps_the_fast_emit():
    plan = _plan({})
    host = make_host(plan, plan.packing.tasks_of("halver")[0], [].extend)
    host.initialize()
    assert host.hooks is None and "emit" in vars(host.user)


def test_auto_task_hooks_from_config():
    plan = _plan({"topology.auto.task.hooks": f"{__name__}.CountingHook"})
    host = make_host(plan, plan.packing.tasks_of("sink")[0], [].extend)
    before = len(SEEN)
    host.initialize()
    assert len(SEEN) == before + 1 and SEEN[-1].counts["prepare"] == 1
    host.process_body(plan.packing.tasks_of("halver")[0], dumps_batch([("default", [1]), ("default", [2])]))
    assert SEEN[-1].counts["bolt_execute"] == 2


def test_a_bad_auto_task_hook_is_one_clear_error():
    plan = _plan({"topology.auto.task.hooks": "no.such.Hook"})
    host = make_host(plan, plan.packing.tasks_of("sink")[0], [].extend)
    with pytest.raises(HookError) as e:
        host.initialize()
    assert str(e.value) == ("config topology.auto.task.hooks: expected importable ITaskHook classes (module.Class), "
                            "found 'no.such.Hook' (No module named 'no')")
