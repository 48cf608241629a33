"""Logical plan checks, packing and routing: pure functions, no I/O."""
