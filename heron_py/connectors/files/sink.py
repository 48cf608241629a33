"""FileSink: each input a line in part files of a folder (Flink's FileSink shape; ours).

Files: ``part-COMPONENT-TASK-...`` in ``files.out.dir``, each written whole before it gets its
final name: readers that skip hidden names never see a file being written.

- At least once (and at most once): inputs are batched (``files.out.batch.lines``,
  ``files.out.batch.delay.ms``), appended to the task's in-progress file
  ``.part-COMPONENT-TASK-SEQ.inprogress``, flushed and fsynced, then acked. The in-progress file
  is renamed to its final name ``part-COMPONENT-TASK-SEQ`` when it reaches
  ``files.out.rolling.bytes`` or ``files.out.rolling.ms``, and at a graceful stop. A task
  that starts finds the in-progress files its predecessor left (a kill) and finishes them:
  their complete lines get the final name, a torn last line (never acked) is cut; the spout
  replays what was not acked.
- Effectively once: each checkpoint's lines are written when the checkpoint is complete
  (heron_py/connectors/committing.py), as ``part-COMPONENT-TASK-CHECKPOINT-K`` (K: a file per
  ``files.out.rolling.bytes`` of them): each written to a temporary file, fsynced, renamed. A
  name that exists is that checkpoint's part already written (a restore, a repeated
  notification), so nothing is ever written twice; the rolling time is the checkpoint interval.

A line is the input's ``files.out.field`` when set, else its values joined by
``files.out.separator`` (a tab by default); a value with a newline would split its line, so it
is written with the newline escaped (``\\n``)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from heron_py.api.bolt.bolt import Bolt
from heron_py.common.atomic import atomic_write_bytes, fsync_dir
from heron_py.common.config import effectively_once
from heron_py.connectors.base import BatchPolicy, RetryPolicy
from heron_py.connectors.committing import CommittingSink, StagedInput
from heron_py.connectors.common import (
    LogThrottle,
    Reconnect,
    TupleFields,
    component_where,
    config_error,
    opt_int,
    opt_str,
)
from heron_py.connectors.sink import CountsMetric, SinkLoop


@dataclass(frozen=True)
class FileSinkConfig:
    folder: str
    field: str | None
    separator: str
    encoding: str
    rolling_bytes: int
    rolling_s: float
    batch: int
    batch_delay_s: float
    retry: RetryPolicy


def file_sink_config(conf: dict[str, Any], where: str) -> FileSinkConfig:
    folder = opt_str(conf, where, "files.out.dir", None)
    if folder is None:
        raise config_error(where, "files.out.dir", "the folder to write the part files in", None)
    encoding = opt_str(conf, where, "files.out.encoding", "utf-8") or "utf-8"
    try:
        "".encode(encoding)
    except LookupError:
        raise config_error(where, "files.out.encoding", "a Python codec name", encoding) from None
    return FileSinkConfig(
        folder=folder, field=opt_str(conf, where, "files.out.field", None),
        separator=str(conf.get("files.out.separator", "\t")), encoding=encoding,
        rolling_bytes=opt_int(conf, where, "files.out.rolling.bytes", 128 * 1024 * 1024, 1),
        rolling_s=opt_int(conf, where, "files.out.rolling.ms", 60_000, 1) / 1000.0,
        batch=opt_int(conf, where, "files.out.batch.lines", 1000, 1),
        batch_delay_s=opt_int(conf, where, "files.out.batch.delay.ms", 50, 0) / 1000.0,
        retry=RetryPolicy(initial_s=opt_int(conf, where, "files.out.retry.initial.ms", 100, 0) / 1000.0,
                          max_delay_s=opt_int(conf, where, "files.out.retry.max.ms", 5000, 0) / 1000.0))


def _text(value: Any) -> str:
    return str(value).replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r")


class FileSink(CommittingSink, Bolt):
    outputs: list[Any] = []
    heron_poll_interval_s = 0.01
    clock: Callable[[], float] = time.monotonic
    # --- life ---
    def initialize(self, config: dict[str, Any], context: Any) -> None:
        self.where = component_where("file sink", context)
        self.cfg = file_sink_config(config, self.where)
        self.fields = TupleFields(context)
        self.folder = Path(self.cfg.folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.prefix = f"part-{context.get_component_id()}-{context.get_task_id()}-"
        self.exact = effectively_once(config)
        self.counts = {"written": 0, "files": 0, "write-errors": 0, "skipped-checkpoints": 0}
        context.register_metric("files", CountsMetric(self.counts), 10)
        self.throttle = LogThrottle(self.clock)
        self.conn = Reconnect(self.cfg.retry)
        self.start_commits(self._commit, self._failed_commit)
        self.current: Any = None  # the in-progress file (at least once)
        self.current_path: Path | None = None
        self.current_bytes = 0
        self.opened_at = 0.0
        self.loop: SinkLoop[Any, None] = SinkLoop(BatchPolicy(self.cfg.batch, self.cfg.batch_delay_s), self.conn,
                                                   self.clock, self._append, self._appended, self._failed_append,
                                                   self._recovered)
        if not self.exact:
            self._finish_leftovers()

    def process(self, tup: Any) -> None:
        if self.exact:
            self.committer.commits.add(StagedInput.of(tup))
        else:
            self.loop.add(tup)

    def heron_poll(self) -> None:
        now = self.clock()
        if self.exact:
            self.commit_due()
            return
        self.loop.poll()
        if self.current is not None and now - self.opened_at >= self.cfg.rolling_s and not self.loop.busy():
            self._roll()

    def heron_busy(self) -> bool:
        return self.committer.due if self.exact else self.loop.busy()

    def cleanup(self) -> None:
        # a graceful stop: at least once writes what is batched and finishes its file; under
        # effectively once nothing is written that no complete checkpoint holds
        if not self.exact:
            self.loop.drain()
            if self.current is not None:
                self._roll()

    # --- lines ---
    def _line(self, tup: Any) -> str:
        if self.cfg.field is not None:
            return _text(self.fields.get(tup, self.cfg.field))
        return self.cfg.separator.join(_text(v) for v in tup.values)

    def _data(self, items: list[Any]) -> bytes:
        return "".join(self._line(t) + "\n" for t in items).encode(self.cfg.encoding, errors="replace")

    # --- effectively once: a checkpoint's lines, file by file ---
    def _commit(self, checkpoint_id: int, items: list[StagedInput]) -> None:
        chunks: list[bytes] = []
        part: list[bytes] = []
        size = 0
        for t in items:  # a file per files.out.rolling.bytes, cut between lines
            line = (self._line(t) + "\n").encode(self.cfg.encoding, errors="replace")
            if part and size + len(line) > self.cfg.rolling_bytes:
                chunks.append(b"".join(part))
                part, size = [], 0
            part.append(line)
            size += len(line)
        if part:
            chunks.append(b"".join(part))
        written = 0
        for k, data in enumerate(chunks):
            path = self.folder / f"{self.prefix}{checkpoint_id:020d}-{k:04d}"
            if path.exists():  # this checkpoint's part, written before (a restore, a repeated word)
                continue
            atomic_write_bytes(path, data)
            written += 1
            self.counts["files"] += 1
        if chunks and not written:
            self.counts["skipped-checkpoints"] += 1
        else:
            self.counts["written"] += len(items)
        if self.conn.ok():
            self._recovered()

    def _failed_commit(self, checkpoint_id: int, e: Exception) -> None:
        self._error(e, f"checkpoint {checkpoint_id}'s lines kept and written again after the backoff")

    # --- at least once: an in-progress file, rolled ---
    def _append(self, batch: list[Any]) -> None:
        if self.current is None:
            self._open()
        data = self._data(batch)
        self.current.write(data)
        self.current.flush()
        os.fsync(self.current.fileno())
        self.current_bytes += len(data)

    def _appended(self, batch: list[Any], _result: None) -> None:
        for tup in batch:
            self.ack(tup)
        self.counts["written"] += len(batch)
        if self.current_bytes >= self.cfg.rolling_bytes:
            self._roll()

    def _failed_append(self, batch: list[Any], e: Exception, now: float) -> None:
        for tup in batch:
            self.fail(tup)  # the spout replays them
        self._close_current()  # a fresh file after the backoff: nothing half written goes on
        self._error(e, "its inputs failed (replayed)")

    def _open(self) -> None:
        seq = time.time_ns()  # a new name per file, increasing, across restarts of the task too
        self.current_path = self.folder / f".{self.prefix}{seq:020d}.inprogress"
        # kept open across batches, closed when the file rolls
        self.current = open(self.current_path, "ab")  # noqa: SIM115
        self.current_bytes = 0
        self.opened_at = self.clock()

    def _close_current(self) -> None:
        if self.current is not None:
            try:
                self.current.close()
            except OSError:
                pass
        self.current = None

    def _roll(self) -> None:
        path = self.current_path
        self._close_current()
        if path is not None and path.exists():
            self._finish(path)
        self.current_path = None

    def _finish(self, path: Path) -> None:
        """An in-progress file gets its final name: its name without the dot and the suffix."""
        final = path.with_name(path.name[1:].removesuffix(".inprogress"))
        if path.stat().st_size == 0:
            path.unlink()
            return
        os.replace(path, final)
        fsync_dir(self.folder)
        self.counts["files"] += 1

    def _finish_leftovers(self) -> None:
        """A predecessor's in-progress files (this task killed): complete lines kept (they were
        acked once fsynced), a torn last line cut (never acked: the spout replays it)."""
        for path in sorted(self.folder.glob(f".{self.prefix}*.inprogress")):
            data = path.read_bytes()
            cut = data.rfind(b"\n") + 1
            if cut != len(data):
                with open(path, "r+b") as f:
                    f.truncate(cut)
                    f.flush()
                    os.fsync(f.fileno())
            self._finish(path)

    # --- errors ---
    def _error(self, e: Exception, outcome: str) -> None:
        self.counts["write-errors"] += 1
        self.conn.failed(self.clock())
        line = (f"{self.where}: cannot write to {self.folder} ({type(e).__name__}: {e}); {outcome}; retrying "
                f"with backoff (up to {self.cfg.retry.max_delay_s:g} s)")
        if self.throttle.should_log(line):
            self.log(line, "error")

    def _recovered(self) -> None:
        self.log(f"{self.where}: writing to {self.folder} again")
