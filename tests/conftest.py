import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
# the examples import sibling modules (wc_common); tests import them the same way
sys.path.insert(0, str(EXAMPLES))


@pytest.fixture
def heron_home(tmp_path, monkeypatch):
    """A private $HERON_PY_HOME; any topology a test leaves running is killed afterwards."""
    home = tmp_path / "heron-home"
    home.mkdir()
    monkeypatch.setenv("HERON_PY_HOME", str(home))
    yield home
    from heron_py.scheduler.local import LocalScheduler
    from heron_py.state import LocalFsStateManager

    state = LocalFsStateManager(home)
    for name in state.list_topologies():
        LocalScheduler(state, home).kill(name)
        state.delete_topology(name)

