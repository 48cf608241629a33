"""The multilang subprocess: its pipes and the threads that serve them.

A reader thread decodes stdout into an inbox of values (the execution thread validates and
applies them: emits, acks and fails must happen on the task's own thread). A stderr thread
keeps the last ``STDERR_LINES`` lines (every error names them) and logs each line, as
Storm's ShellProcess does. A bolt also has a writer thread: the execution thread queues
encoded messages (tuples bounded by ``max_pending``, task ids and heartbeats first) and never
blocks on the pipe; a spout writes on its own thread, since it waits for the answer anyway.
"""

from __future__ import annotations

import collections
import logging
import os
import queue
import subprocess
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from heron_py.multilang.codec import decoder
from heron_py.multilang.errors import ProtocolError, ShellError

STDERR_LINES = 20
READ_CHUNK = 64 * 1024
# values decoded and not yet taken by the task's thread: a subprocess that writes faster than
# its task applies its commands blocks on its stdout pipe, as Storm's ShellProcess would, instead
# of growing the task's memory without bound
INBOX_MAX = 10_000


class Closed:
    """In the inbox after the last value: why the conversation ended."""

    def __init__(self, reason: str) -> None:
        self.reason = reason


class ShellProcess:
    def __init__(self, command: list[str], cwd: Path, serializer: str, max_bytes: int, log: logging.Logger,
                 where: str, max_pending: int = 100, env: Mapping[str, str] | None = None) -> None:
        self.command = command
        self.where = where
        self._log = log
        self._decoder = decoder(serializer, max_bytes)
        self.inbox: queue.Queue[Any] = queue.Queue(maxsize=INBOX_MAX)
        self.stderr_tail: collections.deque[str] = collections.deque(maxlen=STDERR_LINES)
        self._max_pending = max_pending
        self._cond = threading.Condition()
        self._write_lock = threading.Lock()  # one whole message at a time on stdin
        self._urgent: collections.deque[bytes] = collections.deque()
        self._pending: collections.deque[bytes] = collections.deque()
        self._closing = False
        try:
            self.proc = subprocess.Popen(command, cwd=str(cwd), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=subprocess.PIPE, bufsize=0, env=env)
        except OSError as e:
            raise ShellError(f"{where}: cannot start the multilang subprocess {command} in {cwd}: {e}") from e
        self._threads = [threading.Thread(target=self._read, name=f"{where} stdout", daemon=True),
                         threading.Thread(target=self._read_stderr, name=f"{where} stderr", daemon=True)]
        for t in self._threads:
            t.start()
        self._writer: threading.Thread | None = None
        # called by the reader thread after it queued input (the driver's coalesced wake)
        self.on_input: Callable[[], None] | None = None

    @property
    def pid(self) -> int:
        return self.proc.pid

    # reading

    def _read(self) -> None:
        out = self.proc.stdout
        assert out is not None
        fd = out.fileno()
        try:
            while True:
                data = os.read(fd, READ_CHUNK)
                if not data:
                    self._decoder.finish()
                    break
                values = self._decoder.feed(data)
                for value in values:
                    try:
                        self.inbox.put_nowait(value)
                    except queue.Full:
                        if self.on_input is not None:
                            self.on_input()  # wake the task's thread before waiting for room
                        self.inbox.put(value)
                if values and self.on_input is not None:
                    self.on_input()
        except ProtocolError as e:
            self.inbox.put(Closed(str(e)))
            return
        except OSError as e:
            self.inbox.put(Closed(f"reading its stdout failed: {e}"))
            return
        self.inbox.put(Closed("the subprocess closed its stdout" + self._exit_note()))

    def _exit_note(self) -> str:
        try:
            return f" and exited with code {self.proc.wait(timeout=2.0)}"
        except subprocess.TimeoutExpired:
            return " (still running)"

    def _read_stderr(self) -> None:
        err = self.proc.stderr
        assert err is not None
        for raw in iter(err.readline, b""):
            line = raw.decode("utf-8", "replace").rstrip("\r\n")
            self.stderr_tail.append(line)
            self._log.info("ShellLog pid:%d stderr: %s", self.proc.pid, line)

    # writing

    def write_now(self, data: bytes) -> None:
        """Writes on the caller's thread: the handshake, a spout's commands, and a bolt's task
        ids (the subprocess waits for those, reading its stdin, so the write cannot block for
        long; it goes between two whole messages of the writer thread)."""
        stdin = self.proc.stdin
        assert stdin is not None
        try:
            with self._write_lock:
                stdin.write(data)
        except OSError as e:
            raise ShellError(self.failure(f"writing to its stdin failed ({e})")) from None

    def start_writer(self) -> None:
        self._writer = threading.Thread(target=self._write_loop, name=f"{self.where} stdin", daemon=True)
        self._writer.start()

    def offer(self, data: bytes, timeout_s: float) -> bool:
        """Queues a tuple for the writer; False when ``max_pending`` are queued after ``timeout_s``."""
        with self._cond:
            if len(self._pending) >= self._max_pending and not self._cond.wait_for(
                    lambda: len(self._pending) < self._max_pending or self._closing, timeout_s):
                return False
            self._pending.append(data)
            self._cond.notify_all()
            return True

    def offer_urgent(self, data: bytes) -> None:
        """Task ids and heartbeats: before queued tuples (Storm's ShellBoltMessageQueue), and
        never refused (the subprocess may be blocked waiting for these task ids)."""
        with self._cond:
            self._urgent.append(data)
            self._cond.notify_all()

    def _write_loop(self) -> None:
        stdin = self.proc.stdin
        assert stdin is not None
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._urgent or self._pending or self._closing)
                if self._closing:
                    return
                data = self._urgent.popleft() if self._urgent else self._pending.popleft()
                self._cond.notify_all()
            try:
                with self._write_lock:
                    stdin.write(data)
            except OSError as e:
                self.inbox.put(Closed(f"writing to its stdin failed ({e})" + self._exit_note()))
                return

    def unwritten(self) -> int:
        """Tuples queued for the writer (urgent messages go before them)."""
        with self._cond:
            return len(self._pending)

    # the end

    def failure(self, reason: str) -> str:
        """Kills the subprocess and says why, with the tail of its stderr."""
        self.kill()
        self._threads[1].join(timeout=2.0)  # the rest of stderr, up to its end
        code = self.proc.poll()
        tail = list(self.stderr_tail)
        lines = "\n  ".join(tail)
        shown = f"last {len(tail)} lines of its stderr:\n  {lines}" if tail else "its stderr was empty"
        return (f"{self.where}: multilang subprocess {self.command} (pid {self.proc.pid}) failed: {reason}; "
                f"killed (exit code {code}); {shown}")

    def kill(self) -> None:
        self._stop_writer()
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()

    def close(self, grace_s: float = 1.0) -> None:
        """Storm's destroy: SIGTERM, then SIGKILL after ``grace_s``."""
        self._stop_writer()
        for f in (self.proc.stdin,):
            try:
                if f is not None:
                    f.close()  # EOF: the adapters exit on it
            except OSError:
                pass
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def _stop_writer(self) -> None:
        with self._cond:
            self._closing = True
            self._cond.notify_all()

