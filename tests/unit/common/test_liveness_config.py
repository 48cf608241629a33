"""The heartbeats and the executor's liveness probe as topology config keys (issue 34): the keys'
errors at submit, verbatim; a configured ``Liveness`` reaching real connections (a serve/connect
pair on 127.0.0.1, a silent peer aborted after the configured timeout, not the default 10 s);
the executor reading its probe's timeout and handing the instances their heartbeats."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from pathlib import Path

import pytest

from heron_py.common.config import (
    EXECUTOR_LIVENESS,
    HEARTBEAT_INTERVAL,
    HEARTBEAT_TIMEOUT,
    ConfigError,
    HeartbeatConfig,
    check_topology_config,
)
from heron_py.common.net import DEFAULT_LIVENESS, BaseHandler, Connection, Counters, Liveness, connect, serve
from heron_py.common.package import build_package, sign_package
from heron_py.planner.model import PackingPlan, TaskPlacement
from heron_py.scheduler.executor import Executor
from heron_py.state.localfs import LocalFsStateManager
from tests.fakes import spout_bolt_topology

SECRET = bytes(range(32))
LOG = logging.getLogger("test.liveness")
FAST = {HEARTBEAT_INTERVAL.name: "0.1", HEARTBEAT_TIMEOUT.name: "0.5"}


# --- the keys ---


def test_the_defaults_are_the_former_constants() -> None:
    assert Liveness.from_config({}) == DEFAULT_LIVENESS == Liveness(2.0, 10.0)
    assert HeartbeatConfig.from_config({}) == HeartbeatConfig(2.0, 10.0)
    assert EXECUTOR_LIVENESS.parse({}) == 15.0


def test_configured_values_are_parsed_from_strings_and_numbers() -> None:
    assert Liveness.from_config(FAST) == Liveness(0.1, 0.5)
    assert Liveness.from_config({HEARTBEAT_INTERVAL.name: 0.5, HEARTBEAT_TIMEOUT.name: 2}) == Liveness(0.5, 2.0)
    # 0 turns the abort off, whatever the interval (the pings still go)
    assert Liveness.from_config({HEARTBEAT_INTERVAL.name: "5", HEARTBEAT_TIMEOUT.name: "0"}) == Liveness(5.0, 0.0)
    assert EXECUTOR_LIVENESS.parse({EXECUTOR_LIVENESS.name: "0"}) == 0.0


def _refused(cfg: dict[str, object]) -> str:
    with pytest.raises(ConfigError) as e:
        check_topology_config(cfg, {})
    return str(e.value)


def test_a_timeout_not_over_twice_the_interval_is_refused_at_submit() -> None:
    assert _refused({HEARTBEAT_TIMEOUT.name: "3"}) == (
        "config heron_py.network.heartbeat.timeout.secs: expected 0 (off) or more than twice "
        "heron_py.network.heartbeat.interval.secs (4), found 3")
    # exactly twice is refused too: an idle peer may ping only every second tick
    assert _refused({HEARTBEAT_INTERVAL.name: "0.5", HEARTBEAT_TIMEOUT.name: "1"}) == (
        "config heron_py.network.heartbeat.timeout.secs: expected 0 (off) or more than twice "
        "heron_py.network.heartbeat.interval.secs (1), found 1")
    check_topology_config({HEARTBEAT_INTERVAL.name: "0.5", HEARTBEAT_TIMEOUT.name: "1.01"}, {})


def test_bad_values_of_each_key_are_one_line() -> None:
    assert _refused({HEARTBEAT_INTERVAL.name: "0"}) == (
        "config heron_py.network.heartbeat.interval.secs: expected a number of seconds > 0, found '0'")
    assert _refused({HEARTBEAT_TIMEOUT.name: "-1"}) == (
        "config heron_py.network.heartbeat.timeout.secs: expected a number of seconds >= 0, found '-1'")
    assert _refused({EXECUTOR_LIVENESS.name: "soon"}) == (
        "config heron_py.executor.liveness.timeout.secs: expected a number of seconds >= 0, found 'soon'")


# --- a configured Liveness on real connections ---


class _Recorder(BaseHandler):
    def __init__(self) -> None:
        self.closed = asyncio.Event()

    def on_close(self, conn: Connection) -> None:
        self.closed.set()


async def _pair(server_lv: Liveness, client_lv: Liveness) -> tuple[asyncio.Server, Counters, _Recorder,
                                                                     Connection, Counters, _Recorder]:
    server_counters, client_counters = Counters(), Counters()
    accepted = _Recorder()
    server = await serve("127.0.0.1", 0, lambda: accepted, SECRET, role="stmgr", log=LOG,
                         counters=server_counters, liveness=server_lv)
    port = server.sockets[0].getsockname()[1]
    client = _Recorder()
    conn = await connect("127.0.0.1", port, client, SECRET, role="stmgr", peer_id="1", log=LOG,
                         counters=client_counters, liveness=client_lv)
    return server, server_counters, accepted, conn, client_counters, client


async def test_the_server_aborts_a_silent_client_after_the_configured_timeout() -> None:
    """The client's heartbeats are off (timeout 0: no timer, so it never sends a byte after its
    handshake): the server, configured at 0.1 / 0.5 s, drops it after 0.5 to 0.6 s, not 10 s."""
    lv = Liveness.from_config(FAST)
    server, server_counters, accepted, conn, _, client = await _pair(lv, Liveness(0.1, 0.0))
    started = time.monotonic()
    try:
        await asyncio.wait_for(client.closed.wait(), 5)
        took = time.monotonic() - started
        assert 0.45 <= took < 1.5, f"dropped after {took:.2f} s; configured 0.5 s"
        assert server_counters.silent_peers == 1
        assert accepted.closed.is_set()
    finally:
        conn.abort("test over")
        server.close()


async def test_the_client_aborts_a_silent_server_after_the_configured_timeout() -> None:
    server, _, _, _, client_counters, client = await _pair(Liveness(0.1, 0.0), Liveness.from_config(FAST))
    started = time.monotonic()
    try:
        await asyncio.wait_for(client.closed.wait(), 5)
        took = time.monotonic() - started
        assert 0.45 <= took < 1.5, f"dropped after {took:.2f} s; configured 0.5 s"
        assert client_counters.silent_peers == 1
    finally:
        server.close()


async def test_idle_peers_with_the_same_config_keep_their_link() -> None:
    """Nothing but heartbeats for six timeouts: the pings (after one to two intervals of
    nothing sent) keep a link of two healthy idle peers open at the tightest accepted ratio."""
    lv = Liveness(0.1, 0.21)
    HeartbeatConfig.from_config({HEARTBEAT_INTERVAL.name: lv.interval_s, HEARTBEAT_TIMEOUT.name: lv.timeout_s})
    server, server_counters, accepted, conn, client_counters, client = await _pair(lv, lv)
    try:
        await asyncio.sleep(1.3)
        assert conn.is_open and not client.closed.is_set() and not accepted.closed.is_set()
        assert server_counters.silent_peers == 0 and client_counters.silent_peers == 0
        assert conn.bytes_in > 0 and conn.bytes_out > 0  # the pings went both ways
    finally:
        conn.abort("test over")
        server.close()


# --- the executor ---


def _stored(tmp_path: Path, config: dict[str, str]) -> Path:
    home = tmp_path / "home"
    state = LocalFsStateManager(home)
    src = tmp_path / "src" / "topo.py"
    src.parent.mkdir()
    src.write_text("X = 1\n")
    topo = dataclasses.replace(spout_bolt_topology(1, 1, name="wc"), config=config)
    state.set_secret("wc", SECRET)
    state.set_topology(topo, SECRET)
    state.set_packing_plan("wc", PackingPlan(2, (TaskPlacement(1, "s", 0, 1), TaskPlacement(2, "b", 0, 0))))
    state.set_package("wc", sign_package(build_package(src, [], []), SECRET))
    state.close()
    return home


def _prepared(home: Path, **kw: float) -> Executor:
    ex = Executor(topology="wc", container=1, home=home, log=LOG, **kw)  # type: ignore[arg-type]
    ex.prepare()
    ex.state.close()
    return ex


def test_the_executor_takes_its_probe_and_the_instances_heartbeats_from_the_topology(tmp_path: Path) -> None:
    home = _stored(tmp_path, {EXECUTOR_LIVENESS.name: "4.5", HEARTBEAT_INTERVAL.name: "0.5",
                              HEARTBEAT_TIMEOUT.name: "2"})
    ex = _prepared(home)
    assert ex.liveness_timeout_s == 4.5
    (task,) = [c for c in ex.children if c.name == "s-1"]
    argv = task.argv
    assert argv[argv.index("--heartbeat-interval") + 1] == "0.5"
    assert argv[argv.index("--heartbeat-timeout") + 1] == "2.0"


def test_the_executor_defaults_and_a_given_timeout(tmp_path: Path) -> None:
    home = _stored(tmp_path, {})
    ex = _prepared(home)
    assert ex.liveness_timeout_s == 15.0
    argv = next(c for c in ex.children if c.name == "s-1").argv
    assert argv[argv.index("--heartbeat-timeout") + 1] == "10.0"
    assert _prepared(home, liveness_timeout_s=0.0).liveness_timeout_s == 0.0  # a test's own wins
