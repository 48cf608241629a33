"""Fusion is on by default (graph.fuse): the same Streamlet programs, run with fusion on and off,
output exactly the same elements at every sink (consume, log, to_sink), report the same
per-operator metrics (streamlet-op/NAME/in|out|failed), and keep keyed state exact across an
effectively-once rollback. Also: the opt-out key, the fused names, and the errors for a fused
streamlet's name where a component is expected."""

from __future__ import annotations

import collections
import dataclasses
import logging
from collections.abc import Callable
from typing import Any, ClassVar

import pytest

from heron_py.api.streamlet import combine, graph
from heron_py.api.streamlet import components as comp
from heron_py.api.streamlet.builder import Builder
from heron_py.api.streamlet.config import Config
from heron_py.api.streamlet.errors import StreamletError
from heron_py.api.streamlet.generator import Generator
from heron_py.api.streamlet.runner import build_topology
from heron_py.api.streamlet.sink import Sink
from heron_py.api.streamlet.window import KeyedWindow, Window
from heron_py.api.streamlet.windowconfig import WindowConfig
from heron_py.api.topology import TopologyBuilder
from heron_py.planner.errors import TopologyError
from heron_py.planner.logical import validate
from heron_py.testing import Harness, run_in_process
from tests.fakes import Items

SENTENCES = ["the cat sat", "on the mat", "a cat a hat", "", "the end", "boom goes the cat", "Mary had a lamb"]


class Record(Sink):
    """A sink, and a consume function, that keeps every element it gets under its tag (the
    class is pickled by reference, so the in-process tasks write here)."""

    got: ClassVar[dict[str, list[Any]]] = collections.defaultdict(list)

    def __init__(self, tag: str) -> None:
        self.tag = tag

    def setup(self, context: Any) -> None:
        pass

    def put(self, element: Any) -> None:
        Record.got[self.tag].append(element)

    def __call__(self, element: Any) -> None:
        self.put(element)


def upper_or_raise(word: str) -> str:
    if word == "boom":
        raise ValueError("no boom")
    return word.upper()


def chars_then_raise(word: str) -> Any:
    """A generator result that raises after its first element on "goes": flat_map keeps what
    it gave before the error."""
    yield word[0]
    if word == "goes":
        raise ValueError("gone")
    yield word[-1]


def by_length(word: str, n: int) -> int:
    return len(word) % n


def pair(word: str) -> tuple[str, int]:
    return (word, 1)


def add(a: int, b: int) -> int:
    return a + b


def tagged(tag: str) -> Callable[[Any], str]:
    return lambda x: f"{tag}:{x}"


def plain(element: Any) -> Any:
    """A window's output without its times (they are the clock's, not the program's)."""
    if isinstance(element, tuple) and len(element) == 2 and isinstance(element[0], KeyedWindow):
        w = element[0].get_window()
        return ("keyed", element[0].get_key(), w.get_end_time() - w.get_start_time(), element[1])
    if isinstance(element, tuple) and len(element) == 2 and isinstance(element[0], Window):
        return ("window", element[0].get_end_time() - element[0].get_start_time(), element[1])
    return element


# --- the programs: each writes every output it has to a Record, a consume or a log() ---------


def chain_to_sink(b: Builder) -> None:
    b.new_source(Items(SENTENCES)).flat_map(str.split).map(upper_or_raise).filter(lambda w: w != "THE") \
        .to_sink(Record("out"))


def raising_operators(b: Builder) -> None:
    b.new_source(Items(SENTENCES)).map(lambda s: s.replace("mat", "boom")).flat_map(str.split) \
        .repartition(2).flat_map(chars_then_raise).filter(lambda c: 10 // (ord(c) - ord("m")) != 0) \
        .map(upper_or_raise).consume(Record("out"))


def repartition_consume(b: Builder) -> None:
    # the shape: source -> flat_map(str.split) -> repartition(2, fn) -> consume(counter)
    b.new_source(Items(SENTENCES)).flat_map(str.split).repartition(2, by_length).consume(Record("out"))


def repartition_chain_log(b: Builder) -> None:
    words = b.new_source(Items(SENTENCES)).set_num_partitions(2).flat_map(str.split)
    words.repartition(3, by_length).map(str.title).filter(lambda w: len(w) > 1).map(tagged("log")).log()


def parallelism_changes(b: Builder) -> None:
    b.new_source(Items(SENTENCES)).flat_map(str.split).map(str.lower).set_num_partitions(3) \
        .filter(lambda w: w != "a").set_num_partitions(3).map(len).set_num_partitions(2).to_sink(Record("out"))


def clone_branches(b: Builder) -> None:
    left, right = b.new_source(Items(SENTENCES)).flat_map(str.split).clone(2)
    left.map(str.upper).to_sink(Record("left"))
    right.filter(lambda w: "a" in w).map(tagged("log")).log()


def union_of_two_chains(b: Builder) -> None:
    one = b.new_source(Items(SENTENCES)).flat_map(str.split).map(str.upper)
    two = b.new_source(Items(range(5))).map(str).filter(lambda s: s != "3")
    one.union(two).map(tagged("u")).consume(Record("out"))


def windows_and_joins(b: Builder) -> None:
    pairs = b.new_source(Items(SENTENCES)).flat_map(str.split).map(pair)
    pairs.reduce_by_key_and_window(WindowConfig.create_sliding_window(10, 2), add).to_sink(Record("counts"))
    left = b.new_source(Items([("k1", "a"), ("k1", "b"), ("left-only", "l")])).map(lambda kv: (kv[0], kv[1] * 2))
    right = b.new_source(Items([("k1", "c"), ("right-only", "r")])).filter(lambda kv: kv[1] != "x")
    left.outer_join(right, WindowConfig.create_sliding_window(2, 1), lambda x, y: (x, y)).map(plain) \
        .to_sink(Record("joined"))


def reduce_by_window_then_chain(b: Builder) -> None:
    b.new_source(Items(range(20))).map(lambda n: n * 3).filter(lambda n: n % 2 == 0) \
        .reduce_by_window(WindowConfig.create_tumbling_window(5), add).map(plain).map(tagged("log")).log()


def keyed_counts(b: Builder) -> None:
    words = b.new_source(Items(SENTENCES)).flat_map(str.split).map(str.lower)
    left, middle, right = words.clone(3)
    left.count_by_key(lambda w: w).to_sink(Record("updates"))  # a pair per word
    middle.count_by_key(lambda w: w, emit="final").set_num_partitions(2).to_sink(Record("final"))
    right.reduce_by_key(lambda w: w[0], add, value_fn=len, emit="final").to_sink(Record("reduced"))


def combined_through_repartition(b: Builder) -> None:
    # fused, the source's task counts each batch (count_by_key's combiner); unfused, nothing combines
    b.new_source(Items(SENTENCES * 3)).flat_map(str.split).repartition(2, by_length) \
        .count_by_key(lambda w: w, emit="final").to_sink(Record("final"))


def transform_between(b: Builder) -> None:
    from tests.unit.api.streamlet.test_operators import Doubler

    b.new_source(Items(SENTENCES)).flat_map(str.split).transform(Doubler()).map(str.upper).filter(bool) \
        .consume(Record("out"))


# shape -> (program, the fused components the default builds: what proves fusion ran)
PROGRAMS: dict[str, tuple[Callable[[Builder], None], list[str]]] = {
    "map,filter,flat_map chain -> to_sink": (chain_to_sink, ["generator-1__flatmap-1__map-1__filter-1"]),
    "raising functions in a chain -> consume": (
        raising_operators, ["generator-1__map-1__flatmap-1", "repartition-1__flatmap-2__filter-1__map-2__consume-1"]),
    "repartition(2, fn) -> consume": (repartition_consume, ["generator-1__flatmap-1", "repartition-1__consume-1"]),
    "repartition -> map, filter, map -> log": (
        repartition_chain_log, ["generator-1__flatmap-1", "repartition-1__map-1__filter-1__map-2__log-1"]),
    "parallelism changes stop the chain": (parallelism_changes, ["generator-1__flatmap-1", "map-1__filter-1",
                                                                 "map-2__sink-1"]),
    "clone -> two chains": (clone_branches, ["generator-1__flatmap-1", "repartition-1__map-1__sink-1",
                                             "repartition-2__filter-1__map-2__log-1"]),
    "union of two fused chains": (union_of_two_chains, ["generator-1__flatmap-1__map-1",
                                                        "generator-2__map-2__filter-1", "union-1__map-3__consume-1"]),
    "reduce_by_key_and_window, outer_join": (windows_and_joins, ["generator-1__flatmap-1__map-1",
                                                                 "generator-2__map-2", "generator-3__filter-1",
                                                                 "map-3__sink-2"]),
    "reduce_by_window -> map, map -> log": (reduce_by_window_then_chain, ["generator-1__map-1__filter-1",
                                                                          "map-2__map-3__log-1"]),
    "count_by_key, reduce_by_key": (keyed_counts, ["generator-1__flatmap-1__map-1"]),
    "count_by_key through a repartition (combined)": (combined_through_repartition, ["generator-1__flatmap-1"]),
    "transform between chains": (transform_between, ["generator-1__flatmap-1", "map-1__filter-1__consume-1"]),
}


def compile_(make: Callable[[Builder], None], fusion: bool | None) -> Any:
    b = Builder()
    make(b)
    config = Config()
    if fusion is not None:
        config.set_fusion(fusion)
    return build_topology("eq", config, b)


class LogLines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if message.startswith("log:"):  # what the programs' log() streamlets print
            self.lines.append(message)


def outputs(make: Callable[[Builder], None], fusion: bool | None, *, seed: int = 0) -> dict[str, Any]:
    """Every sink's elements (each sink's in the order it got them), and every log() line."""
    Record.got.clear()
    handler = LogLines()
    root = logging.getLogger()
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    try:
        run_in_process(compile_(make, fusion), ticks=1, seed=seed)
    finally:
        root.removeHandler(handler)
        root.setLevel(level)
    out = {tag: [plain(x) for x in got] for tag, got in Record.got.items()}
    if handler.lines:
        out["log"] = handler.lines
    return out


def as_multisets(out: dict[str, Any]) -> dict[str, collections.Counter[str]]:
    return {tag: collections.Counter(map(repr, xs)) for tag, xs in out.items()}


@pytest.mark.parametrize("shape", sorted(PROGRAMS))
def test_the_default_fuses_and_outputs_exactly_what_the_unfused_program_outputs(shape):
    make, fused_names = PROGRAMS[shape]
    fused_topo, plain_topo = compile_(make, None), compile_(make, False)
    assert [c.name for c in fused_topo.components if "__" in c.name] == fused_names
    assert not [c.name for c in plain_topo.components if "__" in c.name]
    default, off = outputs(make, None), outputs(make, False)
    assert off and all(off.values()), off  # every sink got something: the comparison says something
    # tasks of one component get their share of a shuffle by the engine's random choice, which
    # a different plan draws differently: each sink's elements compared as a multiset, exactly
    assert as_multisets(default) == as_multisets(off)


def test_a_single_partition_chain_keeps_the_order_of_its_elements():
    assert outputs(chain_to_sink, None) == outputs(chain_to_sink, False)
    assert outputs(chain_to_sink, None)["out"] == [w.upper() for s in SENTENCES for w in s.split()
                                                   if w not in ("the", "boom")]


def test_the_combiner_and_the_keyed_counts_agree_with_a_plain_count():
    out = outputs(combined_through_repartition, None)
    words = [w for s in SENTENCES * 3 for w in s.split()]
    assert sorted(out["final"]) == sorted(collections.Counter(words).items())
    topo = compile_(combined_through_repartition, None)
    assert topo.component("generator-1__flatmap-1").config.get(combine.COMBINE_KEY_FUNCTION)


# --- metrics per operator -------------------------------------------------------------------------


def operator_metrics(make: Callable[[Builder], None], fusion: bool) -> dict[str, int]:
    """Each streamlet-op metric summed over the tasks that registered it."""
    h = Harness(compile_(make, fusion))
    h.run()
    h.advance(3)  # the windows fire
    totals: dict[str, int] = collections.Counter()
    for task in h.tasks.values():
        for name, (metric, _interval) in task.host.context.registered_metrics.items():
            if name.startswith(comp.METRIC_PREFIX):
                totals[name] += metric.get_value_and_reset()
    h.close()
    return dict(totals)


@pytest.mark.parametrize("shape", ["raising functions in a chain -> consume", "clone -> two chains",
                                   "union of two fused chains"])
def test_each_operator_reports_the_same_metrics_fused_or_not(shape):
    make = PROGRAMS[shape][0]
    fused, unfused = operator_metrics(make, True), operator_metrics(make, False)
    assert fused == unfused
    assert any(v for k, v in fused.items() if k.endswith("/failed")) or "raising" not in shape
    assert {k.split("/")[1] for k in fused} >= {"map-1", "flatmap-1"}  # named after the streamlet, not the task


# --- effectively once: keyed state across a rollback -----------------------------------------------


class Lines(Generator):
    """One line per next_tuple (None after each ends the batch), its position in the source's
    state: a rollback restores it, so the lines after the checkpoint are read again once."""

    def __init__(self, lines: list[str]) -> None:
        self.lines = lines

    def setup(self, context: Any) -> None:
        self.state = context.get_state()
        if self.state.get("pos") is None:
            self.state.put("pos", 0)
        self.pause = False

    def get(self) -> Any:
        pos = self.state.get("pos")
        if self.pause or pos >= len(self.lines):
            self.pause = False
            return None
        self.pause = True
        self.state.put("pos", pos + 1)
        return self.lines[pos]


class Latest(Sink):
    """The highest count seen per word (replayed updates after a rollback repeat, never exceed)."""

    counts: ClassVar[dict[str, int]] = {}

    def setup(self, context: Any) -> None:
        pass

    def put(self, element: Any) -> None:
        word, n = element
        Latest.counts[word] = max(n, Latest.counts.get(word, 0))


@pytest.mark.parametrize("emit", ["update", "tick"])
def test_keyed_state_is_exact_across_an_effectively_once_rollback_fused_or_not(emit):
    """Fused, the flat_map, map and filter run in the source's task (and, in tick mode, the
    source's task counts each batch for count_by_key: the combiner); the count task is killed
    after a checkpoint, every task rolls back, the source reads again from its saved position:
    the latest count of every word is exact, and the same as unfused."""
    lines = SENTENCES * 4
    words = [w.lower() for s in lines for w in s.split() if w != "a"]
    results = {}
    for fusion in (True, False):
        Latest.counts = {}
        b = Builder()
        settings = {"emit": "tick", "tick_secs": 1} if emit == "tick" else {}
        b.new_source(Lines(lines)).flat_map(str.split).map(str.lower).filter(lambda w: w != "a") \
            .count_by_key(lambda w: w, **settings).set_name("count").to_sink(Latest())
        config = Config({"topology.stateful.checkpoint.interval.secs": "1000"})
        config.set_delivery_semantics(Config.EFFECTIVELY_ONCE)
        config.set_fusion(fusion)
        topo = build_topology("eo", config, b)
        spout = topo.components[0]
        assert (spout.name == "generator-1__flatmap-1__map-1__filter-1") is fusion
        assert bool(spout.config.get(combine.COMBINE_KEY_FUNCTION)) is (fusion and emit == "tick")
        h = Harness(topo, max_spout_calls=8)
        h.run()  # no time passes: no tick yet
        cid = h.checkpoint()
        [count] = [t for t in h.tasks.values() if t.component == "count"]
        read = h.component(spout.name)._generator.state.get("pos")
        assert count.received > 0 and read < len(lines) - 4  # lines are left to read after the kill
        nth = count.received + 2  # after the checkpoint, before the input ends
        h.kill_at("count", 0, nth)
        for _ in range(len(lines)):
            r = h.advance(1.5)
        assert r.restores == [cid] and r.kills == [f"task {count.task_id} of 'count' killed: kill_at its tuple {nth}"]
        results[fusion] = dict(Latest.counts)
        assert results[fusion] == dict(collections.Counter(words))
    assert results[True] == results[False]


def test_fusion_never_crosses_a_keyed_or_windowed_operator_or_a_repartition():
    topo = compile_(keyed_counts, None)
    for c in topo.components:
        if "__" in c.name:
            kinds = str(c.config.get(comp.FUSED_KINDS, ""))
            assert set(kinds.split(",")) <= {"map", "flatmap", "filter", "pass", "consume", "log", "sink"}, c.name
            assert kinds.count("pass") <= 1 and (kinds.startswith("pass") or "pass" not in kinds), c.name
    stateful = [c.name for c in topo.components if "countbykey" in c.name or "reducebykey" in c.name]
    assert stateful == ["countbykey-1", "countbykey-2", "reducebykey-1"]


def test_an_exactly_once_refusal_finds_a_sink_fused_behind_other_operators():
    pytest.importorskip("redis")
    from heron_py.connectors.redis import RedisStreamSink

    b = Builder()
    b.new_source(Items(["x"])).repartition(2).map(str.upper).to_sink(RedisStreamSink("redis://127.0.0.1:1/0", "out"))
    config = Config()
    config.set_delivery_semantics(Config.EFFECTIVELY_ONCE)
    topo = build_topology("eo", config, b)
    assert [c.name for c in topo.components] == ["generator-1", "repartition-1__map-1__sink-1"]
    with pytest.raises(TopologyError) as e:
        validate(topo)
    assert ("bolt 'repartition-1__map-1__sink-1' (heron_py.connectors.redis.streamlet:RedisStreamSink) does not "
            "write exactly once") in str(e.value)


# --- the opt-out key -----------------------------------------------------------------------------


def names(config: Config) -> list[str]:
    b = Builder()
    b.new_source(Items(SENTENCES)).flat_map(str.split).map(str.upper).consume(print)
    return [c.name for c in build_topology("k", config, b).components]


@pytest.mark.parametrize("value", [False, "false", "False"])
def test_streamlet_fusion_false_opts_out(value):
    assert names(Config({"streamlet.fusion": value})) == ["generator-1", "flatmap-1", "map-1", "consume-1"]
    c = Config()
    c.set_user_config("streamlet.fusion", value)
    assert names(c) == ["generator-1", "flatmap-1", "map-1", "consume-1"]


@pytest.mark.parametrize("value", [True, "true", None])
def test_streamlet_fusion_true_or_unset_fuses(value):
    config = Config() if value is None else Config({"streamlet.fusion": value})
    assert names(config) == ["generator-1__flatmap-1__map-1", "consume-1"]


def test_a_bad_streamlet_fusion_value_is_one_error():
    with pytest.raises(StreamletError) as e:
        names(Config({"streamlet.fusion": "yes"}))
    assert str(e.value) == "Runner.run: config streamlet.fusion: expected true or false, found 'yes'"


def test_builder_build_fuses_by_default_as_runner_does():
    b = Builder()
    b.new_source(Items(SENTENCES)).flat_map(str.split).consume(print)
    bldr = TopologyBuilder("direct")
    b.build(bldr)
    assert [c.name for c in bldr.build().components] == ["generator-1__flatmap-1", "consume-1"]


def test_a_fusion_value_given_at_submit_that_contradicts_the_build_is_refused():
    built_fused = build_topology("s", Config(), _sentences())
    validate(dataclasses.replace(built_fused, config={**built_fused.config, "streamlet.fusion": "true"}))
    with pytest.raises(TopologyError) as e:
        validate(dataclasses.replace(built_fused, config={**built_fused.config, "streamlet.fusion": "false"}))
    assert str(e.value) == (
        "topology 's': config streamlet.fusion: the Streamlet program built its topology with true (source "
        "'generator-1__flatmap-1'), found false in the topology's config; the key is read when the program "
        "builds its topology: set it in the program (config.set_fusion(False))")
    off = Config()
    off.set_fusion(False)
    built_plain = build_topology("s", off, _sentences())
    with pytest.raises(TopologyError, match=r"built its topology with false \(source 'generator-1'\), found true"):
        validate(dataclasses.replace(built_plain, config={**built_plain.config, "streamlet.fusion": "true"}))


def _sentences() -> Builder:
    b = Builder()
    b.new_source(Items(SENTENCES)).flat_map(str.split).consume(print)
    return b


# --- names ---------------------------------------------------------------------------------------


def test_a_long_chain_is_named_by_its_first_two_and_last_streamlets_and_how_many_between():
    b = Builder()
    s = b.new_source(Items(SENTENCES)).set_name("sentences-from-the-shared-workload")
    for i in range(8):
        s = s.map(str.strip).set_name(f"strip-the-surrounding-whitespace-{i}")
    s.consume(print)
    [spout, bolt] = build_topology("long", Config(), b).components
    assert spout.name == ("sentences-from-the-shared-workload__strip-the-surrounding-whitespace-0__6-more__"
                          "strip-the-surrounding-whitespace-7")
    assert len(spout.name) <= graph.MAX_FUSED_NAME
    assert spout.config[comp.FUSED_NAMES] == ",".join(f"strip-the-surrounding-whitespace-{i}" for i in range(8))
    assert bolt.name == "consume-1"
    validate(build_topology("long", Config(), b))


def test_a_fused_streamlets_name_where_a_component_is_expected_says_where_it_runs():
    topo = build_topology("t", Config(), _sentences())
    expected = ("'flatmap-1': topology 't' has no component of that name; streamlet 'flatmap-1' runs fused in "
                "component 'generator-1__flatmap-1' (Streamlet fusion is on by default): expected "
                "'generator-1__flatmap-1' (what its first streamlet receives), or the topology built with "
                "config.set_fusion(False) for a component per streamlet")
    with pytest.raises(ValueError) as e:
        run_in_process(topo, capture=["flatmap-1"])
    assert str(e.value) == "run_in_process capture " + expected
    with pytest.raises(ValueError) as e:
        Harness(topo, capture=["generator-1"])
    assert "streamlet 'generator-1' runs fused in component 'generator-1__flatmap-1'" in str(e.value)
    with pytest.raises(ValueError) as e:
        Harness(topo).kill_at("flatmap-1", 0, 1)
    assert str(e.value) == "kill_at " + expected


def test_run_locals_timeout_names_the_captures_no_task_wrote(tmp_path):
    from heron_py.testing.local import _no_files

    (tmp_path / "consume-1-2.jsonl").write_text("")
    assert _no_files(tmp_path, ["consume-1"]) == ""
    assert _no_files(tmp_path, ["consume-1", "flatmap-1"]).startswith(
        "; no task wrote a capture file for 'flatmap-1': expected component names (a Streamlet program's "
        "operators fused into one task are one component named after them")
