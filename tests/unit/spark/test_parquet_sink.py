"""The Spark connector's ParquetSink (heron_py/spark/sink.py) acks a tuple only once its rows
are durable."""

import logging
import os
from types import SimpleNamespace


def test_parquet_sink_acks_only_after_the_file_and_its_name_are_fsynced(tmp_path, monkeypatch):
    from heron_py.spark.sink import ParquetSink

    events = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (events.append("fsync"), real_fsync(fd)))
    delegate = SimpleNamespace(ack=lambda t: events.append(f"ack {t.values[0]}"), fail=lambda t: events.append("fail"),
                               log=lambda *a: None, logger=logging.getLogger("sink"))
    sink = ParquetSink(delegate)
    sink.folder, sink.fields, sink.prefix, sink.seq, sink.written_rows = tmp_path, ["word", "n"], "part-1", 0, 0
    sink.rows, sink.tuples, sink.max_rows = [], [], 100
    for w in ("a", "b"):
        sink.process(SimpleNamespace(values=[w, 1]))
    sink.flush()
    assert events == ["fsync", "fsync", "ack a", "ack b"]  # the file, then the folder, then the acks
    assert [p.name for p in tmp_path.iterdir()] == ["part-1-000000.parquet"]
