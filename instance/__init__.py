"""Heron instance: one task per process, a gateway thread and an execution thread."""
