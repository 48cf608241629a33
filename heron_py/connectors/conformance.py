"""Each connector class against the engine contracts it claims (heron_py/api/contracts.py),
checked by mypy --strict only: every assignment below is under ``TYPE_CHECKING``, so nothing is
imported or run at run time and no call of a component changes. A class that stops satisfying a
contract (a hook renamed, a signature changed, an attribute's type widened) fails mypy here.
A new connector class is added here (tests/unit/connectors/test_contracts.py checks that each
spout and bolt under heron_py/connectors is listed)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from heron_py.api import contracts as c
    from heron_py.connectors.files.sink import FileSink
    from heron_py.connectors.files.spout import FileTailSpout
    from heron_py.connectors.kafka.bolt import KafkaBolt
    from heron_py.connectors.kafka.spout import KafkaSpout
    from heron_py.connectors.postgres.bolts import PostgresInsertBolt, PostgresLookupBolt
    from heron_py.connectors.rabbitmq.bolt import RabbitMQBolt
    from heron_py.connectors.rabbitmq.spout import RabbitMQSpout
    from heron_py.connectors.redis.bolts import (
        RedisBatchBolt,
        RedisFilterBolt,
        RedisLookupBolt,
        RedisStoreBolt,
        RedisStreamBolt,
    )
    from heron_py.connectors.redis.spout import RedisStreamSpout

    # --- sources ---
    _kafka_spout: type[c.SourceProtocol] = KafkaSpout
    _kafka_spout_emit: type[c.BatchEmitSource] = KafkaSpout
    _kafka_spout_tracked: type[c.TrackedBatchEmitSource] = KafkaSpout
    _kafka_spout_run: type[c.TrackedRunEmitSource] = KafkaSpout
    _kafka_spout_acks: type[c.BatchAckSource] = KafkaSpout
    _kafka_spout_waits: type[c.WaitingSource] = KafkaSpout
    _kafka_spout_state: type[c.CheckpointedComponent] = KafkaSpout
    _kafka_spout_commits: type[c.CheckpointCommitter] = KafkaSpout

    _redis_spout: type[c.SourceProtocol] = RedisStreamSpout
    _redis_spout_tracked: type[c.TrackedBatchEmitSource] = RedisStreamSpout
    _redis_spout_run: type[c.TrackedRunEmitSource] = RedisStreamSpout
    _redis_spout_acks: type[c.BatchAckSource] = RedisStreamSpout
    _redis_spout_state: type[c.CheckpointedComponent] = RedisStreamSpout

    _file_spout: type[c.SourceProtocol] = FileTailSpout
    _file_spout_tracked: type[c.TrackedBatchEmitSource] = FileTailSpout
    _file_spout_run: type[c.TrackedRunEmitSource] = FileTailSpout
    _file_spout_acks: type[c.BatchAckSource] = FileTailSpout
    _file_spout_state: type[c.CheckpointedComponent] = FileTailSpout

    _rabbitmq_spout: type[c.SourceProtocol] = RabbitMQSpout
    _rabbitmq_spout_polled: type[c.PolledComponent] = RabbitMQSpout

    # --- sinks: each polled (a batch's delay, delivery reports) and busy while inputs wait ---
    _kafka_bolt: type[c.SinkProtocol] = KafkaBolt
    _kafka_bolt_polled: type[c.PolledComponent] = KafkaBolt
    _kafka_bolt_busy: type[c.BusyComponent] = KafkaBolt

    _rabbitmq_bolt: type[c.SinkProtocol] = RabbitMQBolt
    _rabbitmq_bolt_polled: type[c.PolledComponent] = RabbitMQBolt
    _rabbitmq_bolt_busy: type[c.BusyComponent] = RabbitMQBolt

    _file_sink: type[c.SinkProtocol] = FileSink
    _file_sink_polled: type[c.PolledComponent] = FileSink
    _file_sink_busy: type[c.BusyComponent] = FileSink
    _file_sink_state: type[c.CheckpointedComponent] = FileSink
    _file_sink_commits: type[c.CheckpointCommitter] = FileSink

    _pg_insert: type[c.SinkProtocol] = PostgresInsertBolt
    _pg_insert_polled: type[c.PolledComponent] = PostgresInsertBolt
    _pg_insert_busy: type[c.BusyComponent] = PostgresInsertBolt
    _pg_insert_state: type[c.CheckpointedComponent] = PostgresInsertBolt
    _pg_insert_commits: type[c.CheckpointCommitter] = PostgresInsertBolt

    _pg_lookup: type[c.SinkProtocol] = PostgresLookupBolt
    _pg_lookup_polled: type[c.PolledComponent] = PostgresLookupBolt
    _pg_lookup_busy: type[c.BusyComponent] = PostgresLookupBolt
    _pg_lookup_state: type[c.CheckpointedComponent] = PostgresLookupBolt

    _redis_batch: type[c.SinkProtocol] = RedisBatchBolt
    _redis_batch_polled: type[c.PolledComponent] = RedisBatchBolt
    _redis_batch_busy: type[c.BusyComponent] = RedisBatchBolt
    _redis_batch_state: type[c.CheckpointedComponent] = RedisBatchBolt
    _redis_batch_commits: type[c.CheckpointCommitter] = RedisBatchBolt
    _redis_stream_bolt: type[c.SinkProtocol] = RedisStreamBolt
    _redis_stream_bolt_polled: type[c.PolledComponent] = RedisStreamBolt
    _redis_stream_bolt_busy: type[c.BusyComponent] = RedisStreamBolt
    _redis_stream_bolt_state: type[c.CheckpointedComponent] = RedisStreamBolt
    _redis_stream_bolt_commits: type[c.CheckpointCommitter] = RedisStreamBolt
    _redis_store: type[c.SinkProtocol] = RedisStoreBolt
    _redis_store_polled: type[c.PolledComponent] = RedisStoreBolt
    _redis_store_busy: type[c.BusyComponent] = RedisStoreBolt
    _redis_store_state: type[c.CheckpointedComponent] = RedisStoreBolt
    _redis_store_commits: type[c.CheckpointCommitter] = RedisStoreBolt
    _redis_lookup: type[c.SinkProtocol] = RedisLookupBolt
    _redis_lookup_polled: type[c.PolledComponent] = RedisLookupBolt
    _redis_lookup_busy: type[c.BusyComponent] = RedisLookupBolt
    _redis_lookup_state: type[c.CheckpointedComponent] = RedisLookupBolt
    _redis_lookup_commits: type[c.CheckpointCommitter] = RedisLookupBolt
    _redis_filter: type[c.SinkProtocol] = RedisFilterBolt
    _redis_filter_polled: type[c.PolledComponent] = RedisFilterBolt
    _redis_filter_busy: type[c.BusyComponent] = RedisFilterBolt
    _redis_filter_state: type[c.CheckpointedComponent] = RedisFilterBolt
    _redis_filter_commits: type[c.CheckpointCommitter] = RedisFilterBolt
