"""The wire under attack on a running topology (issue 34, item 1 and its test (a)):

- squat: with XDG_RUNTIME_DIR unset, the old predictable socket path in /tmp is created first by
  another user: the stream managers still start (their sockets are in private folders of their
  own: the container's 0700 ``run`` or a fresh mkdtemp folder) and the topology runs;
- relay: a man in the middle forwards a real instance's handshake to the other container's
  stream manager and injects a TUPLE_BATCH whose pickle would create a file: the frame fails its
  tag, is never unpickled, and is counted; the counts stay exact;
- source: an authenticated instance connection that is not the batch's source task (not
  registered) has its batch refused and counted (``__bad-frames/source``); another role's batch is
  refused by the role routes (a metrics manager may not send batches: ``__bad-frames/role``).
Afterwards every sentence is acked once and the counts equal a plain count."""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import pickle
import time

import pytest

from heron_py.common.container_layout import TopologyPaths
from heron_py.common.frameauth import TAG_SIZE
from heron_py.common.framing import MsgType, encode_batch_frame, encode_frame
from heron_py.common.net import BaseHandler, connect
from heron_py.state import LocalFsStateManager
from heron_py.testing.local import kill_local
from tests.integration.test_reliability import _all_acked, _check_exact, _start
from tests.support import wait_for as _wait
from tests.unit.common.test_frame_auth import Mitm

pytestmark = pytest.mark.integration
NAME = "rwc_wire_attacks"
NOBODY = 65534
LOG = logging.getLogger("test_wire_attacks")


class _Evil:
    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self):
        return (os.system, (f"touch {self.path}",))


def _old_socket_path(home) -> str:
    # where main at 3c2b929 put container 0's socket with XDG_RUNTIME_DIR unset
    port_file = TopologyPaths.of(NAME, home).container(0) / "stmgr.port"
    digest = hashlib.sha256(str(port_file.resolve()).encode()).hexdigest()[:20]
    return f"/tmp/heron-py-{digest}.sock"


def _logs(home) -> str:
    return "".join(f.read_text() for f in TopologyPaths.of(NAME, home).logs.glob("**/*.log"))


async def _relay_and_inject(port: int, secret: bytes, task: int, dest: int, marker: str) -> None:
    evil = encode_batch_frame(dest, task, pickle.dumps([_Evil(marker)]), MsgType.TUPLE_BATCH, 1)

    def inject(whole: bytes) -> list[bytes]:
        return [evil + os.urandom(TAG_SIZE), whole]  # no key: a guessed tag

    mitm = Mitm(port, inject)
    await mitm.start()
    # the real instance's side of the relay: it holds the secret, the relay does not
    conn = await connect("127.0.0.1", mitm.port, BaseHandler(), secret, role="instance", peer_id=str(task), log=LOG)
    conn.send(encode_frame(MsgType.INSTANCE_READY, b""))
    await asyncio.sleep(1.0)
    conn.close()
    assert mitm.server is not None
    mitm.server.close()


async def _batch_from_a_non_source(port: int, secret: bytes, task: int, dest: int, marker: str, role: str) -> None:
    conn = await connect("127.0.0.1", port, BaseHandler(), secret, role=role, peer_id=str(task), log=LOG)
    conn.send(encode_batch_frame(dest, task, pickle.dumps([_Evil(marker)]), MsgType.TUPLE_BATCH, 1))
    await asyncio.sleep(1.0)
    conn.close()


def test_squatted_paths_a_relayed_handshake_and_foreign_batches_change_nothing(heron_home, tmp_path, monkeypatch):
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    # another user took the path main at 3c2b929 would bind (a folder: unlink fails with EISDIR)
    squatted = [_old_socket_path(heron_home)]
    os.makedirs(squatted[0], exist_ok=True)
    for path in squatted:
        os.chown(path, NOBODY, NOBODY)
        os.chmod(path, 0o755)
    _start(heron_home, NAME, split_delay_ms=1.0, rate=600)
    marker = tmp_path / "pwned"
    try:
        state = LocalFsStateManager(heron_home)
        _wait(lambda: state.get_execution_state(NAME) and len(state.get_execution_state(NAME)["stmgrs"]) == 2, 30,
              "both stream managers to register")
        secret = state.get_secret(NAME)
        assert secret is not None
        packing = state.get_packing_plan(NAME)
        in_1 = [t.task_id for t in packing.tasks_in(1)]
        in_0 = [t.task_id for t in packing.tasks_in(0)]
        sm1_port = int(state.get_execution_state(NAME)["stmgrs"]["1"]["port"])
        asyncio.run(_relay_and_inject(sm1_port, secret, in_0[0], in_1[-1], str(marker)))
        asyncio.run(_batch_from_a_non_source(sm1_port, secret, in_1[0], in_1[-1], str(marker), "instance"))
        asyncio.run(_batch_from_a_non_source(sm1_port, secret, 0, in_1[-1], str(marker), "metricsmgr"))
        _wait(lambda: _all_acked(heron_home, NAME), 90, "every sentence acked")
        time.sleep(1.5)  # the count tasks log their totals once a second
        _check_exact(heron_home, NAME)  # the injected word never counted
        assert not marker.exists(), "an injected pickle ran"
        logs = _logs(heron_home)
        assert "failed authentication (changed, replayed, reordered or injected)" in logs
        assert "refused a TUPLE_BATCH from 127.0.0.1" in logs
        assert f"(instance {in_1[0]}, not registered) with source task {in_1[0]}" in logs
        assert "(role 'metricsmgr', id '0'): not a message a metricsmgr may send to the stmgr" in logs
        assert all(os.stat(p).st_uid == NOBODY for p in squatted)  # untouched
    finally:
        kill_local(heron_home, NAME)
        for p in squatted:
            os.rmdir(p) if os.path.isdir(p) else None
