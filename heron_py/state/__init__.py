"""State managers: where a topology's definition, plans and locations live."""

from heron_py.state.base import StateManager, StateManagerError, TManagerLocation
from heron_py.state.config import StateConfig, open_state
from heron_py.state.localfs import LocalFsStateManager

__all__ = ["LocalFsStateManager", "StateConfig", "StateManager", "StateManagerError", "TManagerLocation",
           "open_state"]
