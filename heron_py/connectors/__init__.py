"""Connectors to external systems: a replayable source core and an acked sink core
(``base``), and the Kafka spout and bolt (``kafka``; needs ``heron-py[kafka]``)."""
