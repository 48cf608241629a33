"""heronpy's join example as a Streamlet program on real processes (an outer join too)."""

import sys

from heronpy.connectors.mock.arraylooper import ArrayLooper
from heronpy.streamlet.builder import Builder
from heronpy.streamlet.config import Config
from heronpy.streamlet.runner import Runner
from heronpy.streamlet.windowconfig import WindowConfig

if __name__ == "__main__":
    builder = Builder()
    source_1 = builder.new_source(ArrayLooper([["key1", "a"], ["key1", "b"]], sleep=0.2))
    source_2 = builder.new_source(ArrayLooper([["key1", "c"], ["key1", "d"], ["key2", "e"]], sleep=0.2))
    source_1.join(source_2, WindowConfig.create_sliding_window(2, 1), lambda x, y: x + y) \
        .set_name("joined").log()
    source_1.outer_join(source_2, WindowConfig.create_sliding_window(2, 1), lambda x, y: f"{x}+{y}") \
        .set_name("outer").log()
    Runner().run(sys.argv[1] if len(sys.argv) > 1 else "streamlet_join", Config(), builder)
