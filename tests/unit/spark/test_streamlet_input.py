"""heron-py batch's --input on a Streamlet source (heron_py/spark/batch.py): fusion is on by
default, so the source's spout also runs the operators fused behind it; an input file's rows
must go through them (and through count_by_key's combiner), as the source's own elements do.
The stages are run here as the Spark tasks run them, without Spark."""

from __future__ import annotations

import collections
import json
from typing import Any

from heron_py.api.streamlet.builder import Builder
from heron_py.api.streamlet.config import Config
from heron_py.api.streamlet.runner import build_topology
from heron_py.planner.model import TopologyDef
from heron_py.spark.batch import StageSpec, run_bolt_partition, run_spout_input_partition
from heron_py.spark.plan import plan_batch
from tests.fakes import Items

LINES = ["the cat sat", "on the mat", "", "the end"] * 300  # more than one chunk of input rows


def by_length(word: str, n: int) -> int:
    return len(word) % n


def batch_run(topo: TopologyDef, spout: str, output: str) -> list[Any]:
    """The spout's stage over LINES as its input (two input partitions), then each bolt's stage
    in plan order; what ``output`` emits on "output"."""
    tjson = json.dumps(topo.to_dict())
    plan = plan_batch(topo)
    par = topo.component(spout).par
    records: dict[str, list[Any]] = {spout: []}
    for i, part in enumerate((LINES[::2], LINES[1::2])):
        records[spout] += run_spout_input_partition(StageSpec(tjson, spout, frozenset(), 0), None, i,
                                                    ([line] for line in part), "output", par)
    out: list[Any] = []
    for bolt in plan.order:
        tasks = plan.tasks_of(bolt)
        upstream = {i.component for i in topo.component(bolt).inputs}
        mine = [r[1] for u in sorted(upstream) for r in records[u] if r[0] == "r" and r[1][0] in tasks]
        capture = frozenset({"output"}) if bolt == output else frozenset()
        records[bolt] = []
        for index, task in enumerate(tasks):
            records[bolt] += run_bolt_partition(StageSpec(tjson, bolt, capture, 0), None, index,
                                                [r for r in mine if r[0] == task])
        out += [values[0] for kind, (stream, values) in
                ((r[0], r[1]) for r in records[bolt] if r[0] == "o") if stream == "output"]
    return out


def words_program(fusion: bool | None) -> TopologyDef:
    b = Builder()
    b.new_source(Items([])).set_name("lines").flat_map(str.split).map(str.upper).repartition(2).set_name("out")
    config = Config()
    if fusion is not None:
        config.set_fusion(fusion)
    return build_topology("words", config, b)


def test_an_input_feeds_the_operators_fused_behind_the_source():
    fused, plain = words_program(None), words_program(False)
    assert [c.name for c in fused.components] == ["lines__flatmap-1__map-1", "out"]
    want = collections.Counter(w.upper() for line in LINES for w in line.split())
    assert collections.Counter(batch_run(fused, "lines__flatmap-1__map-1", "out")) == want
    # unfused, the input is the source's own stream, the flat_map and map their own stages
    assert collections.Counter(batch_run(plain, "lines", "out")) == want


def test_an_input_through_a_combining_source_counts_as_the_stream_does():
    b = Builder()
    b.new_source(Items([])).set_name("lines").flat_map(str.split).repartition(2, by_length) \
        .count_by_key(lambda w: w, emit="final").set_name("counts").repartition(1).set_name("out")
    topo = build_topology("counts", Config(), b)
    assert [c.name for c in topo.components] == ["lines__flatmap-1", "repartition-1", "counts", "out"]
    got = batch_run(topo, "lines__flatmap-1", "out")
    assert sorted(map(tuple, got)) == sorted(collections.Counter(w for line in LINES for w in line.split()).items())
