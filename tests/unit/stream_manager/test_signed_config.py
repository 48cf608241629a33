"""The stream manager and the metrics manager read the topology document only under the secret
of their container (not the one in the state store, which whoever may write the store can
replace with the document): a document changed and signed anew there, turning the heartbeats
off, is refused with one line and exit code 2."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from pathlib import Path

import pytest

from heron_py.common.container_layout import TopologyPaths
from heron_py.common.daemon import FatalError
from heron_py.planner.model import TopologyDef
from heron_py.state import LocalFsStateManager, StateManager, StateManagerError
from heron_py.state import config as statecfg
from heron_py.state.stores import run_with_state
from metrics_manager.main import MetricsManager
from stream_manager import main as stmgr_main
from tests.fakes import word_count_plan

SECRET = b"s" * 32
FORGER = b"f" * 32
REFUSAL = ("topology 'wc': refusing the stored topology document: expected an HMAC-SHA256 signature under the "
           "topology secret, found a signature that does not match the document (it was changed in the state store "
           "after submit, or stored by a heron-py that did not sign it; resubmit the topology)")


def _topology() -> TopologyDef:
    topo = word_count_plan().topology
    return dataclasses.replace(topo, name="wc")


def _forged(home: Path) -> StateManager:
    """The state store after someone with write access to it (not to the containers) replaced the
    document, heartbeats off, and signed it under a secret they stored beside it."""
    state = LocalFsStateManager(home)
    state.set_secret("wc", SECRET)
    state.set_topology(_topology())
    state.set_secret("wc", FORGER)
    topo = _topology()
    state.set_topology(dataclasses.replace(topo, config={**topo.config,
                                                         "heron_py.network.heartbeat.timeout.secs": "0"}))
    return state


def test_the_stream_manager_refuses_a_document_not_signed_under_its_secret(tmp_path) -> None:
    state = _forged(tmp_path)
    with pytest.raises(StateManagerError) as e:
        stmgr_main._link_config(state, "wc", SECRET)
    assert str(e.value) == REFUSAL


def test_a_daemon_whose_state_read_is_refused_exits_2_with_one_line(tmp_path, caplog) -> None:
    args = statecfg.daemon_parser("stream_manager").parse_args(
        ["--topology", "wc", "--secret-file", str(tmp_path / "secret"), "--home", str(tmp_path),
         "--state-manager", "localfs"])

    def make(state: StateManager) -> stmgr_main.StreamManager:
        raise StateManagerError(REFUSAL)

    with caplog.at_level(logging.ERROR):
        assert run_with_state(args, logging.getLogger("stmgr[0]"), make) == 2
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == [REFUSAL]


def test_the_stream_manager_reads_a_document_signed_under_its_secret(tmp_path) -> None:
    state = LocalFsStateManager(tmp_path)
    state.set_secret("wc", SECRET)
    topo = _topology()
    state.set_topology(dataclasses.replace(topo, config={**topo.config,
                                                         "heron_py.network.heartbeat.timeout.secs": "0"}))
    assert stmgr_main._link_config(state, "wc", SECRET).liveness.timeout_s == 0


def test_the_metrics_manager_refuses_a_document_not_signed_under_its_secret(tmp_path) -> None:
    state = _forged(tmp_path)
    mm = MetricsManager(topology="wc", container=0, secret=SECRET, state=state,
                        paths=TopologyPaths.of("wc", tmp_path), log=logging.getLogger("metricsmgr[0]"))

    async def start() -> None:
        try:
            await mm.start()
        finally:
            mm.stop()

    with pytest.raises(FatalError) as e:
        asyncio.run(start())
    assert str(e.value) == f"metrics manager: {REFUSAL}"
