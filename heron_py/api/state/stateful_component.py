"""heronpy's ``StatefulComponent``: a spout or bolt that keeps state across failures in
effectively-once mode. The engine calls ``init_state`` once before the component runs (with
the state of the last completed checkpoint) and ``pre_save`` before each checkpoint.

heron-py does not run effectively-once yet: a topology that asks for it is refused at submit
(``topology.reliability.mode``). Components that are stateful *and* work without it (heronpy's
window bolts) run in the other modes, where neither method is called."""

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
