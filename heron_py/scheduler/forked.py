"""The executor's side of the fork server (heron_py/scheduler/zygote.py).

``Zygote`` starts the container's zygote and asks it for children; ``ForkedProcess`` is a
child it forked, with the part of ``subprocess.Popen`` the executor uses (pid, poll, wait,
terminate, kill, returncode). The executor is the child's parent (it is a subreaper and the
zygote's intermediate process has exited), so ``os.waitpid`` gives the exit status as for a
child started with Popen.
"""

from __future__ import annotations

import json
import logging
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import IO, Any

from heron_py.scheduler.zygote import ROOM


class ZygoteError(Exception):
    pass


class ForkedProcess:
    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:  # reaped elsewhere: its status is lost, not its exit
                self.returncode = -1
                return self.returncode
            if pid != 0:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired(f"pid {self.pid}", timeout or 0.0)
            time.sleep(0.01)
        assert self.returncode is not None
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.returncode is None:
            os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


class Zygote:
    """The container's zygote process and the requests to it (one at a time, from the
    executor's single thread)."""

    def __init__(self, env: dict[str, str], cwd: Path, log_file: IO[bytes], *, master: bool,
                 log: logging.Logger, timeout_s: float = 60.0) -> None:
        self._log = log
        self._timeout = timeout_s
        argv = [sys.executable, "-m", "heron_py.scheduler.zygote", *(["--master"] if master else []),
                "--room", "." * ROOM]  # room for the children's command lines
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log_file,
                                     env=env, cwd=str(cwd))
        self._buf = b""
        reply = self._read_reply()
        if not reply.get("ready"):
            raise ZygoteError(f"zygote did not start: {reply.get('error', reply)}")

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def spawn(self, module: str, args: list[str], cwd: Path, log_path: Path, title: str) -> ForkedProcess:
        req = {"module": module, "args": args, "cwd": str(cwd), "log": str(log_path), "title": title}
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write((json.dumps(req) + "\n").encode())
            self.proc.stdin.flush()
        except OSError as e:
            raise ZygoteError(f"zygote gone: {e}") from None
        reply = self._read_reply()
        if "pid" not in reply:
            raise ZygoteError(str(reply.get("error", reply)))
        return ForkedProcess(int(reply["pid"]))

    def _read_reply(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        deadline = time.monotonic() + self._timeout
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise ZygoteError(f"zygote did not answer within {self._timeout:.0f} s")
            ready, _, _ = select.select([fd], [], [], left)
            if ready:
                chunk = os.read(fd, 65536)
                if not chunk:
                    raise ZygoteError(f"zygote exited (code {self.proc.poll()})")
                self._buf += chunk
        line, _, self._buf = self._buf.partition(b"\n")
        try:
            reply: dict[str, Any] = json.loads(line)
        except ValueError:
            raise ZygoteError(f"zygote answered {line[:200]!r}, not JSON") from None
        return reply

    def stop(self, grace_s: float = 2.0) -> None:
        """Idempotent: closing stdin ends its loop; its children are not its to stop."""
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            try:
                self.proc.stdin.close()
            except OSError:
                pass
        try:
            self.proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
