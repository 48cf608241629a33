"""The fork server ("zygote") of a container: its daemons forked from one pre-imported process.

Every process of a container imports the same few hundred modules (asyncio, uvloop, protobuf,
the runtime) before any user code: about 30 MB each when started with ``python -m``. The
executor instead starts this zygote once; it imports those modules, freezes them out of the
garbage collector's reach (``gc.freeze``, so no collection writes to their pages) and then
forks one process per request. A forked child shares the zygote's pages until it writes to
them, so the imported code and data are in memory once per container rather than once per
process.

Each child is forked twice (zygote → intermediate → child) and the intermediate exits at
once: the child is then re-parented to the executor, which has made itself a child
subreaper (``prctl(PR_SET_CHILD_SUBREAPER)``). The executor is so the child's parent, waits
for it like any child it started itself, and sees its exit code; a dead zygote takes no child
with it. A child writes the command line it would have had over its argv area (``set_cmdline``),
so ``ps`` and the tools that read command lines see ``-m instance --task-id 3 ...`` as
before, and its /proc environ (how the schedulers find a topology's processes) is intact.

Protocol on the zygote's stdin/stdout, one JSON object per line (read and written with os.read
and os.write, so no Python-level buffer is copied into a child):
    zygote → executor: {"ready": true}
    executor → zygote: {"module": "instance", "args": [...], "cwd": "...", "log": "...", "title": "..."}
    zygote → executor: {"pid": 1234}    or    {"error": "..."}
The zygote ends when its stdin closes.
"""

from __future__ import annotations

import ctypes
import gc
import importlib
import io
import json
import os
import runpy
import struct
import sys
import threading
import traceback
from typing import IO, Any

# what every container's daemons import; the topology master's modules only where it runs
PRELOAD = ("instance.main", "stream_manager.main", "metrics_manager.main", "heron_py.runtime.stateful",
           # the API a topology's classes import (heronpy's package names are aliases of ours)
           "heronpy.api.bolt.bolt", "heronpy.api.spout.spout", "heronpy.api.topology", "heronpy.api.stream",
           # what the daemons import when they start (measured: each child's sys.modules against
           # the zygote's); uvloop's extension alone left ~2 MB private in every child
           "uvloop", "concurrent.futures.thread", "encodings.idna", "metrics_manager.prom")
# (the registry imports a scheduler when asked for it: the master's relaunches use all three)
PRELOAD_MASTER = ("topology_master.main", "heron_py.scheduler.registry", "heron_py.scheduler.local",
                  "heron_py.scheduler.slurm", "heron_py.scheduler.kube", "google.protobuf.descriptor_pb2")
PR_SET_CHILD_SUBREAPER = 36
LOG_MODE = 0o600  # logs carry tuple data (heron_py.common.logrotate.LOG_MODE, not imported: kept light)


def become_subreaper() -> bool:
    """Orphaned descendants are re-parented to this process (Linux 3.4+); False where that
    cannot be had, and the caller then starts its children without the zygote."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


class LineReader:
    """Lines from a file descriptor through os.read, with no buffer a fork would copy."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self._buf = b""

    def readline(self) -> bytes:
        while b"\n" not in self._buf:
            chunk = os.read(self.fd, 65536)
            if not chunk:
                line, self._buf = self._buf, b""
                return line
            self._buf += chunk
        line, _, self._buf = self._buf.partition(b"\n")
        return line + b"\n"


def _reply(fd: int, obj: dict[str, Any]) -> None:
    data = (json.dumps(obj) + "\n").encode()
    while data:
        data = data[os.write(fd, data):]


def _preload(master: bool) -> int:
    """Imports what the children share and freezes it out of the collector's reach; the number
    of threads after the imports (a fork copies only the calling one, so it must be 1)."""
    for name in PRELOAD + (PRELOAD_MASTER if master else ()):
        importlib.import_module(name)
    gc.collect()
    gc.freeze()
    return threading.active_count()


def serve(master: bool = False, rfd: int = 0, wfd: int = 1) -> int:
    threads = _preload(master)
    if threads != 1:
        _reply(wfd, {"error": f"zygote: {threads} threads after the imports; expected 1"})
        return 2
    return _serve_requests(rfd, wfd)


def _serve_requests(rfd: int, wfd: int) -> int:
    _reply(wfd, {"ready": True})
    reader = LineReader(rfd)
    while line := reader.readline():
        try:
            req = json.loads(line)
            pid = spawn(req, (rfd, wfd))
        except (ValueError, KeyError, TypeError, OSError) as e:
            _reply(wfd, {"error": f"zygote: cannot start {line[:200]!r}: {e}"})
            continue
        _reply(wfd, {"pid": pid})
    return 0


def fork_here(master: bool, log_path: str, title: str) -> tuple[int, int, int]:
    """Makes a zygote of this process, the executor, before it has started any thread: the
    preloaded modules are imported here and the zygote is forked from this process, so the
    interpreter and every module the executor and its daemons have in common are in memory once
    per container instead of twice (an executor started on its own is 15 MB of private memory).
    Returns the zygote's pid, the fd its requests go to and the fd its replies come from."""
    # frozen here, the executor's own collections leave the pages its children share alone too
    threads = _preload(master)
    if threads != 1:
        raise OSError(f"{threads} threads; a fork copies only one")
    req_r, req_w = os.pipe()
    rep_r, rep_w = os.pipe()
    for stream in (sys.stdout, sys.stderr):
        stream.flush()  # else the zygote would write the executor's buffered output again
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.close(req_w)
            os.close(rep_r)
            fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, LOG_MODE)
            os.fchmod(fd, LOG_MODE)
            os.dup2(fd, 2)
            os.close(fd)
            null = os.open(os.devnull, os.O_RDWR)
            os.dup2(null, 0)
            os.dup2(null, 1)
            os.close(null)
            set_cmdline(title)
            code = _serve_requests(req_r, rep_w)
        except BaseException:
            traceback.print_exc()
        finally:
            os._exit(code)
    os.close(req_r)
    os.close(rep_w)
    return pid, req_w, rep_r


def spawn(req: dict[str, Any], zygote_fds: tuple[int, int]) -> int:
    """Forks the requested child (through an intermediate that exits at once); its pid."""
    module, args = str(req["module"]), [str(a) for a in req["args"]]
    cwd, log, title = str(req["cwd"]), str(req["log"]), str(req.get("title") or "")
    env = req.get("env")
    if env is not None and not (isinstance(env, dict) and all(isinstance(v, str) for v in env.values())):
        raise TypeError(f"env: expected an object of strings, found {type(env).__name__}")
    r, w = os.pipe()
    mid = os.fork()
    if mid == 0:  # the intermediate
        try:
            os.close(r)
            child = os.fork()
            if child == 0:
                os.close(w)
                _run_child(module, args, cwd, log, title, zygote_fds, env)  # never returns
            os.write(w, struct.pack("=q", child))
        finally:
            os._exit(0)
    os.close(w)
    try:
        data = b""
        while len(data) < 8:
            chunk = os.read(r, 8 - len(data))
            if not chunk:
                break
            data += chunk
    finally:
        os.close(r)
        os.waitpid(mid, 0)  # once it is reaped, the child's parent is the subreaper
    if len(data) != 8:
        raise OSError("the intermediate process exited without the child's pid")
    pid: int = struct.unpack("=q", data)[0]
    return pid


def _run_child(module: str, args: list[str], cwd: str, log: str, title: str,
               zygote_fds: tuple[int, int], env: dict[str, str] | None = None) -> None:
    code: int = 1
    try:
        os.chdir(cwd)
        if env is not None:
            _take_env(env, cwd)
        fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, LOG_MODE)
        os.fchmod(fd, LOG_MODE)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.close(fd)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        for zfd in zygote_fds:
            if zfd > 2:
                os.close(zfd)
        sys.stdin = open(0, closefd=False)  # noqa: SIM115 - the process's own stdin, for its life
        if title:
            set_cmdline(title)
        # gc.freeze() stays: unfrozen, the zygote's objects would be walked by collections
        # again, which writes to their pages and unshares them
        sys.argv = [module, *args]
        runpy.run_module(module, run_name="__main__", alter_sys=True)
        code = 0
    except SystemExit as e:
        code = _exit_code(e.code, sys.stderr)
    except BaseException:
        traceback.print_exc()
        code = 1
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        os._exit(code)


def _take_env(env: dict[str, str], cwd: str) -> None:
    """What ``python -m`` started in ``cwd`` with ``env`` would have: the environment (for the
    child and what it starts), its PYTHONPATH on sys.path after the start folder, and unbuffered
    output. /proc/PID/environ keeps the zygote's start environment, which carries the
    topology's marks the schedulers look for."""
    os.environ.clear()
    os.environ.update(env)
    sys.path[0] = cwd
    extra = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and p not in sys.path]
    sys.path[1:1] = extra
    if env.get("PYTHONUNBUFFERED"):
        for stream in (sys.stdout, sys.stderr):
            if isinstance(stream, io.TextIOWrapper):
                stream.reconfigure(line_buffering=True, write_through=True)


def set_cmdline(title: str) -> bool:
    """Writes ``title`` over this process's argv area (the zygote's, which ``--room`` made
    large), so /proc/PID/cmdline, ps and psutil show it. Written as the kernel's setproctitle
    case: the title, a NUL, filler, and a last byte that is not NUL, so the kernel returns the
    title alone; psutil splits it on spaces. Only the argv area is written: unlike the
    setproctitle package, /proc/PID/environ (which the schedulers read) stays intact."""
    try:
        with open("/proc/self/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        start, end = int(fields[45]), int(fields[46])  # stat fields 48 and 49: arg_start, arg_end
    except (OSError, IndexError, ValueError):
        return False
    size = end - start
    if size < 2:
        return False
    data = title.encode()[:size - 2] + b"\0"
    data += b" " * (size - len(data))
    ctypes.memmove(start, data, size)
    return True


def _exit_code(value: object, err: IO[str]) -> int:
    """What the interpreter's own exit does with SystemExit's argument."""
    if value is None:
        return 0
    if isinstance(value, int):
        return value & 0xFF
    print(value, file=err)
    return 1


# the zygote's own command line carries this much room for its children's (set_cmdline)
ROOM = 8192
ROOM_FLAG = "--room"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    return serve(master="--master" in args)


if __name__ == "__main__":
    raise SystemExit(main())
