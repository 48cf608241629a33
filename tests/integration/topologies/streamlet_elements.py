"""Streamlet element operators on real processes: flat_map, map, filter, union, repartition,
clone, transform, consume and log, written as a heronpy Streamlet program."""

import sys
import time

from heronpy.connectors.mock.arraylooper import ArrayLooper
from heronpy.streamlet.builder import Builder
from heronpy.streamlet.config import Config
from heronpy.streamlet.runner import Runner
from heronpy.streamlet.transformoperator import TransformOperator


class Tag(TransformOperator):
    def setup(self, context):
        self.context = context

    def transform(self, tup):
        self.context.emit(f"{tup.values[0]}@{self.context.get_partition_index()}")


if __name__ == "__main__":
    suffix = "!"  # a closure's variable: travels with the lambda through cloudpickle
    builder = Builder()
    words = builder.new_source(ArrayLooper(["a b", "c"], sleep=0.01)).set_name("lines") \
        .flat_map(lambda line: line.split()).set_name("words")
    # paced, like the lines: an unpaced source floods the 2-core CI machine and every log
    numbers = builder.new_source(lambda: (time.sleep(0.01), 7)[1]).set_name("sevens").filter(lambda n: n == 7) \
        .map(lambda n: str(n) + suffix)
    first, second = words.union(numbers).set_name("both").repartition(2).clone(2)
    first.transform(Tag()).set_name("tagged").log()
    second.consume(lambda x: None)
    config = Config()
    config.set_delivery_semantics(Config.ATLEAST_ONCE)
    Runner().run(sys.argv[1] if len(sys.argv) > 1 else "streamlet_elements", config, builder)
