"""The Streamlet operator families of tests/integration/test_streamlet_topology.py in one heronpy
Streamlet program, so the module launches one topology instead of one per family (issue 40):

- elements: flat_map, map, filter, union, repartition, clone, transform, consume and log;
- windows: heronpy's word-count streamlet (reduce_by_key_and_window over a 4 s window sliding
  every 2 s) and a reduce_by_window;
- joins: heronpy's join example, an inner and an outer join.

Each family reads its own sources, so one family's tuples never reach another's operators.
heronpy numbers the unnamed sinks in the order it builds them (the test checks the names before
it reads them): log-1 the keyed window counts, log-2 the window totals, log-3 the tagged
elements, consume-1 their clone, log-4 the join, log-5 the outer join. With fusion on (the
default, unchanged here) consume-1 runs in its repartition's task: component
repartition-3__consume-1."""

import sys
import time
from typing import Any

from heronpy.connectors.mock.arraylooper import ArrayLooper
from heronpy.streamlet.builder import Builder
from heronpy.streamlet.config import Config
from heronpy.streamlet.runner import Runner
from heronpy.streamlet.transformoperator import TransformOperator
from heronpy.streamlet.windowconfig import WindowConfig


class Tag(TransformOperator):
    def setup(self, context: Any) -> None:
        self.context = context

    def transform(self, tup: Any) -> None:
        self.context.emit(f"{tup.values[0]}@{self.context.get_partition_index()}")


def _seven() -> int:
    time.sleep(0.01)  # paced, like the lines: an unpaced source floods the 2-core CI machine and every log
    return 7


def elements(builder: Builder) -> None:
    suffix = "!"  # a closure's variable: travels with the lambda through cloudpickle
    words = builder.new_source(ArrayLooper(["a b", "c"], sleep=0.01)).set_name("lines") \
        .flat_map(lambda line: line.split()).set_name("words")
    numbers = builder.new_source(_seven).set_name("sevens").filter(lambda n: n == 7) \
        .map(lambda n: str(n) + suffix)
    first, second = words.union(numbers).set_name("both").repartition(2).clone(2)
    first.transform(Tag()).set_name("tagged").log()
    second.consume(lambda x: None)


def windows(builder: Builder) -> None:
    pairs = builder.new_source(ArrayLooper(["Mary Had a little lamb", "I Love You"], sleep=0.01)) \
        .flat_map(lambda line: line.split()) \
        .map(lambda word: (word, 1))
    pairs.reduce_by_key_and_window(WindowConfig.create_sliding_window(4, 2), lambda x, y: x + y) \
        .set_num_partitions(2).set_name("counts").log()
    pairs.map(lambda kv: kv[1]) \
        .reduce_by_window(WindowConfig.create_tumbling_window(2), lambda x, y: x + y).set_name("total").log()


def joins(builder: Builder) -> None:
    source_1 = builder.new_source(ArrayLooper([["key1", "a"], ["key1", "b"]], sleep=0.2))
    source_2 = builder.new_source(ArrayLooper([["key1", "c"], ["key1", "d"], ["key2", "e"]], sleep=0.2))
    source_1.join(source_2, WindowConfig.create_sliding_window(2, 1), lambda x, y: x + y) \
        .set_name("joined").log()
    source_1.outer_join(source_2, WindowConfig.create_sliding_window(2, 1), lambda x, y: f"{x}+{y}") \
        .set_name("outer").log()


if __name__ == "__main__":
    builder = Builder()
    elements(builder)
    windows(builder)
    joins(builder)
    config = Config()
    config.set_delivery_semantics(Config.ATLEAST_ONCE)  # the elements program's; the others set none
    Runner().run(sys.argv[1] if len(sys.argv) > 1 else "streamlet_families", config, builder)
