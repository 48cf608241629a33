"""heron_py.testing.Harness: each fault and time control on a real topology definition (word
count, a tick bolt, a window bolt, a stateful counter), run by the engine's own component hosts."""

from __future__ import annotations

import importlib
import logging
import re
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from heron_py.api.bolt.bolt import Bolt
from heron_py.api.bolt.window_bolt import TumblingWindowBolt
from heron_py.api.state.stateful_component import StatefulComponent
from heron_py.api.stream import Grouping
from heron_py.api.topology import TopologyBuilder
from heron_py.testing import ABORT, EOF, PAUSE, Harness, Outcome, TestSource, run_in_process

TIMEOUT = 30.0


class Sentences(TestSource):
    outputs = ["sentence"]


class Split(Bolt):
    outputs = ["word"]

    def process(self, tup: Any) -> None:
        for w in tup.values[0].split():
            self.emit([w], anchors=[tup])
        self.ack(tup)


class Count(Bolt):
    outputs = ["word", "count"]

    def initialize(self, config: Any, context: Any) -> None:
        self.counts: Counter[str] = Counter()

    def process(self, tup: Any) -> None:
        self.counts[tup.values[0]] += 1
        self.ack(tup)


class SlowOnce(Bolt):
    """Leaves the first tuple of the word "slow" unacked (a lost ack): its tree times out."""

    outputs = []
    seen = False

    def initialize(self, config: Any, context: Any) -> None:
        self.held: list[Any] = []

    def process(self, tup: Any) -> None:
        if tup.values[0] == "slow" and not getattr(type(self), "seen", False):
            type(self).seen = True  # once per process, across restarts: a flaky dependency
            self.held.append(tup)
            return
        self.ack(tup)


def word_count(items: list[Any], *, mode: str = "ATLEAST_ONCE", replay: bool = True,
               counter: type = Count, count_par: int = 2) -> TopologyBuilder:
    b = TopologyBuilder("wc")
    s = b.add_spout("sentences", Sentences, par=1, config=TestSource.config(items, replay=replay))
    sp = b.add_bolt("split", Split, par=2, inputs={s: Grouping.SHUFFLE})
    b.add_bolt("count", counter, par=count_par, inputs={sp: Grouping.fields("word")})
    b.set_config({"topology.reliability.mode": mode, "topology.message.timeout.secs": str(int(TIMEOUT))})
    return b


def words(text: str) -> Counter[str]:
    return Counter(text.split())


def counts(h: Harness, component: str = "count") -> Counter[str]:
    total: Counter[str] = Counter()
    for i in range(h.parallelism(component)):
        total.update(h.component(component, i).counts)
    return total


SENTENCES = ["the cat", "the dog", "a cat and a dog", "the end"]
EXACT = words("the cat the dog a cat and a dog the end")


def test_word_count_to_eof_acks_every_message_id_once() -> None:
    h = Harness(word_count([*SENTENCES, EOF, "never emitted"]), capture=["count"])
    r = h.run()
    assert counts(h) == EXACT
    assert r.acked == Counter({0: 1, 1: 1, 2: 1, 3: 1}) and r.failed == Counter() and r.pending == []
    assert Counter(v[0] for v in r.values("count")) == EXACT
    assert r.outcomes[0] == Outcome("sentences", h._plan.packing.tasks_of("sentences")[0], 0, "ack")
    assert h.now == 1_000_000.0  # no time passed
    assert h.complete() is r and r.kills == []


def test_fail_at_nth_fails_that_tuple_and_the_source_replays_it() -> None:
    h = Harness(word_count(SENTENCES)).fail_at("split", nth=2)
    r = h.run()
    # split's second tuple (sentence 1) was failed before processing, then replayed once
    assert r.failed == Counter({1: 1}) and r.acked == Counter({0: 1, 1: 1, 2: 1, 3: 1})
    assert [o.kind for o in r.outcomes if o.msg_id == 1] == ["fail", "ack"]
    assert counts(h) == EXACT  # failed before any emit: nothing counted twice


def test_fail_at_predicate_without_replay_drops_the_tuples() -> None:
    h = Harness(word_count(SENTENCES, replay=False)).fail_at("count", when=lambda t: t.values[0] == "the", times=2)
    r = h.run()
    # sentences 0 and 1 lose a word each; their trees fail; the source does not replay
    assert r.failed == Counter({0: 1, 1: 1}) and r.acked == Counter({2: 1, 3: 1})
    assert counts(h) == EXACT - Counter({"the": 2})
    assert r.pending == []


def test_message_timeout_fires_from_the_clock_and_the_tuple_is_replayed() -> None:
    SlowOnce.seen = False
    h = Harness(word_count(["fast", "slow", "fast again"], counter=SlowOnce, count_par=1))
    r = h.run()
    assert r.acked == Counter({0: 1, 2: 1}) and r.pending == [1]
    h.advance(TIMEOUT - 0.001)
    assert r.failed == Counter() and r.pending == [1]  # not a moment early
    h.advance(0.001)  # at T: timed out, failed, replayed, acked
    assert r.failed == Counter({1: 1}) and r.acked == Counter({0: 1, 1: 1, 2: 1}) and r.pending == []
    assert h.now == 1_000_000.0 + TIMEOUT
    assert len(h.component("count").held) == 1  # the first copy was never acked


def test_kill_at_restarts_the_bolt_and_its_lost_tuples_time_out_and_replay() -> None:
    h = Harness(word_count(SENTENCES, count_par=1)).kill_at("count", 0, 3)
    r = h.run()
    assert r.kills == ["task 4 of 'count' killed: kill_at its tuple 3"]
    # the task died at its third word ("the" of sentence 1) with the rest of that batch ("dog");
    # the restarted task is a new component: the two words it had counted are gone with it
    assert counts(h) == words("a cat and a dog the end")
    # sentence 0's tree completed before the crash (its acks were sent): acked, its counts lost
    # all the same, as with Heron (a bolt's fields are not state); sentence 1's tree was cut
    assert r.pending == [1] and r.failed == Counter() and r.acked == Counter({0: 1, 2: 1, 3: 1})
    r = h.complete()  # the cut tree times out at T and the source replays it
    assert r.failed == Counter({1: 1}) and r.acked == Counter({0: 1, 1: 1, 2: 1, 3: 1}) and r.pending == []
    assert counts(h) == EXACT - Counter(["the", "cat"])
    assert h.now == 1_000_000.0 + TIMEOUT


def test_abort_crashes_the_spout_and_the_restarted_task_replays_what_was_in_flight() -> None:
    h = Harness(word_count(["a b", "c", ABORT, "d", EOF]), capture=["count"])
    r = h.run()
    assert r.kills == ["task 1 of 'sentences' killed: ABORT at item 2"]
    assert r.acked == Counter({0: 1, 1: 1, 3: 1}) and r.failed == Counter() and r.pending == []
    assert counts(h) == words("a b c d")


def test_abort_with_a_tuple_in_flight_emits_it_again_at_the_restart() -> None:
    # "slow" is held unacked when the spout dies: the restarted source (as a Kafka spout from
    # its committed offset) emits it again at once; the first copy's root times out unseen
    SlowOnce.seen = False
    h = Harness(word_count(["slow", ABORT, "z", EOF], counter=SlowOnce, count_par=1))
    r = h.run()
    assert r.kills == ["task 1 of 'sentences' killed: ABORT at item 1"]
    assert r.acked == Counter({0: 1, 2: 1}) and r.failed == Counter() and r.pending == []
    r = h.complete()  # the old root times out at T; the new task does not know it: no call
    assert r.acked == Counter({0: 1, 2: 1}) and r.failed == Counter() and h.now == 1_000_000.0 + TIMEOUT


class Ticker(Bolt):
    outputs = []

    def initialize(self, config: Any, context: Any) -> None:
        self.ticks: list[float] = []

    def process(self, tup: Any) -> None:
        self.ack(tup)

    def process_tick(self, tup: Any) -> None:
        self.ticks.append(len(self.ticks) + 1)


def test_ticks_fire_from_the_harness_clock_only() -> None:
    b = TopologyBuilder("ticks")
    s = b.add_spout("sentences", Sentences, par=1, config=TestSource.config([EOF]))
    b.add_bolt("tick", Ticker, par=1, inputs={s: Grouping.SHUFFLE}, config={"topology.tick.tuple.freq.secs": 10})
    h = Harness(b)
    h.run()
    assert h.component("tick").ticks == []
    h.advance(9.5)
    assert h.component("tick").ticks == []
    h.advance(25)  # t = 34.5: ticks at 10, 20, 30
    assert h.component("tick").ticks == [1, 2, 3]


class WindowSum(TumblingWindowBolt):
    outputs = ["start", "end", "words"]
    windows: list[tuple[int, int, list[str]]] = []

    def processWindow(self, window_info: Any, tuples: list[Any]) -> None:
        type(self).windows.append((window_info.start, window_info.end, [t.values[0] for t in tuples]))


def test_window_bolt_fires_on_advance_with_harness_time_and_acks_its_tuples() -> None:
    WindowSum.windows = []
    b = TopologyBuilder("win")
    s = b.add_spout("sentences", Sentences, par=1, config=TestSource.config(["a", "b", PAUSE, "c"]))
    b.add_bolt("window", WindowSum, par=1, inputs={s: Grouping.SHUFFLE},
               config={TumblingWindowBolt.WINDOW_DURATION_SECS: 10})
    b.set_config({"topology.reliability.mode": "ATLEAST_ONCE", "topology.message.timeout.secs": "60"})
    h = Harness(b)
    r = h.run()
    assert WindowSum.windows == [] and sorted(r.pending) == [0, 1]  # acked when their window closes
    r = h.advance(10)
    assert WindowSum.windows == [(1_000_000, 1_000_010, ["a", "b"])]  # bounds from the harness clock
    # "c" (message id 3: its index in the list, markers counted) came after the PAUSE, in the next window
    assert r.acked == Counter({0: 1, 1: 1}) and r.pending == [3]
    h.advance(10)
    assert WindowSum.windows[-1] == (1_000_010, 1_000_020, ["c"])
    assert r.acked == Counter({0: 1, 1: 1, 3: 1}) and r.pending == []


class StatefulCount(Bolt, StatefulComponent):
    outputs = []

    def init_state(self, stateful_state: Any) -> None:
        self.state = stateful_state

    def pre_save(self, checkpoint_id: str) -> None:
        pass  # the counts live in the state itself

    def process(self, tup: Any) -> None:
        w = tup.values[0]
        self.state.put(w, (self.state.get(w) or 0) + 1)


def stateful_count(items: list[Any], counter: type = StatefulCount) -> TopologyBuilder:
    b = TopologyBuilder("swc")
    s = b.add_spout("sentences", Sentences, par=1, config=TestSource.config(items))
    sp = b.add_bolt("split", Split, par=2, inputs={s: Grouping.SHUFFLE})
    b.add_bolt("count", counter, par=2, inputs={sp: Grouping.fields("word")})
    b.set_config({"topology.reliability.mode": "EFFECTIVELY_ONCE",
                  "topology.stateful.checkpoint.interval.secs": "1000"})
    return b


def state_counts(h: Harness) -> Counter[str]:
    total: Counter[str] = Counter()
    for i in range(2):
        total.update(dict(h.component("count", i).state.enumerate()))
    return total


def test_stateful_abort_rolls_back_to_the_checkpoint_and_counts_exactly_once() -> None:
    h = Harness(stateful_count(["a b", "b c", PAUSE, "c d", "d e", ABORT, "e f", EOF]))
    h.run()
    assert state_counts(h) == words("a b b c")
    cid = h.checkpoint()
    r = h.advance(1)  # past the PAUSE: two sentences, then the ABORT rolls every task back
    assert r.kills == ["task 1 of 'sentences' killed: ABORT at item 5"] and r.restores == [cid]
    assert state_counts(h) == words("a b b c")  # the checkpoint's counts, exactly
    h.advance(1)  # the restored source waits at the PAUSE again, then emits the rest once
    assert state_counts(h) == words("a b b c c d d e e f")
    assert r.checkpoints == [cid] and r.acked == Counter()  # effectively once: no acking


def test_stateful_kill_at_with_interval_checkpoints_from_the_clock() -> None:
    b = stateful_count(["a", "b", PAUSE, "c", "d", PAUSE, "e"])
    b.set_config({"topology.reliability.mode": "EFFECTIVELY_ONCE",
                  "topology.stateful.checkpoint.interval.secs": "5"})
    h = Harness(b).kill_at("count", 1, 3)  # task 5 gets a, b then dies at c, after checkpoint 1
    h.run()
    r = h.advance(5)  # checkpoint 1 at t+5 (a, b); then c: the kill; every task rolls back to 1
    assert r.checkpoints == [1] and r.kills == ["task 5 of 'count' killed: kill_at its tuple 3"]
    assert r.restores == [1] and state_counts(h) == words("a b")
    h.advance(5)  # checkpoint 2; the restored source waited at the PAUSE: c, d now
    assert r.checkpoints == [1, 2] and state_counts(h) == words("a b c d")
    h.advance(5)
    assert r.checkpoints == [1, 2, 3] and r.restores == [1] and state_counts(h) == words("a b c d e")


class SaveFailsOnce(StatefulCount):
    """Its first save fails (a full disk): the master aborts that checkpoint, not the next."""

    failed = False

    def pre_save(self, checkpoint_id: str) -> None:
        if not type(self).failed:
            type(self).failed = True
            raise OSError("no space left on device")


def test_a_failed_save_aborts_that_checkpoint_and_the_next_one_is_the_rollback_target() -> None:
    SaveFailsOnce.failed = False
    h = Harness(stateful_count(["a b", PAUSE, "c", ABORT, EOF], counter=SaveFailsOnce))
    h.run()
    with pytest.raises(AssertionError, match=r"checkpoint 1: expected every task to save it, found only tasks"):
        h.checkpoint()
    assert h.checkpoint() == 2  # the master is idle again at once: the failed one was aborted, not left open
    r = h.advance(1)  # "c", then ABORT: every task rolls back to checkpoint 2
    assert r.checkpoints == [2] and r.restores == [2] and state_counts(h) == words("a b")


def test_bad_arguments_are_one_clear_line() -> None:
    h = Harness(word_count(SENTENCES))
    with pytest.raises(ValueError) as e:
        h.component("count", 5)
    assert str(e.value) == "component: task_index 5 of 'count': expected 0..1, found 5"
    with pytest.raises(ValueError) as e:
        h.kill_at("counter", 0, 1)
    assert str(e.value) == "kill_at: component 'counter' is not in topology 'wc' (components: sentences, split, count)"
    with pytest.raises(ValueError) as e:
        h.kill_at("sentences", 0, 1)
    assert str(e.value) == ("kill_at: component 'sentences' is a spout; expected a bolt (a spout task crashes at "
                            "an ABORT item of a TestSource)")
    with pytest.raises(ValueError) as e:
        h.kill_at("count", 2, 1)
    assert str(e.value) == "kill_at: task_index 2 of 'count': expected 0..1, found 2"
    with pytest.raises(ValueError) as e:
        h.fail_at("count")
    assert str(e.value) == "fail_at('count'): expected exactly one of nth or when, found neither"
    with pytest.raises(ValueError) as e:
        h.checkpoint()
    assert str(e.value) == ("checkpoint: topology 'wc' is not EFFECTIVELY_ONCE (topology.reliability.mode); "
                            "expected a stateful topology")
    b = TopologyBuilder("nosrc")
    b.add_spout("sentences", Sentences, par=1)
    with pytest.raises(ValueError) as e:
        Harness(b)
    assert str(e.value) == ("TestSource 'sentences': config heron_py.testing.source.items: expected a list of items "
                            "(TestSource.config(items)), found NoneType")


def test_test_source_in_run_in_process_skips_abort_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="heron_py.testing.source"):
        r = run_in_process(word_count(["a", ABORT, "b", EOF, "c"], mode="ATMOST_ONCE"), capture=["count"])
    assert sorted(v[0] for v in r.values("count")) == ["a", "b"]
    assert [rec.getMessage() for rec in caplog.records] == ["TestSource 'sentences': ABORT at item 1 skipped "
                                                            "outside the Harness"]


class Buffered(Bolt):
    """A sink that writes what it buffered at cleanup (Storm's IBolt.cleanup)."""

    outputs = []
    written: list[str] = []

    def initialize(self, config: Any, context: Any) -> None:
        self.buffer: list[str] = []

    def process(self, tup: Any) -> None:
        self.buffer.append(tup.values[0])

    def cleanup(self) -> None:
        type(self).written.extend(self.buffer)


def test_close_runs_cleanup_as_at_the_topology_end() -> None:
    Buffered.written = []
    b = TopologyBuilder("sink")
    s = b.add_spout("sentences", Sentences, par=1, config=TestSource.config(["x", "y", EOF]))
    b.add_bolt("sink", Buffered, par=1, inputs={s: Grouping.SHUFFLE})
    with Harness(b) as h:
        h.run()
        assert Buffered.written == []
    assert Buffered.written == ["x", "y"]


def test_the_guides_worked_example_runs(tmp_path: Path) -> None:
    """docs/guides/testing.md's example is a module of tests: each must pass as written."""
    guide = (Path(__file__).parents[3] / "docs" / "guides" / "testing.md").read_text()
    section = guide.split("## The Harness: a worked example", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.S)
    assert code is not None
    (tmp_path / "guide_word_count.py").write_text(code.group(1))
    sys.path.insert(0, str(tmp_path))  # importable: components are pickled by reference
    try:
        module = importlib.import_module("guide_word_count")
        tests = [getattr(module, n) for n in dir(module) if n.startswith("test_")]
        assert len(tests) == 4
        for test in tests:
            test()
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("guide_word_count", None)
