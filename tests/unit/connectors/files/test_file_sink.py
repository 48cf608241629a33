"""FileSink: part files written whole before they get their final name. At least once: acked
once fsynced, rolled by size and time, a killed task's in-progress file finished by its
successor with a torn line cut. Effectively once: each checkpoint's lines in files named after
it, written once its checkpoint is complete, exact through a restore between the pre-commit and
the commit and through repeated notifications. The task runs as in an instance (StatefulTask over
a real component host and checkpoint storage)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from heron_py.api.spout.spout import Spout
from heron_py.api.stream import Grouping
from heron_py.api.topology import TopologyBuilder
from heron_py.checkpoint.storage import LocalFsStorage
from heron_py.common.framing import encode_batch_frame, encode_marker
from heron_py.common.serialization import dumps_batch
from heron_py.connectors.base import ConnectorConfigError
from heron_py.connectors.files import FileSink, file_sink_config
from heron_py.planner.model import PhysicalPlan, StmgrLocation, TopologyState
from heron_py.planner.packing import round_robin
from heron_py.runtime.host import HostOptions, make_host
from heron_py.runtime.stateful import StatefulTask
from heron_py.testing import ManualClock
from tests.foreign import Foreign, Ours
from tests.support import mark_saved

LOG = logging.getLogger("test")


class Words(Spout):
    outputs = ["word", "n"]

    def next_tuple(self) -> None:
        pass


def _plan(mode: str, **conf: Any) -> PhysicalPlan:
    b = TopologyBuilder("fs")
    s = b.add_spout("words", Words, par=1)
    b.add_bolt("out", FileSink, par=1, inputs={s: Grouping.SHUFFLE}, config=conf)
    b.set_config({"topology.reliability.mode": mode})
    topo = b.build()
    return PhysicalPlan(topo, round_robin(topo, 1), (StmgrLocation(0, "h", 1, 2),), TopologyState.RUNNING, 1)


def _frame(plan: PhysicalPlan, *pairs: tuple[str, int]) -> bytes:
    me, src = plan.packing.tasks_of("out")[0], plan.packing.tasks_of("words")[0]
    return encode_batch_frame(me, src, dumps_batch([("default", [w, n]) for w, n in pairs]), count=len(pairs))


def _lines(folder: Path) -> list[str]:
    """Every line of the final part files, in name order (hidden in-progress files skipped)."""
    out: list[str] = []
    for p in sorted(folder.iterdir()):
        if not p.name.startswith("."):
            out += p.read_text().splitlines()
    return out


def _visible(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if not p.name.startswith("."))


# --- effectively once ---
class Task:
    def __init__(self, plan: PhysicalPlan, storage: LocalFsStorage) -> None:
        self.plan = plan
        self.me, self.src = plan.packing.tasks_of("out")[0], plan.packing.tasks_of("words")[0]
        self.host = make_host(plan, self.me, lambda frames: None, HostOptions())
        self.rt = StatefulTask(self.host, storage, "fs", lambda frames: None, align_bytes=1 << 20, log=LOG)

    def start(self, restore_id: int, checkpoint_id: int) -> None:
        self.rt.restore(restore_id, checkpoint_id)
        self.rt.start_processing(restore_id)


def test_effectively_once_each_checkpoints_lines_once_through_a_restore(tmp_path: Path) -> None:
    out = tmp_path / "out"
    storage = LocalFsStorage(tmp_path / "ckpt")
    plan = _plan("EFFECTIVELY_ONCE", **{"files.out.dir": str(out)})
    old = Task(plan, storage)
    old.start(1, 0)
    old.rt.on_batch(_frame(plan, ("a", 1), ("b", 2)))
    old.rt.on_marker(encode_marker(old.me, old.src, 5))
    mark_saved(storage, "fs", 5)
    old.rt.on_batch(_frame(plan, ("c", 3)))  # after checkpoint 5: rolled back below
    assert _visible(out) == []  # nothing before the master's word
    new = Task(plan, storage)  # killed before the word: the relaunched task restores 5
    new.start(2, 5)
    new.host.user.heron_poll()
    assert _lines(out) == ["a\t1", "b\t2"]
    assert _visible(out) == [f"part-out-{new.me}-{5:020d}-0000"]
    old.rt.checkpoint_committed(5)  # the zombie's late word: the file is there, nothing written twice
    new.rt.checkpoint_committed(5)
    new.rt.on_batch(_frame(plan, ("c", 3)))  # the replay
    new.rt.on_marker(encode_marker(new.me, new.src, 8))
    new.rt.checkpoint_committed(8)
    assert _lines(out) == ["a\t1", "b\t2", "c\t3"]
    assert new.host.user.counts["written"] == 3


def test_effectively_once_a_large_checkpoint_rolls_into_several_files(tmp_path: Path) -> None:
    out = tmp_path / "out"
    storage = LocalFsStorage(tmp_path / "ckpt")
    plan = _plan("EFFECTIVELY_ONCE", **{"files.out.dir": str(out), "files.out.rolling.bytes": 8,
                                        "files.out.field": "word"})
    t = Task(plan, storage)
    t.start(1, 0)
    t.rt.on_batch(_frame(plan, ("aaa", 1), ("bbb", 2), ("ccc", 3)))
    t.rt.on_marker(encode_marker(t.me, t.src, 4))
    t.rt.checkpoint_committed(4)
    assert _visible(out) == [f"part-out-{t.me}-{4:020d}-{k:04d}" for k in range(2)]
    assert _lines(out) == ["aaa", "bbb", "ccc"]


# --- at least once ---
class Acks:
    def __init__(self) -> None:
        self.acked: list[Any] = []
        self.failed: list[Any] = []


def _alo(tmp_path: Path, **conf: Any) -> tuple[Any, ManualClock, Path, PhysicalPlan]:
    out = tmp_path / "out"
    plan = _plan("ATLEAST_ONCE", **{"files.out.dir": str(out), **conf})
    host: Any = make_host(plan, plan.packing.tasks_of("out")[0], lambda frames: None, HostOptions())
    clock = ManualClock(100.0)
    host.user.clock = clock
    host.initialize()
    return host, clock, out, plan


def test_at_least_once_lines_are_final_after_a_roll_and_written_before_they_are_acked(tmp_path: Path) -> None:
    host, clock, out, plan = _alo(tmp_path, **{"files.out.batch.lines": 2, "files.out.rolling.ms": 1000})
    sink = host.user
    acked: list[Any] = []
    sink.ack = acked.append
    host.process_frame(_frame(plan, ("a", 1), ("b", 2)))  # a full batch: written and fsynced, then acked
    assert [t.values for t in acked] == [["a", 1], ["b", 2]]
    [inprogress] = [p for p in out.iterdir()]
    assert inprogress.name.startswith(".part-out-") and inprogress.read_text() == "a\t1\nb\t2\n"
    assert _visible(out) == []
    clock.t += 1.0
    sink.heron_poll()  # the rolling time passed: the file gets its final name
    assert _lines(out) == ["a\t1", "b\t2"] and len(_visible(out)) == 1
    host.process_frame(_frame(plan, ("c\nd", 3)))  # a newline in a value stays in its line
    host.close()  # a graceful stop writes the batch and finishes its file
    assert _lines(out) == ["a\t1", "b\t2", "c\\nd\t3"]


def test_a_killed_tasks_in_progress_file_is_finished_and_its_torn_line_cut(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    plan = _plan("ATLEAST_ONCE", **{"files.out.dir": str(out)})
    me = plan.packing.tasks_of("out")[0]
    left = out / f".part-out-{me}-{1:020d}.inprogress"
    left.write_bytes(b"a\t1\nb\t2\nc\t")  # the kill came mid-write of a line never acked
    other = out / f".part-out-{me + 1}-{1:020d}.inprogress"  # another task's: not ours to touch
    other.write_bytes(b"x\n")
    host: Any = make_host(plan, me, lambda frames: None, HostOptions())
    host.initialize()
    assert _visible(out) == [f"part-out-{me}-{1:020d}"]
    assert (out / f"part-out-{me}-{1:020d}").read_text() == "a\t1\nb\t2\n"
    assert other.exists()
    host.close()


def test_a_file_that_cannot_be_written_fails_its_inputs_for_replay(tmp_path: Path) -> None:
    host, _clock, out, plan = _alo(tmp_path, **{"files.out.batch.lines": 1})
    out.rename(tmp_path / "elsewhere")
    out.write_text("a file where the folder was")  # no file can be made in it (root or not)
    failed: list[Any] = []
    lines: list[tuple[str, str]] = []
    host.user.fail = failed.append
    host.user.log = lambda line, level="info": lines.append((line, level))
    host.process_frame(_frame(plan, ("a", 1)))
    assert len(failed) == 1 and host.user.counts["write-errors"] == 1
    assert lines == [(Ours(f"file sink 'out' task {plan.packing.tasks_of('out')[0]}: cannot write to {out} (",
                           Foreign("NotADirectoryError"), "); its inputs failed (replayed); retrying with backoff "
                                                          "(up to 5 s)"), "error")]


def test_a_missing_folder_setting_is_one_line() -> None:
    with pytest.raises(ConnectorConfigError) as e:
        file_sink_config({}, "file sink 'out' task 3")
    assert str(e.value) == "file sink 'out' task 3: config files.out.dir: expected the folder to write the part " \
                           "files in, found None"


def test_effectively_once_a_commit_that_fails_is_kept_and_written_after_the_backoff(tmp_path: Path) -> None:
    out = tmp_path / "out"
    storage = LocalFsStorage(tmp_path / "ckpt")
    plan = _plan("EFFECTIVELY_ONCE", **{"files.out.dir": str(out), "files.out.retry.initial.ms": 100})
    t = Task(plan, storage)
    clock = ManualClock(100.0)
    t.host.user.clock = clock
    t.start(1, 0)
    t.rt.on_batch(_frame(plan, ("a", 1)))
    t.rt.on_marker(encode_marker(t.me, t.src, 3))
    out.rename(tmp_path / "elsewhere")
    out.write_text("a file where the folder was")
    t.rt.checkpoint_committed(3)  # the write fails: kept, not dropped
    assert t.host.user.counts["write-errors"] == 1 and t.host.user.heron_busy()
    out.unlink()
    (tmp_path / "elsewhere").rename(out)
    t.host.user.heron_poll()  # within the backoff: not tried again yet
    assert t.host.user.counts["write-errors"] == 1 and t.host.user.heron_busy()
    clock.t += 0.2
    t.host.user.heron_poll()
    assert _lines(out) == ["a\t1"] and not t.host.user.heron_busy()
