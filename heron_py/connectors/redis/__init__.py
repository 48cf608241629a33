"""Redis in and out (needs ``heron-py[redis]``: redis-py). See docs/connectors/redis.md."""

from heron_py.connectors.redis.bolts import RedisFilterBolt, RedisLookupBolt, RedisStoreBolt, RedisStreamBolt
from heron_py.connectors.redis.mappers import (
    FieldNameMapper,
    RedisDataType,
    RedisDataTypeDescription,
    RedisFilterMapper,
    RedisLookupMapper,
    RedisStoreMapper,
)
from heron_py.connectors.redis.spout import RedisStreamSpout
from heron_py.connectors.redis.streamlet import RedisStreamGenerator, RedisStreamSink

__all__ = [
    "FieldNameMapper",
    "RedisDataType",
    "RedisDataTypeDescription",
    "RedisFilterBolt",
    "RedisFilterMapper",
    "RedisLookupBolt",
    "RedisLookupMapper",
    "RedisStoreBolt",
    "RedisStoreMapper",
    "RedisStreamBolt",
    "RedisStreamGenerator",
    "RedisStreamSink",
    "RedisStreamSpout",
]
