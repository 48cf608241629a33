"""Log size caps (heron_py/common/logrotate.py) and the sweep of temporary files a crash left
(heron_py/common/atomic.py), on real files, with a real child process appending to its log."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from heron_py.common.atomic import TMP_PREFIX, SweepTarget, atomic_write_bytes, is_leftover, sweep_temp_files
from heron_py.common.config import MB, ConfigError, LogCaps
from heron_py.common.container_layout import TopologyPaths
from heron_py.common.logrotate import (
    copytruncate,
    logs_in,
    rotate_by_rename,
    rotate_logs,
    rotated,
    shift_plan,
)
from heron_py.scheduler.executor import Executor
from heron_py.state.localfs import LocalFsStateManager
from metrics_manager.main import MetricsManager

# --- config ---


def test_caps_default_to_heron_defaults() -> None:
    assert LogCaps.from_config({}) == LogCaps(max_bytes=100 * MB, keep=5)


def test_caps_read_herons_names_and_heron_pys() -> None:
    assert LogCaps.from_config({"heron.logging.maximum.size.mb": "2", "heron.logging.maximum.files": "3"}) == \
        LogCaps(max_bytes=2 * MB, keep=3)
    assert LogCaps.from_config({"heron_py.logging.max.file.mb": 0.5, "heron_py.logging.max.files": 0}) == \
        LogCaps(max_bytes=MB // 2, keep=0)
    # both given: Heron's name wins, as for every alias in the config table
    both = {"heron.logging.maximum.size.mb": "1", "heron_py.logging.max.file.mb": "7",
            "heron.logging.maximum.files": "2", "heron_py.logging.max.files": "9"}
    assert LogCaps.from_config(both) == LogCaps(max_bytes=MB, keep=2)


@pytest.mark.parametrize(("cfg", "message"), [
    ({"heron.logging.maximum.size.mb": "x"}, "config heron.logging.maximum.size.mb: expected a number of MB > 0, "
                                              "found 'x'"),
    ({"heron_py.logging.max.file.mb": 0}, "config heron_py.logging.max.file.mb: expected a number of MB > 0, "
                                          "found 0"),
    ({"heron.logging.maximum.files": "-1"}, "config heron.logging.maximum.files: expected an integer >= 0, "
                                            "found '-1'"),
    ({"heron_py.logging.max.files": 2.5}, "config heron_py.logging.max.files: expected an integer >= 0, found 2.5"),
])
def test_a_bad_cap_is_one_clear_error(cfg: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError) as e:
        LogCaps.from_config(cfg)
    assert str(e.value) == message


# --- rotation ---


def test_the_shift_moves_the_oldest_first(tmp_path: Path) -> None:
    log = tmp_path / "x.log"
    assert shift_plan(log, 3) == [(tmp_path / "x.log.2", tmp_path / "x.log.3"),
                                  (tmp_path / "x.log.1", tmp_path / "x.log.2")]
    assert shift_plan(log, 1) == []


def test_copytruncate_caps_the_size_and_keeps_n_files(tmp_path: Path) -> None:
    log = tmp_path / "x.log"
    caps = LogCaps(max_bytes=100, keep=3)
    assert not copytruncate(log, caps)  # no file yet: nothing to do
    log.write_bytes(b"a" * 100)
    assert not copytruncate(log, caps)  # at the cap, not past it
    for gen in range(6):  # generations 0..5: only the last 3 before the current one are kept
        with log.open("ab") as f:
            f.write(f"gen{gen}\n".encode() * 30)
        assert copytruncate(log, caps)
        assert log.stat().st_size == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.log", "x.log.1", "x.log.2", "x.log.3"]
    assert rotated(log, 1).read_bytes() == b"gen5\n" * 30
    assert rotated(log, 2).read_bytes() == b"gen4\n" * 30
    assert rotated(log, 3).read_bytes() == b"gen3\n" * 30


def test_keeping_no_files_empties_the_log(tmp_path: Path) -> None:
    log = tmp_path / "x.log"
    log.write_bytes(b"z" * 50)
    assert copytruncate(log, LogCaps(max_bytes=10, keep=0))
    assert [p.name for p in tmp_path.iterdir()] == ["x.log"] and log.read_bytes() == b""


_WRITER = """
import os, sys, time
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_APPEND)
os.dup2(fd, 1)  # as the executor hands a child its log: stdout opened for appending
cap = int(sys.argv[3])
for i in range(int(sys.argv[2])):
    print(f"line {i:06d} " + "x" * 80, flush=True)
    if i % 50 == 0:
        time.sleep(0.005)
    if i % 250 == 249:
        # past the cap: wait (at most 20 s) until the parent has rotated, so a loaded machine that
        # runs the parent's loop rarely still sees many rotations while the child writes
        deadline = time.monotonic() + 20
        while os.fstat(fd).st_size > cap and time.monotonic() < deadline:
            time.sleep(0.001)
"""


def test_a_child_appending_to_its_log_keeps_writing_after_rotation(tmp_path: Path) -> None:
    log = tmp_path / "task.log"
    caps = LogCaps(max_bytes=20_000, keep=50)
    lines = 4000  # 4000 lines of 93 bytes: about 18 rotations at this cap, at least 15 (the child waits)
    child = subprocess.Popen([sys.executable, "-c", _WRITER, str(log), str(lines), str(caps.max_bytes)])
    rotations = 0
    try:
        while child.poll() is None:
            rotations += copytruncate(log, caps)
            time.sleep(0.002)
    finally:
        child.wait(timeout=30)
    assert child.returncode == 0
    assert rotations >= 5, rotations
    assert log.stat().st_size < lines * 93  # truncated while the child wrote
    # every file is whole lines from offset 0 (O_APPEND: no hole of NULs up to the old offset).
    # A copy may read a line the child is still writing (a reader of a regular file can see part
    # of a concurrent write), so a rotated file's last line and the next file's first may be the
    # two parts of one line, as with logrotate's copytruncate; every other line is whole
    files = [log, *(rotated(log, i) for i in range(1, rotations + 1))]
    numbers: list[int] = []
    for f in reversed(files):
        data = f.read_bytes()
        assert f == log or len(data) > caps.max_bytes, f  # rotated only once past the cap
        assert b"\0" not in data, f
        lns = data.decode().splitlines()
        for i, ln in enumerate(lns):
            whole = ln.startswith("line ") and len(ln) == 92
            assert whole or i in (0, len(lns) - 1), (f, i, ln)
            if whole:
                numbers.append(int(ln.split()[1]))
    # in order, and the last line the child wrote is in the current file; lines written between a
    # copy and its truncate may be lost (the accepted trade), so the count may fall a little short
    assert numbers == sorted(numbers) and numbers[-1] == lines - 1
    # (none here in practice; a loaded machine may stall the rotation between the two)
    assert len(numbers) >= lines // 2, (len(numbers), rotations)


def test_rotate_logs_reports_a_file_it_cannot_rotate_and_goes_on(tmp_path: Path) -> None:
    good = tmp_path / "a.log"
    good.write_bytes(b"x" * 20)
    bad = tmp_path / "b.log"
    bad.mkdir()  # a folder named like a log: it cannot be opened for writing
    done, errors = rotate_logs([bad, good], LogCaps(max_bytes=10, keep=1))
    assert done == [good]
    assert errors == [f"cannot rotate log {bad}: Is a directory"]


def test_logs_in_lists_the_logs_not_the_rotated_nor_the_metrics(tmp_path: Path) -> None:
    for name in ("stmgr.log", "stmgr.log.1", "metrics.jsonl", "count-1.log", "zygote.log"):
        (tmp_path / name).write_text("x")
    assert [p.name for p in logs_in(tmp_path)] == ["count-1.log", "stmgr.log", "zygote.log"]
    assert logs_in(tmp_path / "missing") == []


def test_rotate_by_rename_keeps_n_files(tmp_path: Path) -> None:
    f = tmp_path / "metrics.jsonl"
    caps = LogCaps(max_bytes=10, keep=2)
    for gen in range(4):
        f.write_text(f"{gen}" * 11)
        assert rotate_by_rename(f, caps)
        assert not f.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["metrics.jsonl.1", "metrics.jsonl.2"]
    assert rotated(f, 1).read_text() == "3" * 11 and rotated(f, 2).read_text() == "2" * 11


def test_metrics_jsonl_rotates(tmp_path: Path) -> None:
    paths = TopologyPaths.of("wc", tmp_path)
    mm = MetricsManager(topology="wc", container=0, secret=b"s" * 32, state=LocalFsStateManager(tmp_path),
                        paths=paths, log=logging.getLogger("test"))
    mm.log_caps = LogCaps(max_bytes=1000, keep=2)
    sink = tmp_path / "metrics.jsonl"
    line = '{"time": 1, "reports": []}' + " " * 73  # 100 bytes with its newline
    for _ in range(45):
        mm.write_sink_line(sink, line)
    # a file over 1000 bytes (11 lines) is rotated before the next line: at lines 12, 23, 34 and 45
    assert sorted(p.name for p in tmp_path.glob("metrics.jsonl*")) == ["metrics.jsonl", "metrics.jsonl.1",
                                                                       "metrics.jsonl.2"]
    assert sink.read_text() == line + "\n"
    assert rotated(sink, 1).read_text() == (line + "\n") * 11 and rotated(sink, 2).read_text() == (line + "\n") * 11


# --- the executor's periodic check ---


def test_the_executor_rotates_its_containers_logs_on_its_clock(tmp_path: Path) -> None:
    clock = [100.0]
    ex = Executor(topology="wc", container=1, home=tmp_path, log=logging.getLogger("test"),
                  clock=lambda: clock[0], log_check_s=5.0)
    ex.log_caps = LogCaps(max_bytes=10, keep=1)
    logs = ex.paths.container_logs(1)
    logs.mkdir(parents=True)
    (logs / "stmgr.log").write_bytes(b"s" * 20)
    (logs / "metrics.jsonl").write_bytes(b"m" * 20)  # its owner rotates it, not the executor
    own = ex.paths.logs / "executor-1.log"
    own.write_bytes(b"e" * 20)
    ex.rotate_logs_if_due(clock[0])
    assert (logs / "stmgr.log").read_bytes() == b"" and (logs / "stmgr.log.1").read_bytes() == b"s" * 20
    assert own.read_bytes() == b"" and rotated(own, 1).read_bytes() == b"e" * 20
    assert (logs / "metrics.jsonl").stat().st_size == 20
    (logs / "stmgr.log").write_bytes(b"t" * 20)
    ex.rotate_logs_if_due(clock[0] + 4.9)  # not due yet
    assert (logs / "stmgr.log").stat().st_size == 20
    ex.rotate_logs_if_due(clock[0] + 5.0)
    assert (logs / "stmgr.log").stat().st_size == 0 and (logs / "stmgr.log.1").read_bytes() == b"t" * 20
    ex.state.close()


# --- the sweep of temporary files ---


def _age(path: Path, now: float, age_s: float) -> None:
    """Sets the entry's mtime to ``age_s`` before the injected ``now``; for a folder, whose ctime
    counts too and cannot be set, ``now`` is far enough ahead of the real clock."""
    os.utime(path, (now - age_s, now - age_s), follow_symlinks=False)


def test_leftover_rules() -> None:
    assert is_leftover(".tmp-restarts.json.ab_9x0zq", False, 61.0)
    assert not is_leftover(".tmp-restarts.json.ab_9x0zq", False, 59.0)  # maybe being written
    assert not is_leftover(".tmp-restarts.json.abc", False, 600.0)  # not mkstemp's 8 characters
    assert not is_leftover("restarts.json", False, 600.0)
    assert not is_leftover(".wc.lock", False, 600.0)
    assert not is_leftover(".wc.abcdefgh", False, 600.0)  # the old temp names, only where all dot files are ours
    assert is_leftover(".wc.abcdefgh", False, 600.0, legacy=True)
    assert is_leftover(".tmp-gone-7-" + "0f" * 16, True, 600.0)
    assert not is_leftover(".tmp-gone-7-" + "0f" * 16, False, 600.0)  # graves are folders
    assert not is_leftover(".tmp-x.abcdefgh", True, 600.0)  # a folder by a file's name: not ours


def test_the_sweep_removes_only_old_temp_files_of_ours(tmp_path: Path) -> None:
    now = time.time() + 3600
    top = tmp_path / "container-0"
    deep = top / "ckpt" / "7"
    deep.mkdir(parents=True)
    old_ours = [top / ".tmp-restarts.json.k2j4h5g6", deep / ".tmp-3.a1b2c3d4"]
    grave = top / ("ckpt/.tmp-gone-6-" + "ab" * 16)
    grave.mkdir()
    (grave / "3").write_text("state")
    young = top / ".tmp-secret.zzzzzzzz"
    others = [top / "restarts.json", top / ".hidden.lockfile", top / ".tmp-7.crashed", deep / "3"]
    too_deep = deep / "x"
    too_deep.mkdir()
    beyond = too_deep / ".tmp-y.abcdefgh"
    for f in [*old_ours, young, *others, beyond]:
        f.write_text("x")
        _age(f, now, 3600)
    _age(young, now, 30)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / ".tmp-z.abcdefgh").write_text("not under the targets")
    link = top / ".tmp-link.abcdefgh"
    link.symlink_to(outside / ".tmp-z.abcdefgh")
    removed, errors = sweep_temp_files([SweepTarget(top, depth=3)], now)
    assert errors == []
    assert sorted(removed) == sorted([*old_ours, grave])
    for f in [young, *others, beyond, link, outside / ".tmp-z.abcdefgh"]:
        assert os.path.lexists(f), f
    assert not grave.exists()


def test_the_pattern_matches_the_names_mkstemp_makes(tmp_path: Path) -> None:
    # atomic_write_bytes names its temp file with this very call; the pattern relies on
    # CPython's 8 random characters, so a change there shows here
    names = []
    for _ in range(200):
        fd, name = tempfile.mkstemp(dir=tmp_path, prefix=f"{TMP_PREFIX}doc.json.")
        os.close(fd)
        names.append(Path(name).name)
    assert all(is_leftover(n, False, 61.0) for n in names), [n for n in names if not is_leftover(n, False, 61.0)]
    atomic_write_bytes(tmp_path / "doc.json", b"{}")
    assert (tmp_path / "doc.json").read_bytes() == b"{}"


def test_the_state_store_sweeps_its_leftovers_when_it_opens(tmp_path: Path) -> None:
    now = time.time() + 3600
    kind = tmp_path / "state" / "topologies"
    kind.mkdir(parents=True)
    old = [kind / ".tmp-wc.abcdefgh", kind / ".wc.x1y2z3w4"]  # ours, and ours from before .tmp-
    kept = [kind / "wc", kind / ".wc.lock"]
    for f in [*old, *kept]:
        f.write_text("x")
        _age(f, now, 120)
    LocalFsStateManager(tmp_path, wall=lambda: now)
    assert sorted(p.name for p in kind.iterdir()) == [".wc.lock", "wc"]


def test_a_folder_just_renamed_into_a_grave_is_left_to_its_deleter(tmp_path: Path) -> None:
    # checkpoint storage renames a folder to a grave, then removes it: the folder's mtime is
    # old, but the rename set its ctime, so a sweep leaves it to the rmtree under way
    folder = tmp_path / "6"
    folder.mkdir()
    (folder / "3").write_text("state")
    old = time.time() - 3600
    os.utime(folder, (old, old))
    grave = tmp_path / (".tmp-gone-6-" + "ab" * 16)
    folder.rename(grave)
    assert sweep_temp_files([SweepTarget(tmp_path)], time.time()) == ([], [])
    assert sweep_temp_files([SweepTarget(tmp_path)], time.time() + 61) == ([grave], [])
    assert not grave.exists()
