"""A fused Streamlet word count on the local scheduler (real processes, 2 containers): the
source's lines through a fused flat_map(str.split) + map(str.lower) task, count_by_key, and
the counts exact, with acking off (per-batch path) and on (per-tuple, anchored path). And one
program run as it is (fusion on by default) and with fusion off: the same outputs exactly."""

from __future__ import annotations

import textwrap
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from heron_py.testing import run_local

pytestmark = pytest.mark.integration

LINES = ["The cat sat", "on the MAT", "a cat a hat", "the end"]
REPEAT = 50

PROGRAM = textwrap.dedent('''
    import sys

    from heronpy.streamlet.builder import Builder
    from heronpy.streamlet.config import Config
    from heronpy.streamlet.generator import Generator
    from heronpy.streamlet.runner import Runner


    class Lines(Generator):
        """LINES * REPEAT once, then nothing."""

        def setup(self, context):
            self.left = LINES * REPEAT

        def get(self):
            return self.left.pop() if self.left else None


    if __name__ == "__main__":
        builder = Builder()
        builder.new_source(Lines()).flat_map(str.split).map(str.lower) \\
            .count_by_key(lambda w: w).set_num_partitions(2).repartition(1).set_name("out")
        config = Config()
        config.set_num_containers(2)
        config.set_fusion(True)
        if sys.argv[2] == "on":
            config.set_delivery_semantics(Config.ATLEAST_ONCE)
        Runner().run(sys.argv[1], config, builder)
''')


def expected() -> Counter[str]:
    return Counter(w.lower() for line in LINES * REPEAT for w in line.split())


def final_counts(received: dict[str, list[dict[str, Any]]]) -> dict[str, int]:
    """Per word, the highest count the update stream carried (a captured pair is a list)."""
    out: dict[str, int] = {}
    for r in received.get("out", []):
        word, n = r["values"][0]
        out[word] = max(out.get(word, 0), n)
    return out


@pytest.mark.parametrize("acking", ["off", "on"])
def test_fused_word_count_is_exact(heron_home: Path, tmp_path: Path, acking: str) -> None:
    program = tmp_path / "fused_wc.py"
    program.write_text(f"LINES = {LINES!r}\nREPEAT = {REPEAT}\n" + PROGRAM)
    want = dict(expected())
    run = run_local(program, [f"fused-{acking}", acking], home=heron_home, capture=["out", "countbykey-1"],
                    until=lambda rec: final_counts(rec) == want, timeout=30)
    assert final_counts(run.received) == want
    # the flat_map and map ran in the source's spout (generator-1__flatmap-1__map-1): the keyed
    # step received the lowered words, never a line
    assert sorted(v[0] for v in run.values("countbykey-1")) == sorted(expected().elements())


BRANCHES = textwrap.dedent('''
    import sys

    from heronpy.streamlet.builder import Builder
    from heronpy.streamlet.config import Config
    from heronpy.streamlet.generator import Generator
    from heronpy.streamlet.runner import Runner


    class Lines(Generator):
        """Each source partition reads its share of LINES * REPEAT once, then nothing."""

        def setup(self, context):
            self.left = (LINES * REPEAT)[context.get_partition_index()::context.get_num_partitions()]

        def get(self):
            return self.left.pop() if self.left else None


    def by_length(word, n):
        return len(word) % n


    if __name__ == "__main__":
        builder = Builder()
        words = builder.new_source(Lines()).set_num_partitions(2).flat_map(str.split).map(str.lower) \\
            .filter(lambda w: w != "a")
        left, right = words.clone(2)
        left.repartition(2, by_length).map(lambda w: w + "!").repartition(1).set_name("marked")
        right.count_by_key(lambda w: w, emit="tick", tick_secs=0.2).set_num_partitions(2) \\
            .repartition(1).set_name("counts")
        config = Config()
        config.set_num_containers(2)
        if sys.argv[2] == "off":
            config.set_fusion(False)
        Runner().run(sys.argv[1], config, builder)
''')


def test_a_program_outputs_the_same_with_fusion_on_by_default_and_off(heron_home: Path, tmp_path: Path) -> None:
    from heron_py.cli.submit import load_topology_file

    program = tmp_path / "branches.py"
    program.write_text(f"LINES = {LINES!r}\nREPEAT = {REPEAT}\n" + BRANCHES)
    words = [w.lower() for line in LINES * REPEAT for w in line.split() if w.lower() != "a"]
    want_marked, want_counts = Counter(w + "!" for w in words), dict(Counter(words))
    assert [c.name for c in load_topology_file(program, ["b", "on"]).components if "__" in c.name] == [
        "generator-1__flatmap-1__map-1__filter-1", "repartition-2__map-2"]
    assert not [c.name for c in load_topology_file(program, ["b", "off"]).components if "__" in c.name]

    def latest(received: dict[str, list[dict[str, Any]]]) -> dict[str, int]:
        out: dict[str, int] = {}
        for r in received.get("counts", []):
            word, n = r["values"][0]
            out[word] = max(out.get(word, 0), n)
        return out

    def marked(received: dict[str, list[dict[str, Any]]]) -> Counter[str]:
        return Counter(r["values"][0] for r in received.get("marked", []))

    def done(received: dict[str, list[dict[str, Any]]]) -> bool:
        return marked(received).total() >= want_marked.total() and latest(received) == want_counts

    outputs = {}
    for fusion in ("on", "off"):
        run = run_local(program, [f"branches-{fusion}", fusion], home=heron_home, name=f"branches-{fusion}",
                        capture=["marked", "counts"], until=done, timeout=60)
        outputs[fusion] = (marked(run.received), latest(run.received))
    assert outputs["on"] == outputs["off"] == (want_marked, want_counts)
