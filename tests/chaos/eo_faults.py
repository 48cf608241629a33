"""Fault injectors of the effectively-once checker (tests/chaos/eo_checker.py): the I/O half.

Each injector acts on the real processes, sockets and file systems of one local topology:
kill -9 and SIGSTOP/SIGCONT of a process found by its command line, a TCP reset of every
connection to a daemon's port (``ss -K``), a checkpoint folder on a small tmpfs filled to the
last byte and freed, a ZooKeeper restart, a master whose clock is behind (libfaketime), the
sink servers (PostgreSQL, Redis) and the Redis checkpoint store restarted or frozen
(``Servers``); the network faults are in eo_netns.py. ``Capabilities.probe`` finds which of
them work on this machine (root, ``mount``, ``ss -K`` on a real socket pair, the checker's own
network namespace) and ``Servers.probe`` which servers can run, so the schedule draws only
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
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from tests.chaos import eo_netns

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
    container: int | None = None  # its --container (a partition cuts a container's processes)


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


def _topology_processes(home: Path, name: str) -> Iterator[tuple[int, list[str]]]:
    """(pid, command line) of every live process of topology ``name`` under ``home``."""
    for p in psutil.process_iter(["pid", "cmdline", "status"]):
        try:
            cmd = list(p.info["cmdline"] or ())
            if p.info["status"] == psutil.STATUS_ZOMBIE:
                continue
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
        if _arg(cmd, "--topology") == name and any(str(home) in a for a in cmd):
            yield int(p.info["pid"]), cmd


def processes(home: Path, name: str, active_tmanager_pid: int) -> list[Proc]:
    """The live processes of topology ``name`` under ``home``, sorted by label."""
    out: list[Proc] = []
    for pid, cmd in _topology_processes(home, name):
        found = classify(cmd, pid, active_tmanager_pid)
        if found is None:
            continue
        role, label = found
        container = _arg(cmd, "--container")
        out.append(Proc(role, label, pid, int(container) if container is not None else None))
    return sorted(out, key=lambda q: (q.label, q.pid))


def leftovers(home: Path, name: str) -> list[int]:
    """Every live process of topology ``name`` under ``home`` (its supervisor too), for when
    ``heron-py kill`` failed: the run must not leave a topology running behind it."""
    return sorted(pid for pid, _ in _topology_processes(home, name))


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
    partition: bool = False  # iptables in the checker's own network namespace (partitions, half-open links)

    @staticmethod
    def probe(scratch: Path, netns: str | None = None, netns_why: str = "") -> Capabilities:
        """``netns``: the namespace the checker runs in (eo_netns.create), or None and why not."""
        notes: list[str] = []
        reset = _probe_reset(notes)
        disk = _probe_mount(scratch, notes)
        clock = _probe_faketime(notes)
        partition = _probe_partition(netns, netns_why, notes)
        return Capabilities(reset, disk, tuple(notes), clock, partition)


def _probe_partition(netns: str | None, why: str, notes: list[str]) -> bool:
    """The checker must run inside the namespace its rules go to: else a rule would cut nothing
    of the topology's (and the host's firewall is never touched: rules go through ip netns exec)."""
    if netns is None:
        notes.append(f"partitions and half-open links skipped: {why or 'the checker runs outside a network namespace'}")
        return False
    if not eo_netns.inside(netns):
        notes.append(f"partitions and half-open links skipped: this process is not in network namespace {netns}, "
                     f"where its rules would go")
        return False
    return True


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


# --- the servers besides the topology's: the sinks' and the checkpoint store -----------------

SINK_SERVERS = ("postgres", "redis")  # the sinks with a server (the file sink has none)
STORE = "store"  # the Redis checkpoint store


class Servers:
    """The real servers of one run (tests/postgres_server.py, tests/redis_server.py): the sinks'
    PostgreSQL and Redis, and the Redis checkpoint store, each on a loopback port of its own (in
    the checker's namespace when it has one). ``restart``, ``freeze`` and ``thaw`` are the faults;
    ``stop`` resumes whatever is frozen (a stopped server would hang its own stop) and stops them."""

    def __init__(self, folder: Path, names: tuple[str, ...]) -> None:
        self.servers: dict[str, Any] = {}
        self.frozen: set[str] = set()
        try:
            for name in names:
                self.servers[name] = _start_server(name, folder / name)
        except BaseException:
            self.stop()
            raise

    @staticmethod
    def probe(scratch: Path, names: tuple[str, ...], notes: list[str]) -> tuple[str, ...]:
        """The servers among ``names`` that start here (each started once and stopped); a note
        says why each other one cannot."""
        found = []
        for name in names:
            try:
                Servers(scratch / f"probe-{name}", (name,)).stop()
                found.append(name)
            except Exception as e:  # a missing binary or client library: the server's own words
                notes.append(f"{_what(name)} skipped: {_reason(e)}")
        return tuple(found)

    def url(self, name: str) -> str:
        return str(self.servers[name].url)

    def port(self, name: str) -> int:
        return int(self.servers[name].port)

    def restart(self, name: str, down_s: float) -> None:
        server = self.servers[name]
        server.stop()
        time.sleep(down_s)
        server.start()

    def freeze(self, name: str) -> None:
        self.frozen.add(name)  # first: a failure half-way is still thawed
        self.servers[name].freeze()

    def thaw(self, name: str) -> None:
        self.servers[name].thaw()
        self.frozen.discard(name)

    def stop(self) -> None:
        """Stops every server and drops its data (PostgreSQL's cluster, Redis's append-only
        files: a batch of schedules must not fill the disk; the Redis logs stay)."""
        for name in list(self.frozen):
            with contextlib.suppress(Exception):
                self.thaw(name)
        for name, server in self.servers.items():
            with contextlib.suppress(Exception):  # every one is stopped, whatever one says
                if name == "postgres":
                    server.destroy()
                else:
                    server.stop()
                    shutil.rmtree(server.folder / "appendonlydir", ignore_errors=True)
        self.servers.clear()


def _what(name: str) -> str:
    return {"postgres": "the PostgreSQL sink", "redis": "the Redis sink", STORE: "the Redis checkpoint store"}[name]


def _reason(e: BaseException) -> str:
    msg = getattr(e, "msg", None) or str(e)  # pytest.skip's exception keeps its reason in msg
    return str(msg).strip().splitlines()[0][:300] if str(msg).strip() else type(e).__name__


def _start_server(name: str, folder: Path) -> Any:
    """A fresh server: the fixtures' helpers, which skip (pytest's Skipped, a BaseException)
    with the reason when a binary or a client library is missing."""
    import pytest

    try:
        if name == "postgres":
            from tests.postgres_server import postgres_or_skip

            return postgres_or_skip()
        from tests.redis_server import redis_or_skip

        return redis_or_skip(folder)
    except pytest.skip.Exception as e:
        raise RuntimeError(_reason(e)) from None
