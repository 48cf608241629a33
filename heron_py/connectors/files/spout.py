"""FileTailSpout: the lines of a folder's files, as they are written, with their positions kept.

Each task reads the files it owns (``files.pattern`` in ``files.dir``; new files are picked up
every ``files.poll.ms``) and emits ``file`` (its name in the folder), ``lineno`` (from 0) and
``line`` (without its newline). What survives a restart follows the topology's mode:

- EFFECTIVELY_ONCE: the spout is a stateful component; ``pre_save`` puts every file's
  (line, byte) position in the checkpoint and ``init_state`` reads them back, so after a
  restore it reads again from the checkpoint's positions and a stateful count downstream is
  exact.
- ATLEAST_ONCE: lines are emitted with ids and replayed from memory with backoff when they fail;
  each file's position is written (every ``files.commit.period.ms``, to one small file per data
  file under ``files.positions.dir``) only up to the end of its contiguous run of acked lines
  (the base's OffsetTracker), so a crash re-reads what was not acked and nothing is lost.
- ATMOST_ONCE: the positions read are written periodically; a crash may skip lines.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from heron_py.api.metrics import IMetric
from heron_py.api.spout.spout import Spout
from heron_py.connectors.base import ReplayableSource, RetryPolicy
from heron_py.connectors.common import (
    component_where,
    config_error,
    opt_bool,
    opt_int,
    opt_str,
    retry_policy,
    source_acking,
)
from heron_py.connectors.files.reader import FolderReader, LinePositions, Position, read_fingerprint
from heron_py.connectors.runs import RunIds


@dataclass(frozen=True)
class FileSpoutConfig:
    folder: str
    pattern: str
    encoding: str
    poll_s: float
    commit_period_s: float
    batch: int
    max_pending: int
    positions_dir: str
    retry: RetryPolicy
    # at least once: each read's lines one tuple tree (False) or a tree per line (True)
    ack_per_line: bool = False


def file_spout_config(conf: dict[str, Any], where: str) -> FileSpoutConfig:
    folder = opt_str(conf, where, "files.dir", None)
    if folder is None:
        raise config_error(where, "files.dir", "the folder to read", None)
    encoding = opt_str(conf, where, "files.encoding", "utf-8") or "utf-8"
    try:
        "".encode(encoding)
    except LookupError:
        raise config_error(where, "files.encoding", "a Python codec name", encoding) from None
    return FileSpoutConfig(
        folder=folder, pattern=opt_str(conf, where, "files.pattern", "*") or "*", encoding=encoding,
        poll_s=opt_int(conf, where, "files.poll.ms", 500, 1) / 1000.0,
        commit_period_s=opt_int(conf, where, "files.commit.period.ms", 1000, 1) / 1000.0,
        batch=opt_int(conf, where, "files.batch.lines", 100, 1),
        max_pending=opt_int(conf, where, "files.max.pending", 10_000, 1),
        positions_dir=opt_str(conf, where, "files.positions.dir", None) or os.path.join(folder, ".heron-py-positions"),
        retry=retry_policy(conf, where, "files", initial_ms=100),
        ack_per_line=opt_bool(conf, where, "files.ack.per.line", False),
    )


class _Metrics(IMetric):
    def __init__(self, spout: FileTailSpout) -> None:
        self.spout = spout

    def get_value_and_reset(self) -> dict[str, float]:
        return self.spout.metrics_snapshot()


def other_file(path: str, pos: Position, ino: int | None, tail: str | None) -> str:
    """Why the file now at ``path`` is not the one whose inode ``ino`` and bytes before the
    position (``tail``, a fingerprint) were saved ("" when it is, or cannot be told: a missing
    file, or a file shorter than the position, which the reader treats as truncated)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return ""
    try:
        if ino is not None and ino != os.fstat(fd).st_ino:
            return "another inode"
        now = read_fingerprint(fd, pos[1])
    finally:
        os.close(fd)
    if tail is not None and now is not None and now != tail:
        return "other bytes before it"
    return ""


class FileTailSpout(Spout):
    """Configured by the component's config (``files.*``, see docs/connectors/files.md)."""
    # its positions map file -> (line, byte), each saved by the one task that owned the file: a
    # rescale gives every new task all of them (heron_py/runtime/rescale.py merge), and each
    # takes the positions of the files it owns now
    heron_state_rescale = "merge"

    outputs = ["file", "lineno", "line"]
    clock: Callable[[], float] = time.monotonic
    # bound by the engine's host when nothing needs to see each emit (no hook, no tap): a
    # read's tuples with their message ids in one call (runtime/host.py)
    heron_emit_tracked_many: Callable[[list[Any], Sequence[tuple[str, int]]], None] | None = None
    # a read's lines as one tuple tree under one id (contracts.TrackedRunEmitSource; connectors/runs.py)
    heron_emit_tracked_run: Callable[[list[Any], Any], None] | None = None
    _restored: dict[str, Position] | None = None
    _state: Any = None

    # --- effectively once: heronpy's StatefulComponent methods ---------------------------------
    def init_state(self, stateful_state: Any) -> None:
        self._state = stateful_state
        saved = stateful_state.get("positions")
        self._restored = {f: (int(p[0]), int(p[1])) for f, p in (saved or {}).items()}

    def pre_save(self, checkpoint_id: Any) -> None:
        self._state.put("positions", dict(self.reader.positions))

    # --- lifecycle -----------------------------------------------------------------------------
    def initialize(self, config: dict[str, Any], context: Any) -> None:
        self.context = context
        comp = context.get_component_id()
        self.where = component_where("file spout", context)
        self.cfg = file_spout_config(config, self.where)
        from heron_py.common.config import effectively_once

        # the engine acks only in at-least-once mode (Storm's acker setting included)
        self.tracked = source_acking(config)
        self.mode = "EFFECTIVELY_ONCE" if effectively_once(config) else "ATLEAST_ONCE" if self.tracked \
            else "ATMOST_ONCE"
        tasks = sorted(context.get_component_tasks(comp) or [context.get_task_id()])
        self.pos_dir = os.path.join(self.cfg.positions_dir, f"{context.get_topology_name()}-{comp}")
        restored = self._restored or {}

        def from_checkpoint(file: str) -> Position:
            return restored.get(file, (0, 0))
        initial = from_checkpoint if self.mode == "EFFECTIVELY_ONCE" else self._load_position
        self.reader = FolderReader(self.cfg.folder, self.cfg.pattern, tasks.index(context.get_task_id()), len(tasks),
                                   self.cfg.encoding, self.log, self.where, initial, self._content_reset)
        self.lines = LinePositions(ReplayableSource(retry=self.cfg.retry, max_in_flight=self.cfg.max_pending,
                                                    on_give_up=self._gave_up))
        self.runs = RunIds()
        self.emitted_lines = 0
        self.active = True
        now = self.clock()
        self._next_scan = now
        self._next_commit = now + self.cfg.commit_period_s
        context.register_metric("files", _Metrics(self), 10)

    def activate(self) -> None:
        self.active = True

    def deactivate(self) -> None:
        self.active = False

    def close(self) -> None:
        if self.mode != "EFFECTIVELY_ONCE":
            self._commit()
        self.reader.close()

    # --- the loop ------------------------------------------------------------------------------
    def next_tuple(self) -> None:
        now = self.clock()
        if now >= self._next_scan:
            self.reader.scan()
            if self.tracked:
                for f, p in self.reader.positions.items():
                    self.lines.assign(f, p)
                for f in [f for f in self.lines.source.trackers if f not in self.reader.positions]:
                    self.lines.forget(f)  # deleted, or owned by another task now
            self._next_scan = now + self.cfg.poll_s
        if now >= self._next_commit and self.mode != "EFFECTIVELY_ONCE":
            self._commit()
            self._next_commit = now + self.cfg.commit_period_s
        if not self.active:
            time.sleep(0.01)
            return
        if self.tracked:
            for key, line in self.lines.source.due_retries(now):
                self.emit([line.file, line.number, line.text], tup_id=key)
            lines = self.reader.read(self.cfg.batch, self.lines.source.may_emit)
            if lines:
                self._emit_tracked(lines)
        else:
            lines = self.reader.read(self.cfg.batch)
            for line in lines:
                self.emit([line.file, line.number, line.text])
        self.emitted_lines += len(lines)
        if not lines:
            time.sleep(0.005)  # nothing new: do not spin on the files

    def _emit_tracked(self, lines: list[Any]) -> None:
        """A read's lines with their ids: in one call of the host's batch emit when it bound
        one (no hook or tap needs each emit), else one ``emit`` per line."""
        rows: list[list[Any]] = []
        keys: list[tuple[str, int]] = []
        for line, key in zip(lines, self.lines.emitted_many(lines), strict=True):
            if key is not None:  # None: stale (already in flight or committed)
                rows.append([line.file, line.number, line.text])
                keys.append(key)
        if not rows:
            return
        if self.heron_emit_tracked_run is not None and not self.cfg.ack_per_line:
            self.heron_emit_tracked_run(rows, self.runs.add(keys))
            return
        if self.heron_emit_tracked_many is not None:
            self.heron_emit_tracked_many(rows, keys)
            return
        for row, key in zip(rows, keys, strict=True):
            self.emit(row, tup_id=key)

    def ack(self, tup_id: Any) -> None:
        if RunIds.is_run(tup_id):  # a read's lines, one tree: each line is done
            self.lines.source.ack_many(self.runs.take(tup_id))
            return
        self.lines.source.ack((tup_id[0], tup_id[1]))

    def heron_ack_many(self, tup_ids: list[Any]) -> None:
        """``ack`` for a result frame's acked ids at once (the engine calls it instead of ``ack``
        per id when no hook must see each ack); the ids as emitted: (file, line number), or a
        read's id (an int) for all of its lines."""
        self.lines.source.ack_many(self.runs.expand(tup_ids))

    def fail(self, tup_id: Any) -> None:
        now = self.clock()
        if RunIds.is_run(tup_id):  # each line of the read fails, and is retried on its own
            for key in self.runs.take(tup_id):
                self.lines.source.fail(key, now)
            return
        self.lines.source.fail((tup_id[0], tup_id[1]), now)

    def _content_reset(self, file: str) -> None:
        """The file was truncated or replaced: its old lines in flight are forgotten (their late
        acks are ignored) and its line numbers count again from 0."""
        if self.tracked and file in self.lines.source.trackers:
            self.lines.forget(file)
            self.lines.assign(file, (0, 0))

    def _gave_up(self, file: str, number: int, failures: int, _record: Any) -> None:
        self.log(f"{self.where}: line {number} of {file} failed {failures} times; files.max.retries reached, "
                 f"committing past it", "error")

    # --- positions -----------------------------------------------------------------------------
    def _pos_path(self, file: str) -> str:
        return os.path.join(self.pos_dir, file + ".pos")

    def _load_position(self, file: str) -> Position:
        try:
            with open(self._pos_path(file), encoding="utf-8") as f:
                d = json.load(f)
            pos = int(d["line"]), int(d["byte"])
            ino = None if d.get("ino") is None else int(d["ino"])
            tail = d.get("tail")
            if tail is not None and not isinstance(tail, str):
                raise TypeError(f"tail is {type(tail).__name__}, not a string")
        except FileNotFoundError:
            return 0, 0
        except (ValueError, KeyError, TypeError) as e:
            self.log(f"{self.where}: positions file {self._pos_path(file)} is unreadable ({e}); expected "
                     f'{{"line": N, "byte": N, "ino": N, "tail": "hex"}}; reading {file} from its start', "error")
            return 0, 0
        other = other_file(os.path.join(self.cfg.folder, file), pos, ino, tail)
        if other:
            # replaced while this task was down: the saved position is in another file's bytes
            self.log(f"{self.where}: file {file} is not the file its saved position {pos} was read from ({other}); "
                     f"reading it from its start", "warn")
            return 0, 0
        return pos

    def _commit(self) -> None:
        done = self.lines.commit() if self.tracked else dict(self.reader.positions)
        if not done:
            return
        os.makedirs(self.pos_dir, exist_ok=True)
        for file, (line, byte) in done.items():
            path = self._pos_path(file)
            tmp = f"{path}.tmp-{os.getpid()}"
            with open(tmp, "w", encoding="utf-8") as f:
                json.dump({"line": line, "byte": byte, "ino": self.reader.inode(file),
                           "tail": self.reader.fingerprint(file, byte)}, f)
            os.replace(tmp, path)  # atomic: a crash leaves the old position or the new one

    def metrics_snapshot(self) -> dict[str, float]:
        out: dict[str, float] = {"lines": float(self.emitted_lines), "files": float(len(self.reader.positions))}
        self.emitted_lines = 0
        out.update({k: float(v) for k, v in self.lines.source.stats.take().items()})
        out["pending"] = float(len(self.lines.source.pending))
        lag = 0
        for f, (_n, byte) in self.reader.positions.items():
            try:
                lag += max(0, os.stat(os.path.join(self.cfg.folder, f)).st_size - byte)
            except OSError:
                pass
        out["lag-bytes"] = float(lag)
        return out
