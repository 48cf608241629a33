"""State managers: where a topology's definition, plans and locations live."""

from heron_py.state.base import StateManager, TManagerLocation
from heron_py.state.localfs import LocalFsStateManager

__all__ = ["LocalFsStateManager", "StateManager", "TManagerLocation"]
