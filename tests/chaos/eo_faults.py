"""Fault injectors of the effectively-once checker (tests/chaos/eo_checker.py): the I/O half.

Each injector acts on the real processes, sockets and file systems of one local topology:
kill -9 and SIGSTOP/SIGCONT of a process found by its command line, a TCP reset of every
connection to a daemon's port (``ss -K``), a checkpoint folder on a small tmpfs filled to the
last byte and freed, a ZooKeeper restart, a master whose clock is behind (libfaketime).
``Capabilities.probe`` finds which of them work on
this machine (root, ``mount``, ``ss -K`` on a real socket pair) so the schedule draws only
faults that can be made, and says why the others are left out.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

# libfaketime (Debian's package faketime), where Debian and Ubuntu put it
FAKETIME_LIBS = (Path("/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"),
                 Path("/usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1"),
                 Path("/usr/lib/faketime/libfaketime.so.1"))
# what a process with its clock behind is named by in the checker's output and its log file
CLOCK_BEHIND_LOG = "tmanager-clock-behind.log"
# daemon variables a replacement must not inherit: the alive file is its executor's child's
# (the executor's probe would read our touches as its child's), and a master never watches
# its executor
NOT_INHERITED = ("HERON_PY_ALIVE_FILE", "HERON_PY_EXECUTOR_PID", "LD_PRELOAD", "FAKETIME")

# the module each daemon runs as (`python -m MODULE`), to the role the checker names it by
MODULES = {"heron_py.scheduler.executor": "executor", "topology_master": "tmanager",
           "stream_manager": "stmgr", "metrics_manager": "metricsmgr", "instance": "instance"}


@dataclass(frozen=True)
class Proc:
    role: str  # instance, stmgr, metricsmgr, tmanager, standby, executor
    label: str  # e.g. "count-5 (c0)", "stmgr c1": stable across restarts, sorted for the seed's pick
    pid: int


def _arg(cmd: list[str], flag: str) -> str | None:
    return cmd[cmd.index(flag) + 1] if flag in cmd and cmd.index(flag) + 1 < len(cmd) else None


def classify(cmd: list[str], pid: int, active_tmanager_pid: int) -> tuple[str, str] | None:
    """(role, label) of a topology process from its command line, or None for another process.
    Pure. The active master is the one the execution state names; any other is a standby (the
    command line cannot tell: a standby that took over keeps its --standby)."""
    module = _arg(cmd, "-m")
    role = MODULES.get(module or "")
    if role is None:
        return None
    container = _arg(cmd, "--container")
    if role == "instance":
        return role, f"{_arg(cmd, '--component')}-{_arg(cmd, '--task-id')}"
    if role == "tmanager":
        return ("tmanager", "tmanager active") if pid == active_tmanager_pid else ("standby", "tmanager standby")
    return role, f"{role} c{container}"


def processes(home: Path, name: str, active_tmanager_pid: int) -> list[Proc]:
    """The live processes of topology ``name`` under ``home``, sorted by label."""
    out: list[Proc] = []
    for p in psutil.process_iter(["pid", "cmdline", "status"]):
        try:
            cmd = list(p.info["cmdline"] or ())
            if p.info["status"] == psutil.STATUS_ZOMBIE:
                continue
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
        if _arg(cmd, "--topology") != name or not any(str(home) in a for a in cmd):
            continue
        found = classify(cmd, int(p.info["pid"]), active_tmanager_pid)
        if found is None:
            continue
        role, label = found
        out.append(Proc(role, label, int(p.info["pid"])))
    return sorted(out, key=lambda q: (q.label, q.pid))


def signal_pid(pid: int, sig: int) -> bool:
    """Sends ``sig``; False when the process is already gone."""
    try:
        os.kill(pid, sig)
        return True
    except ProcessLookupError:
        return False


def kill9(pid: int) -> bool:
    return signal_pid(pid, signal.SIGKILL)


def stop(pid: int) -> bool:
    return signal_pid(pid, signal.SIGSTOP)


def cont(pid: int) -> bool:
    return signal_pid(pid, signal.SIGCONT)


def reset_port(port: int) -> int:
    """Resets every established TCP connection to 127.0.0.1:PORT (``ss -K``); returns how many."""
    out = subprocess.run(["ss", "-K", "-t", "dst", "127.0.0.1", "dport", "=", f":{port}"],
                         capture_output=True, text=True, check=False)
    return out.stdout.count("ESTAB")


class FullDisk:
    """A tmpfs mounted as the checkpoint root; ``fill`` takes every free byte, ``free`` gives
    them back. Root only (mount)."""

    def __init__(self, where: Path, size_mb: int = 16) -> None:
        self.where = where
        self.size_mb = size_mb
        self.filler = where / "zz-filler"

    def mount(self) -> None:
        self.where.mkdir(parents=True, exist_ok=True)
        subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={self.size_mb}m", "tmpfs", str(self.where)],
                       check=True, capture_output=True, text=True)

    def fill(self) -> int:
        """Writes a file until ENOSPC; returns its size in bytes."""
        chunk = b"\0" * (1 << 16)
        n = 0
        with open(self.filler, "wb", buffering=0) as f:
            while True:
                try:
                    n += f.write(chunk)
                except OSError as e:
                    if e.errno != errno.ENOSPC:
                        raise
                    break
            with contextlib.suppress(OSError):  # the last partial block
                while f.write(b"\0" * 512):
                    n += 512
        return n

    def free(self) -> None:
        self.filler.unlink(missing_ok=True)

    def unmount(self) -> None:
        self.free()
        subprocess.run(["umount", "-l", str(self.where)], check=False, capture_output=True)


def faketime_lib() -> Path | None:
    return next((p for p in FAKETIME_LIBS if p.is_file()), None)


def clock_behind_env(env: dict[str, str], lib: Path, behind_s: float, package_dir: Path) -> dict[str, str]:
    """The environment of a master started with its wall clock ``behind_s`` seconds behind
    (pure). ``env`` is the replaced master's /proc environ, which for a forked daemon is its
    executor's start environment (zygote.py): the package goes back on PYTHONPATH, as the
    executor gives its children. The monotonic clock is left alone, as on a host whose clock
    is merely set wrong."""
    out = {k: v for k, v in env.items() if k not in NOT_INHERITED}
    out["PYTHONPATH"] = os.pathsep.join([str(package_dir), *([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])])
    out["PYTHONUNBUFFERED"] = "1"
    out["LD_PRELOAD"] = str(lib)
    out["FAKETIME"] = f"-{behind_s:g}s"
    out["FAKETIME_DONT_FAKE_MONOTONIC"] = "1"
    out["FAKETIME_NO_CACHE"] = "1"
    return out


def master_with_clock_behind(pid: int, lib: Path, behind_s: float, logs: Path) -> subprocess.Popen[bytes]:
    """Replaces the master ``pid`` by one whose wall clock is ``behind_s`` behind: the same
    command line, working folder and environment (plus libfaketime), started at once after a
    kill -9 of the old one. The caller keeps the master's executor stopped meanwhile, so that
    the replacement claims the location before the executor's restart of its own child does
    (that one then waits as a standby). Its log is ``CLOCK_BEHIND_LOG`` in the container's
    folder under ``logs``. The replacement is the caller's child: it reaps it."""
    old = psutil.Process(pid)
    cmd, env, cwd = old.cmdline(), old.environ(), old.cwd()
    kill9(pid)
    # the stopped executor cannot reap it: a zombie is gone for the location's owner check
    deadline = time.monotonic() + 5.0
    with contextlib.suppress(psutil.NoSuchProcess):
        while old.status() != psutil.STATUS_ZOMBIE and time.monotonic() < deadline:
            time.sleep(0.02)
    log_dir = logs / Path(cwd).name
    log_dir.mkdir(parents=True, exist_ok=True)
    with (log_dir / CLOCK_BEHIND_LOG).open("ab") as out:
        return subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=cwd,
                                env=clock_behind_env(env, lib, behind_s, Path(cwd) / "package"))


def parent_executor(pid: int) -> int | None:
    """The executor whose child ``pid`` is (its parent, for a forked or started daemon)."""
    try:
        parent = psutil.Process(pid).parent()
        if parent is not None and "heron_py.scheduler.executor" in " ".join(parent.cmdline()):
            return parent.pid
    except psutil.Error:
        pass
    return None


@dataclass(frozen=True)
class Capabilities:
    """Which fault kinds can be made here, and a note for each that cannot."""

    reset: bool
    disk_full: bool
    notes: tuple[str, ...]
    clock_behind: bool = False

    @staticmethod
    def probe(scratch: Path) -> Capabilities:
        notes: list[str] = []
        reset = _probe_reset(notes)
        disk = _probe_mount(scratch, notes)
        clock = _probe_faketime(notes)
        return Capabilities(reset, disk, tuple(notes), clock)


def _probe_faketime(notes: list[str]) -> bool:
    """libfaketime must load and move Python's wall clock back."""
    lib = faketime_lib()
    if lib is None:
        notes.append("master clock behind skipped: libfaketime is not installed (apt-get install faketime)")
        return False
    env = clock_behind_env(dict(os.environ), lib, 3600, Path("."))
    out = subprocess.run([sys.executable, "-c", "import time; print(time.time())"], env=env,
                         capture_output=True, text=True, check=False)
    try:
        behind = time.time() - float(out.stdout.strip())
    except ValueError:
        behind = 0.0
    if not 3500 <= behind <= 3700:
        notes.append(f"master clock behind skipped: {lib} did not set Python's clock back an hour "
                     f"(found {behind:.0f} s; {out.stderr.strip()[:200]})")
        return False
    return True


def _probe_reset(notes: list[str]) -> bool:
    """ss -K on a real connection: the client side must see the reset."""
    if shutil.which("ss") is None:
        notes.append("TCP resets skipped: ss (iproute2) is not installed")
        return False
    with socket.create_server(("127.0.0.1", 0)) as srv:
        port = srv.getsockname()[1]
        cli = socket.create_connection(("127.0.0.1", port), timeout=2)
        peer, _ = srv.accept()
        try:
            n = reset_port(port)
            cli.settimeout(2)
            try:
                got = cli.recv(1)
                reset_seen = got == b""
            except (ConnectionResetError, ConnectionAbortedError):
                reset_seen = True
            except OSError:
                reset_seen = False
        finally:
            cli.close()
            peer.close()
    if n == 0 or not reset_seen:
        notes.append("TCP resets skipped: ss -K does not reset sockets here (a kernel without "
                     "CONFIG_INET_DIAG_DESTROY, or not root)")
        return False
    return True


def _probe_mount(scratch: Path, notes: list[str]) -> bool:
    if os.geteuid() != 0:
        notes.append("checkpoint folder full skipped: needs root to mount a tmpfs")
        return False
    disk = FullDisk(scratch / "probe-tmpfs", size_mb=1)
    try:
        disk.mount()
    except (subprocess.CalledProcessError, FileNotFoundError) as e:
        err = e.stderr.strip() if isinstance(e, subprocess.CalledProcessError) else str(e)
        notes.append(f"checkpoint folder full skipped: mount -t tmpfs failed: {err}")
        return False
    disk.unmount()
    with contextlib.suppress(OSError):
        disk.where.rmdir()
    return True


def zk_restarter(server: Any, down_s: float = 1.0) -> Callable[[Callable[[], None] | None], None]:
    """A ZooKeeper restart (tests/zkserver.py's server): stop, ``down_s`` down (``during`` runs
    first in that time: a fault that overlaps the restart), start."""
    def restart(during: Callable[[], None] | None) -> None:
        server.stop()
        t0 = time.monotonic()
        if during is not None:
            during()
        time.sleep(max(0.0, down_s - (time.monotonic() - t0)))
        server.start()
    return restart
