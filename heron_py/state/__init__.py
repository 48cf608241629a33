"""State managers: where a topology's definition, plans and locations live."""

from heron_py.state.base import StateManager, StateManagerError, TManagerLocation, local_owner
from heron_py.state.config import StateConfig
from heron_py.state.localfs import LocalFsStateManager
from heron_py.state.stores import open_state

__all__ = ["LocalFsStateManager", "StateConfig", "StateManager", "StateManagerError", "TManagerLocation",
           "local_owner", "open_state"]
