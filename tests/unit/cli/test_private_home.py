"""The heron home holds every topology's secret and the logs, which carry tuple data: it and
its topology folders are the user's alone (0700), log files 0600, rotated copies too; a home
another uid owns is refused at start with one line (the CLI's own, through a real process)."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from heron_py.common.config import LogCaps
from heron_py.common.container_layout import TopologyPaths
from heron_py.common.logrotate import copytruncate, open_log
from heron_py.state import StateConfig, StateManagerError, open_state

OTHER_UID = 65534


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_the_home_is_made_private_at_start(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir(mode=0o755)
    os.chmod(home, 0o755)
    open_state(StateConfig(), home).close()
    assert _mode(home) == 0o700
    fresh = tmp_path / "fresh" / "home"
    open_state(StateConfig(), fresh).close()
    assert _mode(fresh) == 0o700


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a folder to another uid needs root")
def test_a_home_of_another_uid_is_refused_in_one_line(tmp_path: Path) -> None:
    home = tmp_path / "theirs"
    home.mkdir(mode=0o755)
    os.chown(home, OTHER_UID, OTHER_UID)
    expected = (f"heron home {home}: owned by uid {OTHER_UID}, expected uid {os.geteuid()} (this user): it holds "
                f"topology secrets and logs, and its owner could read or change them; set HERON_PY_HOME to a folder "
                f"of your own")
    with pytest.raises(StateManagerError) as e:
        open_state(StateConfig(), home)
    assert str(e.value) == expected
    p = subprocess.run([sys.executable, "-m", "heron_py.cli.main", "list"], capture_output=True, text=True,
                       env={**os.environ, "HERON_PY_HOME": str(home)}, timeout=60)
    assert (p.returncode, p.stdout, p.stderr) == (1, "", f"heron-py: error: {expected}\n")
    assert _mode(home) == 0o755 and not any(home.iterdir())  # nothing written into it


def test_topology_folders_are_private_and_narrowed(tmp_path: Path) -> None:
    paths = TopologyPaths(tmp_path, "wc")
    (paths.logs / "container-0").mkdir(parents=True, mode=0o755)
    for d in (tmp_path / "topologies", paths.root, paths.logs, paths.logs / "container-0"):
        os.chmod(d, 0o755)
    paths.private(paths.container_logs(0))
    paths.private(paths.container(1))
    for d in (tmp_path / "topologies", paths.root, paths.logs, paths.container_logs(0), paths.container(1)):
        assert _mode(d) == 0o700, d


def test_logs_and_their_rotated_copies_are_the_users_alone(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        log = tmp_path / "sink-2.log"
        log.write_bytes(b"x" * 10)
        os.chmod(log, 0o644)  # as an older heron-py left it
        with open_log(log) as f:
            f.write(b"tuple data\n" * 200_000)
        assert _mode(log) == 0o600
        assert copytruncate(log, LogCaps(max_bytes=1024, keep=2))
        assert _mode(log.with_name("sink-2.log.1")) == 0o600
        with open_log(tmp_path / "new.log") as f:
            f.write(b"y")
        assert _mode(tmp_path / "new.log") == 0o600
    finally:
        os.umask(old)
