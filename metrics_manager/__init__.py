"""Metrics manager (DESIGN section 7).

Not built yet: it arrives with the metrics issue (Prometheus export). The package exists
so the layout and packaging are in place; nothing here runs.
"""
