"""What the connector benchmarks (kafka_bench.py, rabbitmq_bench.py, redis_bench.py) share: the
head of the topology file each one submits, a spout feeding ``Count``, a bolt that counts and
acks each tuple (the cheapest consumer, so the spout's own cost shows)."""


def topology_head(spout_import: str) -> str:
    """The topology file's imports (``spout_import`` brings the connector's spout) and ``Count``."""
    return f'''
import sys
{spout_import}
from heronpy.api.bolt.bolt import Bolt
from heronpy.api.stream import Grouping
from heronpy.api.topology import TopologyBuilder

class Count(Bolt):
    def initialize(self, config, context):
        self.n = 0
    def process(self, tup):
        self.n += 1
        self.ack(tup)
'''
