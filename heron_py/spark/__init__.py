"""The same topologies on PySpark: batch runs over bounded data (``run_topology_batch``), a
Parquet sink bolt for streaming topologies (``ParquetSink``), and reconciliation of a
stream's output against a batch run's (``reconcile``). PySpark is imported only when used."""

from heron_py.spark.sink import ParquetSink

__all__ = ["ParquetSink"]
