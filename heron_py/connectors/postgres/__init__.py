"""PostgreSQL out and lookups (needs ``heron-py[postgres]``: psycopg 3). See docs/connectors/postgres.md."""

from heron_py.connectors.postgres.bolts import PostgresInsertBolt, PostgresLookupBolt
from heron_py.connectors.postgres.mappers import Column, SimpleJdbcLookupMapper, SimpleJdbcMapper
from heron_py.connectors.postgres.streamlet import PostgresSink

__all__ = ["Column", "PostgresInsertBolt", "PostgresLookupBolt", "PostgresSink", "SimpleJdbcLookupMapper",
           "SimpleJdbcMapper"]
