"""A user module named like heron-py's own top-level package `instance`."""
NAME = "mine"
