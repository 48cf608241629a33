"""Where ``build_and_submit()`` hands a built topology: the CLI sets the handler."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from heron_py.planner.model import TopologyDef

Handler = Callable[["TopologyDef"], None]
_handler: Handler | None = None


def set_submit_handler(handler: Handler | None) -> Handler | None:
    """Installs ``handler`` and returns the previous one (so callers can restore it)."""
    global _handler
    previous, _handler = _handler, handler
    return previous


def submit(topology: TopologyDef) -> None:
    if _handler is None:
        raise RuntimeError(
            f"topology '{topology.name}' was built outside heron-py's submitter: run the file with "
            f"`heron-py submit local FILE` (or use heron_py.testing to run it in a test)"
        )
    _handler(topology)
