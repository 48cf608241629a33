"""count_by_key on real processes (the local scheduler): a Streamlet word count, source ->
flat_map(str.split) -> count_by_key(identity) over two partitions -> to_sink, with exact
counts: each word's counts 1..n once each, every word's in one task. And the combiner's path
through a repartition (fusion on, emit on ticks): the latest count of every word exact."""

import collections
import textwrap

import pytest

from heron_py.testing import run_local

pytestmark = pytest.mark.integration

LINES = ["the quick brown fox", "jumps over the lazy dog", "the dog sleeps", "a fox and a dog"] * 25
WORDS = collections.Counter(w for line in LINES for w in line.split())

TOPOLOGY = textwrap.dedent('''
    import sys

    from heronpy.streamlet.builder import Builder
    from heronpy.streamlet.config import Config
    from heronpy.streamlet.generator import Generator
    from heronpy.streamlet.runner import Runner
    from heronpy.streamlet.sink import Sink

    LINES = {lines!r}


    class Lines(Generator):
        """Each line once, then nothing."""

        def setup(self, context):
            self.left = list(LINES)

        def get(self):
            return self.left.pop(0) if self.left else None


    class Drop(Sink):
        def setup(self, context):
            pass

        def put(self, element):
            pass


    def by_length(word, n):
        return len(word) % n


    if __name__ == "__main__":
        builder = Builder()
        config = Config()
        source = builder.new_source(Lines())
        if sys.argv[2:] == ["combined"]:  # source + flat_map -> repartition -> count_by_key on ticks
            config.set_fusion(True)
            words = source.set_num_partitions(2).flat_map(str.split).repartition(2, by_length)
            words.count_by_key(lambda w: w, emit="tick", tick_secs=0.2) \\
                .set_name("counts").set_num_partitions(2).to_sink(Drop())
        else:
            source.flat_map(str.split).count_by_key(lambda w: w).set_name("counts") \\
                .set_num_partitions(2).to_sink(Drop())
        Runner().run(sys.argv[1], config, builder)
''')


def test_word_count_with_count_by_key_is_exact(heron_home, tmp_path):
    topology = tmp_path / "keyed_word_count.py"
    topology.write_text(TOPOLOGY.format(lines=LINES))
    total = sum(WORDS.values())

    def done(rec):
        return len(rec["sink-1"]) >= total

    run = run_local(topology, ["keyed"], home=heron_home, capture=["sink-1"], until=done, timeout=30)
    pairs = [tuple(v[0]) for v in run.values("sink-1")]
    assert len(pairs) == total
    per_word = collections.defaultdict(list)
    for word, n in pairs:
        per_word[word].append(n)
    assert {w: sorted(ns) for w, ns in per_word.items()} == {w: list(range(1, c + 1)) for w, c in WORDS.items()}
    sources = collections.defaultdict(set)
    for r in run.received["sink-1"]:
        sources[r["values"][0][0]].add(r["source_task"])
    assert all(len(s) == 1 for s in sources.values()), sources


def test_the_combiner_through_a_repartition_counts_every_word_exactly(heron_home, tmp_path):
    """Each of the 2 source tasks reads every line (Lines has no partitioning): the source's tasks
    count per (partition, word), the repartition's tasks forward the triples, the counting tasks
    emit each changed word every 0.2 s; the latest count of each word reaching the sink is exact."""
    topology = tmp_path / "keyed_word_count.py"
    topology.write_text(TOPOLOGY.format(lines=LINES))
    expected = {w: 2 * c for w, c in WORDS.items()}

    def latest(rec):
        out = {}
        for r in rec.get("sink-1", ()):
            word, n = r["values"][0]
            out[word] = max(n, out.get(word, 0))
        return out

    run = run_local(topology, ["keyed_combined", "combined"], home=heron_home, capture=["sink-1", "counts"],
                    until=lambda rec: latest(rec) == expected, timeout=30)
    assert latest(run.received) == expected
    sources = collections.defaultdict(set)
    for r in run.received["sink-1"]:
        sources[r["values"][0][0]].add(r["source_task"])
    assert all(len(s) == 1 for s in sources.values()), sources  # each word counted in one task
    # the counting tasks got (word, count, partition) triples from the repartition's tasks
    triples = [tuple(r["values"][0]) for r in run.received["counts"]]
    assert {r["source"] for r in run.received["counts"]} == {"repartition-1"}
    assert all(len(t) == 3 and t[2] == len(t[0]) % 2 for t in triples), triples[:5]
    assert len(triples) < sum(expected.values())  # fewer than one per word
    assert sum(t[1] for t in triples) == sum(expected.values())
