"""A multilang subprocess driven over its pipes with heron-py's own codec and messages: the
engine's side of the conversation, one message at a time, for the adapter tests."""

from __future__ import annotations

import os
import queue
import subprocess
import threading
from pathlib import Path
from typing import Any

from heron_py.multilang import messages as m
from heron_py.multilang.codec import JsonDecoder, encode
from heron_py.multilang.scripts import subprocess_env

WAIT_S = 10.0


class Child:
    def __init__(self, command: list[str], cwd: Path, env: dict[str, str] | None = None,
                 chunk: int | None = None) -> None:
        """``chunk``: write each message in pieces of this many bytes (the adapter must join them)."""
        self.chunk = chunk
        self.proc = subprocess.Popen(command, cwd=cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, env=env or subprocess_env(os.environ), bufsize=0)
        self.inbox: queue.Queue[Any] = queue.Queue()
        self.stderr = b""
        self._decoder = JsonDecoder()
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._read_stderr, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        while data := os.read(self.proc.stdout.fileno(), 65536):
            try:
                for value in self._decoder.feed(data):
                    self.inbox.put(value)
            except Exception as e:  # the test sees what broke the protocol
                self.inbox.put(e)
                return
        self.inbox.put(EOFError("stdout closed"))

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        while data := os.read(self.proc.stderr.fileno(), 65536):
            self.stderr += data

    def send(self, msg: m.Message) -> None:
        data = encode(m.to_wire(msg), "json")
        assert self.proc.stdin is not None
        step = self.chunk or len(data)
        for i in range(0, len(data), step):
            self.proc.stdin.write(data[i:i + step])
            self.proc.stdin.flush()

    def recv(self, timeout: float = WAIT_S) -> Any:
        try:
            value = self.inbox.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"nothing from the subprocess within {timeout} s; its stderr: "
                                 f"{self.stderr.decode(errors='replace')}") from None
        if isinstance(value, Exception):
            raise AssertionError(f"{value}; its stderr: {self.stderr.decode(errors='replace')}")
        return value

    def command(self, timeout: float = WAIT_S) -> m.Command:
        return m.parse_command(self.recv(timeout))

    def quiet(self, timeout: float = 0.3) -> bool:
        """True when nothing comes within ``timeout`` (the adapter waits for us)."""
        try:
            value = self.inbox.get(timeout=timeout)
        except queue.Empty:
            return True
        self.inbox.put(value)
        return False

    def ended(self, timeout: float = WAIT_S) -> bool:
        """True when the next thing on stdout is its end (no message before it)."""
        try:
            return isinstance(self.inbox.get(timeout=timeout), EOFError)
        except queue.Empty:
            return False

    def handshake(self, pid_dir: Path, conf: dict[str, Any] | None = None,
                  context: dict[str, Any] | None = None) -> int:
        self.send(m.Setup(conf or {"topology.name": "t"}, str(pid_dir),
                          context or {"taskid": 7, "componentid": "c", "task->component": {"7": "c"}}))
        pid = m.parse_pid(self.recv()).pid
        assert pid == self.proc.pid
        return pid

    def close(self) -> int:
        """Closes stdin (as the engine stops a task) and waits for the exit code."""
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            return self.proc.wait(timeout=WAIT_S)
        finally:
            self.kill()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
