"""A live rescale's plan switch inside a running task (heron_py/runtime/host.py
ComponentHost.set_plan, heron_py/runtime/emitter.py Emitter.set_plan): at least and at most once,
a newer plan whose packing adds or removes a consumer's tasks moves the task's routing in place.
What the emitter held goes out routed by the old plan, what is emitted after goes where a task
started on the new plan would send it (the fast emit paths bound to the user's component
included), the user's context answers for the new packing, and a task the new plan no longer
has keeps its old routing and stops emitting from its spout."""

from __future__ import annotations

import dataclasses
import logging
import random
from typing import Any

import pytest

from heron_py.api.bolt.bolt import Bolt
from heron_py.api.custom_grouping import ICustomGrouping
from heron_py.api.metrics import CountMetric
from heron_py.api.spout.spout import Spout
from heron_py.api.stream import Grouping
from heron_py.api.topology import TopologyBuilder
from heron_py.common.framing import BATCH_HEADER, BODY_OFFSET, HEADER_SIZE, MsgType, frame_type
from heron_py.common.serialization import dumps_batch, loads_batch, loads_user_object
from heron_py.planner.model import PackingPlan, PhysicalPlan, StmgrLocation, TaskPlacement, TopologyDef, TopologyState
from heron_py.planner.packing import round_robin
from heron_py.runtime.emitter import Emitter
from heron_py.runtime.host import BoltHost, ComponentHost, HostOptions, SpoutHost, make_host

AT_MOST_ONCE = "ATMOST_ONCE"
AT_LEAST_ONCE = "ATLEAST_ONCE"
BEFORE = [f"before{i}" for i in range(40)]  # emitted under the old plan, not flushed at the switch
AFTER = [f"after{i}" for i in range(300)]  # emitted under the new plan


class Words(Spout):
    """Emits the words queued on it, one a next_tuple, each with itself as message id."""

    outputs = ["word"]

    def initialize(self, config: dict[str, Any], context: Any) -> None:
        self.queue: list[str] = []
        self.calls: list[str] = []
        self.context = context

    def next_tuple(self) -> None:
        if self.queue:
            w = self.queue.pop(0)
            self.emit([w], tup_id=w)

    def activate(self) -> None:
        self.calls.append("activate")

    def deactivate(self) -> None:
        self.calls.append("deactivate")


class Split(Bolt):
    """A sentence's words, each anchored to it (the at-least-once fast path's case)."""

    outputs = ["word"]

    def initialize(self, config: dict[str, Any], context: Any) -> None:
        self.context = context
        self.seen = CountMetric()
        context.register_metric("seen", self.seen, 10)

    def process(self, tup: Any) -> None:
        for w in tup.values[0].split():
            self.emit([w], anchors=[tup])


class Count(Bolt):
    outputs: list[str] = []

    def initialize(self, config: dict[str, Any], context: Any) -> None:
        self.sources: list[tuple[str, int]] = []

    def process(self, tup: Any) -> None:
        self.sources.append((tup.component, tup.task))


def _plan(count_par: int, mode: str = AT_MOST_ONCE, split_par: int = 1, words_par: int = 1,
          state: TopologyState = TopologyState.RUNNING) -> PhysicalPlan:
    """words -> split (shuffle), words -> count (fields), split -> count (fields), on 2 containers."""
    b = TopologyBuilder("live")
    w = b.add_spout("words", Words, par=words_par)
    s = b.add_bolt("split", Split, par=split_par, inputs={w: Grouping.SHUFFLE})
    b.add_bolt("count", Count, par=count_par, inputs={w: Grouping.fields("word"), s: Grouping.fields("word")})
    b.set_config({"topology.reliability.mode": mode, "topology.message.timeout.secs": 30})
    topo = b.build()
    return PhysicalPlan(topo, round_robin(topo, 2), (StmgrLocation(0, "h", 1, 2), StmgrLocation(1, "h", 3, 4)),
                        state, 1)


def _resized(plan: PhysicalPlan, component: str, par: int, version: int,
             state: TopologyState = TopologyState.RUNNING) -> PhysicalPlan:
    """``plan`` after a live rescale of ``component`` to ``par`` tasks: kept tasks keep their ids
    and containers, the highest indexes go, new tasks get ids above every id in ``plan``."""
    topo: TopologyDef = dataclasses.replace(plan.topology, components=tuple(
        dataclasses.replace(c, par=par) if c.name == component else c for c in plan.topology.components))
    kept = [t for t in plan.packing.tasks if t.component != component or t.component_index < par]
    have = sum(1 for t in kept if t.component == component)
    next_id = max(t.task_id for t in plan.packing.tasks) + 1
    n = plan.packing.num_containers
    added = [TaskPlacement(next_id + i, component, have + i, (next_id + i) % n) for i in range(par - have)]
    return PhysicalPlan(topo, PackingPlan(n, tuple(kept + added)), plan.stmgrs, state, version)


def _task(plan: PhysicalPlan, component: str, i: int = 0) -> int:
    return plan.packing.tasks_of(component)[i]


def _host(plan: PhysicalPlan, component: str, frames: list[bytes], i: int = 0) -> ComponentHost:
    host = make_host(plan, _task(plan, component, i), frames.extend, HostOptions(rng=random.Random(7)))
    host.initialize()
    host.start()
    return host


def _sent(frames: list[bytes]) -> dict[str, set[int]]:
    """Each word's destination tasks, from TUPLE_BATCH frames."""
    out: dict[str, set[int]] = {}
    for f in frames:
        if frame_type(f) != MsgType.TUPLE_BATCH:
            continue
        dest = BATCH_HEADER.unpack_from(f, HEADER_SIZE)[0]
        for row in loads_batch(memoryview(f)[BODY_OFFSET:]):
            out.setdefault(row[1][0], set()).add(dest)
    return out


def _expected(plan: PhysicalPlan, task: int, words: list[str]) -> dict[str, set[int]]:
    """Where a task started on ``plan`` sends each word: a fresh Emitter's choice."""
    em = Emitter(plan, task, 1 << 20, lambda frames: None, custom_loader=loads_user_object,
                 prepare_custom=lambda *a: None, rng=random.Random(0))
    return {w: set(em.emit([w], "default", None, True) or ()) for w in words}


def _feed(host: ComponentHost, words: list[str], mode: str) -> None:
    """One sentence of ``words`` to a split task (tracked at least once: one root)."""
    assert isinstance(host, BoltHost)
    row: tuple[Any, ...] = ("default", [" ".join(words)])
    if mode == AT_LEAST_ONCE:
        row = (*row, ((1, 1000 + len(words), 77),))
    host.process_body(1, dumps_batch([row]))


# the closure the host binds as the user's emit, per (component, mode): the emitter's specialized ones
FAST_EMIT = {
    ("split", AT_MOST_ONCE): "Emitter.default_stream_emit",
    ("split", AT_LEAST_ONCE): "Emitter.anchored_default_emit",
    ("words", AT_MOST_ONCE): "_bind_fast_emit",
    ("words", AT_LEAST_ONCE): "Emitter.spout_tracked_emit",
}


def _bound_emit(host: ComponentHost) -> str:
    """Where the user's bound emit was made (it must be an instance attribute: a fast path)."""
    fn = vars(host.user)["emit"]
    return str(fn.__qualname__).split(".<locals>")[0]


# --- the emitter ----------------------------------------------------------------------------


def _emitter(plan: PhysicalPlan, task: int, frames: list[bytes]) -> Emitter:
    return Emitter(plan, task, 1 << 20, frames.extend, custom_loader=loads_user_object,
                   prepare_custom=lambda *a: None, rng=random.Random(3))


@pytest.mark.parametrize(("old_par", "new_par"), [(2, 3), (3, 2)])
def test_emitter_flushes_under_the_old_plan_then_routes_as_a_fresh_emitter_on_the_new(old_par: int,
                                                                                       new_par: int) -> None:
    old = _plan(old_par)
    new = _resized(old, "count", new_par, 2)
    split = _task(old, "split")
    frames: list[bytes] = []
    em = _emitter(old, split, frames)
    for w in BEFORE:
        em.emit([w], "default", None, False)
    assert frames == []
    assert em.set_plan(new) is True
    assert _sent(frames) == _expected(old, split, BEFORE)  # the pending words, routed by the old plan
    assert not em.has_pending
    frames.clear()
    for w in AFTER:
        em.emit([w], "default", None, False)
    em.flush()
    want = _expected(new, split, AFTER)
    assert _sent(frames) == want
    # the switch mattered: some words now go elsewhere, to or away from the task that came or went
    before = _expected(old, split, AFTER)
    assert want != before
    changed = set(new.packing.tasks_of("count")) ^ set(old.packing.tasks_of("count"))
    assert changed & set().union(*want.values(), *before.values())
    assert em.emitted == len(BEFORE) + len(AFTER)  # the counters carry over


def test_emitter_keeps_its_edge_ids_and_does_nothing_for_a_plan_that_routes_alike() -> None:
    old = _plan(2, AT_LEAST_ONCE)
    words = _task(old, "words")
    switched = _emitter(old, words, [])
    kept = _emitter(old, words, [])
    # a paused plan of the same packing routes alike: nothing flushed, nothing rebuilt
    frames: list[bytes] = []
    same = _emitter(old, words, frames)
    same.emit(["w"], "default", None, False)
    assert same.set_plan(dataclasses.replace(old, state=TopologyState.PAUSED, version=2)) is False
    assert frames == [] and same.has_pending
    assert switched.set_plan(_resized(old, "count", 3, 2)) is True
    # each copy draws one edge id whichever task it goes to: the switched emitter draws the ids
    # the unswitched one draws, so its sequence went on (a reseed would draw others)
    for root in range(1, 20):
        assert switched.emit_root([f"w{root}"], "default", None, False, root)[1] == \
            kept.emit_root([f"w{root}"], "default", None, False, root)[1]


# --- the host: the bound fast paths ---------------------------------------------------------


@pytest.mark.parametrize("mode", [AT_MOST_ONCE, AT_LEAST_ONCE])
@pytest.mark.parametrize(("old_par", "new_par"), [(2, 3), (3, 2)])
def test_a_bolts_bound_emit_routes_by_the_new_plan(mode: str, old_par: int, new_par: int) -> None:
    old = _plan(old_par, mode)
    frames: list[bytes] = []
    host = _host(old, "split", frames)
    assert _bound_emit(host) == FAST_EMIT[("split", mode)]
    _feed(host, BEFORE, mode)
    assert _sent(frames) == {}  # held by the emitter
    new = _resized(old, "count", new_par, 2)
    host.set_plan(new)
    assert _sent(frames) == _expected(old, host.task_id, BEFORE)
    frames.clear()
    _feed(host, AFTER, mode)
    host.flush()
    assert _bound_emit(host) == FAST_EMIT[("split", mode)]  # still the fast path, made anew
    assert _sent(frames) == _expected(new, host.task_id, AFTER)
    assert host.plan is new


@pytest.mark.parametrize("mode", [AT_MOST_ONCE, AT_LEAST_ONCE])
@pytest.mark.parametrize(("old_par", "new_par"), [(2, 3), (3, 2)])
def test_a_spouts_bound_emit_routes_by_the_new_plan_after_the_pause(mode: str, old_par: int, new_par: int) -> None:
    old = _plan(old_par, mode)
    frames: list[bytes] = []
    host = _host(old, "words", frames)
    assert isinstance(host, SpoutHost)
    assert _bound_emit(host) == FAST_EMIT[("words", mode)]
    host.user.queue.extend(BEFORE)
    assert host.next_tuples(len(BEFORE)) == len(BEFORE)
    # the rescale: a pause on the old packing, then the new packing running
    host.set_plan(dataclasses.replace(old, state=TopologyState.PAUSED, version=2))
    assert _sent(frames) == {}
    new = _resized(old, "count", new_par, 3)
    host.set_plan(new)
    assert host.user.calls == ["activate", "deactivate", "activate"]
    assert _sent(frames) == _expected(old, host.task_id, BEFORE)
    frames.clear()
    host.user.queue.extend(AFTER)
    assert host.next_tuples(len(AFTER)) == len(AFTER)
    host.flush()
    assert _bound_emit(host) == FAST_EMIT[("words", mode)]
    assert _sent(frames) == _expected(new, host.task_id, AFTER)


def test_an_older_plan_is_ignored_after_the_switch() -> None:
    old = _plan(2)
    frames: list[bytes] = []
    host = _host(old, "split", frames)
    new = _resized(old, "count", 3, 3)
    host.set_plan(new)
    host.set_plan(dataclasses.replace(old, version=2))  # late: ignored
    assert host.plan is new
    _feed(host, AFTER, AT_MOST_ONCE)
    host.flush()
    assert _sent(frames) == _expected(new, host.task_id, AFTER)
    assert host.user.context.get_component_tasks("count") == list(new.packing.tasks_of("count"))


# --- the user's context, the sources' names, custom groupings --------------------------------


def test_the_users_context_answers_for_the_new_packing_and_keeps_what_was_registered() -> None:
    old = _plan(2)
    host = _host(old, "split", [])
    context = host.user.context
    new = _resized(old, "count", 3, 2)
    host.set_plan(new)
    assert host.user.context is context is host.context
    added = max(new.packing.tasks_of("count"))
    assert context.get_component_tasks("count") == list(new.packing.tasks_of("count"))
    assert context.get_task_to_component_map()[added] == "count"
    assert "seen" in context.registered_metrics


def test_a_kept_consumer_names_the_component_of_a_source_task_the_rescale_added() -> None:
    old = _plan(2, split_par=1)
    host = _host(old, "count", [])
    assert isinstance(host, BoltHost)
    new = _resized(old, "split", 2, 2)
    host.set_plan(new)
    added = max(new.packing.tasks_of("split"))
    host.process_body(added, dumps_batch([("default", ["w"])]))
    assert host.user.sources == [("split", added)]


prepared_calls: list[tuple[str, str, list[int], list[int] | None]] = []


class ModGrouping(ICustomGrouping):
    """The n-th of the sorted targets for value n (mod their count); says each prepare."""

    def prepare(self, context: Any, component: str, stream: str, target_tasks: list[int]) -> None:
        self.targets = sorted(target_tasks)
        prepared_calls.append((component, stream, list(target_tasks), context.get_component_tasks("sink")))

    def choose_tasks(self, values: Any) -> list[int]:
        return [self.targets[values[0] % len(self.targets)]]


class Nums(Spout):
    outputs = ["n"]

    def next_tuple(self) -> None:
        pass


class Sink(Bolt):
    outputs: list[str] = []

    def process(self, tup: Any) -> None:
        pass


def test_a_custom_grouping_is_prepared_again_with_the_new_targets() -> None:
    b = TopologyBuilder("custom")
    n = b.add_spout("nums", Nums, par=1)
    b.add_bolt("sink", Sink, par=2, inputs={n: Grouping.custom(ModGrouping())})
    topo = b.build()
    old = PhysicalPlan(topo, round_robin(topo, 1), (StmgrLocation(0, "h", 1, 2),), TopologyState.RUNNING, 1)
    prepared_calls.clear()
    frames: list[bytes] = []
    host = _host(old, "nums", frames)
    new = _resized(old, "sink", 3, 2)
    host.set_plan(new)
    before, after = list(old.packing.tasks_of("sink")), list(new.packing.tasks_of("sink"))
    # prepared with the new targets, and the context it gets already answers for them
    assert prepared_calls == [("nums", "default", before, before), ("nums", "default", after, after)]
    host.user.emit([2])
    host.flush()
    assert [BATCH_HEADER.unpack_from(f, HEADER_SIZE)[0] for f in frames] == [after[2]]


# --- a task the rescale removed ------------------------------------------------------------


@pytest.mark.parametrize("mode", [AT_MOST_ONCE, AT_LEAST_ONCE])
def test_a_removed_spout_says_so_once_is_deactivated_and_keeps_its_old_plan(
        mode: str, caplog: pytest.LogCaptureFixture) -> None:
    old = _plan(2, mode, words_par=2)
    frames: list[bytes] = []
    host = _host(old, "words", frames, i=1)
    assert isinstance(host, SpoutHost)
    gone = _resized(old, "words", 1, 2)
    with caplog.at_level(logging.INFO):
        host.set_plan(gone)
        host.set_plan(dataclasses.replace(gone, version=3))  # the next plan: no second line
    lines = [r.getMessage() for r in caplog.records if "a rescale removed it" in r.getMessage()]
    assert lines == [f"task {host.task_id} (words) is not in physical plan v2: a rescale removed it; it stops "
                     f"when its container's executor stops it"]
    assert host.user.calls == ["activate", "deactivate"] and not host.active
    assert host.plan is old and host.removed
    host.set_plan(dataclasses.replace(old, version=1))  # a late copy of the plan it had: ignored
    assert host.user.calls == ["activate", "deactivate"] and host.plan is old
    # what it still emits goes by the old plan
    host.user.emit(["w"], tup_id="w")
    host.flush()
    assert _sent(frames) == _expected(old, host.task_id, ["w"])


def test_a_removed_bolt_routes_what_it_still_emits_by_the_new_plan(caplog: pytest.LogCaptureFixture) -> None:
    """The rest of its queue, processed before it exits, goes to the consumers' tasks of the new
    plan (count shrank with it here: the old plan would send words to a task that is gone)."""
    old = _plan(2, split_par=2)
    frames: list[bytes] = []
    host = _host(old, "split", frames, i=1)
    gone = _resized(_resized(old, "split", 1, 2), "count", 3, 2)
    with caplog.at_level(logging.INFO):
        host.set_plan(gone)
    assert [r.getMessage() for r in caplog.records if "a rescale removed it" in r.getMessage()] == [
        f"task {host.task_id} (split) is not in physical plan v2: a rescale removed it; it stops when its "
        f"container's executor stops it"]
    assert host.plan is old and host.removed
    _feed(host, AFTER, AT_MOST_ONCE)
    host.flush()
    kept = gone.packing.tasks_of("split")[0]
    assert _sent(frames) == _expected(gone, kept, AFTER)  # as the split task the plan kept sends them
    assert _sent(frames) != _expected(old, host.task_id, AFTER)


# --- effectively once: a rescale restarts every process --------------------------------------


def test_effectively_once_a_new_packing_switches_the_routing_in_place_too() -> None:
    """Effectively once rescales live as well: the switch is in place, and a restore of the
    newest checkpoint under the new plan follows it (heron_py/runtime/stateful.py)."""
    old = _plan(2, "EFFECTIVELY_ONCE")
    frames: list[bytes] = []
    host = make_host(old, _task(old, "split"), frames.extend, HostOptions(rng=random.Random(7)))
    host.initialize()
    new = _resized(old, "count", 3, 2)
    host.set_plan(new)
    assert host.plan is new and not host.removed
    assert host.context.get_component_tasks("count") == list(new.packing.tasks_of("count"))
    _feed(host, AFTER, AT_MOST_ONCE)
    host.flush()
    assert _sent(frames) == _expected(new, host.task_id, AFTER)


def test_busy_time_counts_the_turn_at_work_now_and_never_goes_back() -> None:
    """A report between a long turn's start and its end shows the turn so far (a slow bolt's
    backlog turn spans windows); what the turn adds at its end only completes it."""
    from heron_py.runtime.host import ExecCounters

    now = [10.0]
    c = ExecCounters(clock=lambda: now[0])
    c.busy_s = 2.0
    assert c.busy_now(0.0) == 2.0  # waiting for input: nothing at work
    c.turn_from, c.turn_blocked = 10.0, 0.5
    now[0] = 13.0
    assert c.busy_now(0.5) == 5.0
    assert c.busy_now(1.5) == 4.0  # a second blocked on a full outbound queue is not work
    seen = c.busy_now(1.5)
    c.busy_s += 13.5 - 10.0 - (1.5 - 0.5)  # the turn ends at 13.5 as the loop counts it
    c.turn_from = 0.0
    now[0] = 13.5
    assert c.busy_now(1.5) == 4.5 >= seen
