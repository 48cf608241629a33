"""Fixtures of the instance tests that run a task's real execution loop in the test process."""

from __future__ import annotations

import sys
import types
from collections.abc import Iterator

import pytest

from heron_py.common.serialization import MAIN_ALIAS


@pytest.fixture()
def stand_in_main(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The topology's classes are importable from the test's module: no package to load.
    (test_busy_time.py has its own, which also puts the loops' timers out of reach.)"""
    monkeypatch.setitem(sys.modules, MAIN_ALIAS, types.ModuleType(MAIN_ALIAS))
    yield
