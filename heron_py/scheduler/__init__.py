"""Schedulers and the per-container executor."""
