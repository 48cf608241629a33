"""A Streamlet program in effectively-once mode; heron-py refuses it at submit when it uses
heronpy's Pulsar connector (argv[2] == "pulsar")."""

import sys

from heronpy.connectors.mock.arraylooper import ArrayLooper
from heronpy.connectors.pulsar.pulsarstreamlet import PulsarStreamlet
from heronpy.streamlet.builder import Builder
from heronpy.streamlet.config import Config
from heronpy.streamlet.runner import Runner

if __name__ == "__main__":
    builder = Builder()
    config = Config()
    if sys.argv[2] == "pulsar":
        PulsarStreamlet.pulsarStreamlet("pulsar://localhost:6650", "words").log()
    builder.new_source(ArrayLooper([1, 2])).map(lambda x: x + 1).log()
    config.set_delivery_semantics(Config.EFFECTIVELY_ONCE)
    Runner().run(sys.argv[1], config, builder)
