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
from collections.abc import Collection
from pathlib import Path
from typing import IO, Any

from heron_py.scheduler.zygote import ROOM, fork_here


class ZygoteError(Exception):
    pass


def reap_orphans(known: Collection[int]) -> list[int]:
    """Reaps the exited children this process did not start: as a child subreaper it adopts
    the orphans of its daemons (such as the multilang subprocess of a killed task), which would
    otherwise stay zombies until it exits. Never waits, and never reaps a pid in ``known`` (its
    own children, whose exit codes their ForkedProcess or Popen reads). Stops at the first
    exited child that is known, so the caller polls its own children first. The pids reaped."""
    reaped: list[int] = []
    while True:
        try:
            info = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:  # no child at all
            return reaped
        if info is None or info.si_pid in known:
            return reaped
        try:
            os.waitpid(info.si_pid, 0)
        except ChildProcessError:
            return reaped
        reaped.append(info.si_pid)


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


def _zygote_argv(master: bool) -> list[str]:
    return [sys.executable, "-m", "heron_py.scheduler.zygote", *(["--master"] if master else [])]


class Zygote:
    """The container's zygote process and the requests to it (one at a time, from the
    executor's single thread). Started with ``python -m`` by the constructor, or forked from
    the executor itself by ``Zygote.forked`` (the executor's memory is then shared too)."""

    def __init__(self, env: dict[str, str], cwd: Path, log_file: IO[bytes], *, master: bool,
                 log: logging.Logger, timeout_s: float = 60.0) -> None:
        argv = [*_zygote_argv(master), "--room", "." * ROOM]  # room for the children's command lines
        proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log_file,
                                env=env, cwd=str(cwd))
        assert proc.stdin is not None and proc.stdout is not None
        self._setup(proc, proc.stdin, proc.stdout.fileno(), log, timeout_s)

    @classmethod
    def forked(cls, *, master: bool, log_path: Path, log: logging.Logger, timeout_s: float = 60.0) -> Zygote:
        """A zygote forked from this process (zygote.fork_here), which must have no thread yet;
        it shows the command line a zygote started with ``python -m`` has."""
        pid, req_fd, rep_fd = fork_here(master, str(log_path), " ".join(_zygote_argv(master)))
        z = cls.__new__(cls)
        z._setup(ForkedProcess(pid), os.fdopen(req_fd, "wb"), rep_fd, log, timeout_s)
        return z

    def _setup(self, proc: subprocess.Popen[bytes] | ForkedProcess, requests: IO[bytes], replies_fd: int,
               log: logging.Logger, timeout_s: float) -> None:
        self._log = log
        self._timeout = timeout_s
        self.proc = proc
        self._requests = requests
        self._replies_fd = replies_fd
        self._buf = b""
        try:
            reply = self._read_reply()
        except ZygoteError:
            self.stop()
            raise
        if not reply.get("ready"):
            self.stop()
            raise ZygoteError(f"zygote did not start: {reply.get('error', reply)}")

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def spawn(self, module: str, args: list[str], cwd: Path, log_path: Path, title: str,
              env: dict[str, str] | None = None) -> ForkedProcess:
        req: dict[str, Any] = {"module": module, "args": args, "cwd": str(cwd), "log": str(log_path),
                               "title": title}
        if env is not None:
            req["env"] = env
        try:
            self._requests.write((json.dumps(req) + "\n").encode())
            self._requests.flush()
        except (OSError, ValueError) as e:
            raise ZygoteError(f"zygote gone: {e}") from None
        reply = self._read_reply()
        if "pid" not in reply:
            raise ZygoteError(str(reply.get("error", reply)))
        return ForkedProcess(int(reply["pid"]))

    def _read_reply(self) -> dict[str, Any]:
        fd = self._replies_fd
        deadline = time.monotonic() + self._timeout
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise ZygoteError(f"zygote did not answer within {self._timeout:.0f} s")
            try:
                ready, _, _ = select.select([fd], [], [], left)
                chunk = os.read(fd, 65536) if ready else None
            except (OSError, ValueError) as e:  # the fd closed by stop()
                raise ZygoteError(f"zygote gone: {e}") from None
            if chunk is not None:
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
        """Idempotent: closing its request pipe ends its loop; its children are not its to stop."""
        if not self._requests.closed:
            try:
                self._requests.close()
            except OSError:
                pass
        try:
            self.proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        if isinstance(self.proc, subprocess.Popen):
            if self.proc.stdout is not None:
                self.proc.stdout.close()
        elif self._replies_fd >= 0:
            os.close(self._replies_fd)
            self._replies_fd = -1
