"""heronpy's ``StatefulComponent``: a spout or bolt that keeps state across failures in
effectively-once mode. The engine calls ``init_state`` before ``initialize`` (with the state
of the last completed checkpoint, or an empty one). At a restore after a failure the component
is closed and a new one made, which gets ``init_state`` and ``initialize`` again, as in Heron
(heron_py/runtime/stateful.py). ``pre_save`` is called before each checkpoint saves the state.
Components that are stateful *and* work without effectively once (heronpy's window bolts) run
in the other modes too, where neither method is called."""

from __future__ import annotations

from abc import ABC, abstractmethod

from heron_py.api.state.state import State


class StatefulComponent(ABC):
    @abstractmethod
    def init_state(self, stateful_state: State) -> None:
        """Called with the state to restore (empty on a fresh start)."""

    @abstractmethod
    def pre_save(self, checkpoint_id: str) -> None:
        """Called before the state is saved for checkpoint ``checkpoint_id``."""
