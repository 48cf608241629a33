"""Counts in the CLI's sentences (pure)."""

from __future__ import annotations


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """``1 container``, ``2 containers``, ``0 containers``."""
    return f"{n} {noun if n == 1 else plural or noun + 's'}"
