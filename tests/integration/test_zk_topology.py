"""A topology on the ZooKeeper state manager (a real server) outlives the death of any of its
processes: kill -9 of the topology master (the standby takes over), a ZooKeeper restart, and
kill -9 of a stream manager and of an instance. In at-least-once mode nothing is lost."""

import json
import os
import re
import signal
import time
from collections import Counter

import psutil
import pytest
import wc_common

from heron_py.common.container_layout import TopologyPaths
from heron_py.state import config as statecfg
from heron_py.state import open_state
from heron_py.testing import run_local
from heron_py.testing.local import read_capture
from tests.conftest import EXAMPLES
from tests.integration.test_reliability import _all_acked, _end_input
from tests.support import run_cli as _cli
from tests.support import wait_for as _wait
from tests.zkserver import raw_client

pytestmark = pytest.mark.integration

# sentences per second. The input has no set end (``--until-file``): every fault below must come
# while input still arrives (else "output goes on" cannot be seen), and on a loaded CI machine the
# master's takeover, the ZooKeeper restart (a JVM start) and the processes' returns took longer
# than a fixed 40 s of input. It ends 2,000 sentences after the last fault.
RATE = 200






def _logs(home, name, pattern):
    return "".join(f.read_text() for f in TopologyPaths.of(name, home).logs.glob(pattern))


def _captured(home, name):
    return len(read_capture(home / "capture" / name, ["count"])["count"])


def _grows(home, name, what, by=200, timeout=30):
    before = _captured(home, name)
    _wait(lambda: _captured(home, name) >= before + by, timeout, f"output to go on after {what}")


def _instances(state, name):
    return (state.get_execution_state(name) or {}).get("instances", {})


def test_standby_master_zookeeper_restart_and_process_kills(heron_home, zk, tmp_path):
    server, zk_spec = zk
    name = "rwc_zk"
    until = tmp_path / "until"
    run_local(EXAMPLES / "reliable_word_count.py",
                    ["--timeout", "4", "--rate", str(RATE), "--until-file", str(until)],
                    home=heron_home, name=name, capture=["count"], keep_running=True,
                    properties={"topology.max.spout.pending": "400", "topology.tmanager.standby": "true"})
    state = open_state(statecfg.resolve(home=heron_home), heron_home)
    raw = raw_client(server.hosts)
    raw.start()
    try:
        # the ephemeral node holds the active master's address and is owned by its session
        node = zk_spec.split("/", 1)[1]
        data, stat = raw.get(f"/{node}/tmanagers/{name}")
        loc = json.loads(data)
        assert stat.ephemeralOwner != 0
        tm = psutil.Process(loc["pid"])
        assert "topology_master" in " ".join(tm.cmdline())
        assert (loc["host"], int(stat.ephemeralOwner)) == ("127.0.0.1", int(loc["owner"], 16))
        es = state.get_execution_state(name)
        assert es["tmanager"]["pid"] == loc["pid"] and es["tmanager"]["port"] == loc["port"]
        _wait(lambda: _captured(heron_home, name) > 500, 30, "first output")

        # 1. kill -9 the active master: a standby takes over
        old_version = es["pplan_version"]
        t0 = time.monotonic()
        os.kill(loc["pid"], signal.SIGKILL)

        def taken_over():
            es2 = state.get_execution_state(name) or {}
            tmi = es2.get("tmanager", {})
            return tmi.get("pid") not in (None, loc["pid"]) and es2.get("pplan_version", 0) > old_version and tmi

        new_tm = _wait(taken_over, 30, "a standby to take over")
        takeover_s = time.monotonic() - t0
        print(f"\nstandby took over in {takeover_s:.2f} s (old master pid {loc['pid']}, new {new_tm['pid']})")
        assert takeover_s < 10.0
        new_loc = state.get_tmanager_location(name)
        assert new_loc.pid == new_tm["pid"]
        _grows(heron_home, name, "the master's death")
        status = _cli(heron_home, "status", "local", name)
        assert status.returncode == 0, status.stderr
        assert f"tmanager: {new_loc.host}:{new_loc.port} pid {new_loc.pid}" in status.stdout

        # 2. restart the ZooKeeper server: the master's node is there again afterwards
        server.stop()
        time.sleep(2)
        server.start()
        _wait(lambda: state.get_tmanager_location(name) is not None, 30, "the master's node after the restart")
        _grows(heron_home, name, "the ZooKeeper restart")

        # 3. kill -9 the stream manager of container 1 and a split instance
        stmgrs = state.get_execution_state(name)["stmgrs"]
        os.kill(stmgrs["1"]["pid"], signal.SIGKILL)
        _wait(lambda: (state.get_execution_state(name) or {}).get("stmgrs", {}).get("1", {}).get("pid")
              not in (None, stmgrs["1"]["pid"]), 30, "stream manager 1 to come back")
        _grows(heron_home, name, "the stream manager's death")
        split_task, split_pid = next((t, i["pid"]) for t, i in _instances(state, name).items()
                                     if i["component"] == "split")
        os.kill(split_pid, signal.SIGKILL)
        _wait(lambda: _instances(state, name)[split_task]["pid"] != split_pid
              and _instances(state, name)[split_task]["ready"], 30, "the split instance to come back")
        mm_file = TopologyPaths.of(name, heron_home).container(1) / "metricsmgr.json"
        mm = json.loads(mm_file.read_text())
        os.kill(mm["pid"], signal.SIGKILL)
        mm2 = _wait(lambda: (d := json.loads(mm_file.read_text()))["pid"] != mm["pid"] and d, 30,
                    "the metrics manager to come back")
        assert mm2["http_port"] == mm["http_port"]  # Prometheus keeps scraping the same target
        _grows(heron_home, name, "the metrics manager's death")

        # at-least-once: every sentence acked exactly once, counts exact
        sentences = _end_input(heron_home, name, until, 2000)
        _wait(lambda: _all_acked(heron_home, name, sentences), 120, "every sentence acked")
        spout_log = _logs(heron_home, name, "container-*/sentence-*.log")
        assert "DUPLICATE ACK" not in spout_log and "FAIL AFTER ACK" not in spout_log
        rows = read_capture(heron_home / "capture" / name, ["count"])["count"]
        unique = {(r["values"][1], r["values"][2]): r["values"][0] for r in rows}
        assert Counter(unique.values()) == wc_common.expected_counts(sentences)
        # the executors restarted each killed process, and said so
        killed = set(re.findall(r"(\S+) exited with code -9", _logs(heron_home, name, "executor-*.log")))
        assert {"stmgr", "metricsmgr", f"split-{split_task}"} <= killed and killed & {"tmanager", "tmanager-standby"}
    finally:
        raw.stop()
        raw.close()
        state.close()


def test_submit_with_unreachable_zookeeper_is_one_clear_error(heron_home, monkeypatch):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("HERON_PY_ZK", f"127.0.0.1:{port}")
    t0 = time.monotonic()
    proc = _cli(heron_home, "submit", "local", str(EXAMPLES / "word_count.py"))
    took = time.monotonic() - t0
    assert proc.returncode == 1
    assert proc.stderr == (f"heron-py: error: ZooKeeper at 127.0.0.1:{port} is not reachable: no session within "
                           f"the connect timeout of 5 s (is the server running? state manager zookeeper at "
                           f"127.0.0.1:{port}/heron-py)\n")
    # the connect timeout plus the CLI's start: it gives up instead of retrying (a loaded CI
    # machine took 10.1 s and 19.5 s, the interpreter's start alone several seconds there)
    assert took < 5 + 25
