"""Metrics manager: one per container. It takes its processes' reports, keeps the latest in
``store.py``, serves them to Prometheus (``http.py``, ``prom.py``), writes ``metrics.jsonl`` and
forwards them to the topology master (``main.py``)."""
