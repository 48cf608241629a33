"""A stream manager that gets its first physical plan while it holds frames for a local
instance sends that instance the plan first: an instance waiting for its first plan drops
anything that comes before it (instance/execution.py), so a spout's first batch, sent to a
container whose stream manager had no plan yet, was lost at a topology's start (seen in CI,
`test_fused_word_count_is_exact[off]`: 200 of 600 words)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

from heron_py.common.framing import MsgType, encode_batch_frame, frame_type
from heron_py.state.localfs import LocalFsStateManager
from stream_manager.main import StreamManager
from tests.fakes import FakeConn, word_count_plan


def test_the_first_plan_reaches_a_local_instance_before_the_frames_held_for_it(tmp_path: Path) -> None:
    sm = StreamManager(topology="wc", container=0, secret=b"s" * 32, state=LocalFsStateManager(tmp_path / "state"),
                       port_file=tmp_path / "stmgr.port", log=logging.getLogger("stmgr[0]"))
    count_task = FakeConn()
    sm.instances.add(count_task, 3, pid=1)  # task 3 (a count) registered before the plan came
    first = encode_batch_frame(3, 2, b"words", MsgType.TUPLE_BATCH, 5)
    sm.forwarder.route(first)  # a spout's batch from the other container: held, no plan yet
    assert count_task.sent == []
    sm.clique.set_plan = lambda plan: None  # no peer connections here
    sm.on_new_pplan(json.dumps(word_count_plan().to_dict()).encode())
    assert [frame_type(f) for f in count_task.sent] == [MsgType.NEW_PHYSICAL_PLAN, MsgType.TUPLE_BATCH]
    assert count_task.sent[1] == first and sm.forwarder.dropped_tuples == 0
