"""The effectively-once checker's network namespace and its network faults (tests/chaos/eo_checker.py).

Partitions and half-open links need iptables, and iptables rules must never touch the host's
own firewall: the checker creates a network namespace of its own (``ip netns add``, its
loopback up), re-executes itself inside it (``ip netns exec``), so the topology, its servers
and every connection between them live on that namespace's private loopback, and puts its
rules only there (always through ``ip netns exec NAME iptables``, so a rule can never land in
the namespace the command happens to run in). The namespace is deleted when the run ends,
rules and all; a namespace left by a run that crashed is found by its name (``PREFIX``, the
pid of the run that made it) and deleted by the next run once that pid is gone.

- ``cut``/``heal``: every TCP packet to or from a local port dropped, both ways (DROP, never
  REJECT: a partition answers nothing, no RST, no ICMP), and the rules lifted again;
- ``kill_side``: ``ss -K`` of one side of the established connections to a port. With the port
  cut first, the RST the kill sends is dropped too, so the other side keeps a connection whose
  peer is gone: a half-open link, found out only by a heartbeat timeout or, after the heal, by
  the RST its next segment draws.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import uuid
from collections.abc import Callable, Iterable
from types import FrameType

from tests.netns import blackhole, heal, run, why_not

PREFIX = "hpyeo-"  # hpyeo-PID-HEX: the checker's namespaces, PID the run that made it
TOOLS = ("ip", "iptables", "ss")


def leftovers(names: Iterable[str], alive: Callable[[int], bool]) -> list[str]:
    """The checker's namespaces among ``names`` whose run is gone (pure): a live run's is kept."""
    out = []
    for name in names:
        m = re.fullmatch(re.escape(PREFIX) + r"(\d+)-[0-9a-f]+", name)
        if m and not alive(int(m.group(1))):
            out.append(name)
    return out


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def remove_leftovers() -> list[str]:
    """Deletes the namespaces of earlier runs that crashed; returns their names."""
    listed = run("ip", "netns", "list", check=False).stdout
    names = [line.split()[0] for line in listed.splitlines() if line.strip()]
    gone = leftovers(names, _alive)
    for name in gone:
        run("ip", "netns", "del", name, check=False)
    return gone


def create() -> tuple[str | None, str]:
    """(a new namespace with its loopback up and iptables working in it, "") or (None, why not)."""
    why = why_not(TOOLS)
    if why:
        return None, why
    remove_leftovers()
    name = f"{PREFIX}{os.getpid()}-{uuid.uuid4().hex[:6]}"
    r = run("ip", "netns", "add", name, check=False)
    if r.returncode != 0:
        return None, f"cannot create a network namespace (ip netns add {name}): {r.stderr.strip()}"
    up = run("ip", "netns", "exec", name, "ip", "link", "set", "lo", "up", check=False)
    probe = run("ip", "netns", "exec", name, "iptables", "-S", check=False)
    if up.returncode != 0 or probe.returncode != 0:
        delete(name)
        return None, f"iptables does not work in a network namespace: {(up.stderr + probe.stderr).strip()}"
    return name, ""


def delete(name: str) -> None:
    run("ip", "netns", "del", name, check=False)


def inside(name: str) -> bool:
    """Whether this process runs in namespace ``name`` (its rules then act on our connections)."""
    try:
        return os.stat(f"/run/netns/{name}").st_ino == os.stat("/proc/self/ns/net").st_ino
    except OSError:
        return False


def run_inside(name: str, cmd: list[str]) -> int:
    """Runs ``cmd`` in namespace ``name`` and returns its exit code; the namespace is deleted
    afterwards whatever happens. SIGINT and SIGTERM are passed on and the command waited for,
    so that it resumes what it froze and stops what it started before its namespace goes."""
    proc = subprocess.Popen(["ip", "netns", "exec", name, *cmd])

    def forward(signum: int, _frame: FrameType | None) -> None:
        proc.send_signal(signum)

    old = {s: signal.signal(s, forward) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        return proc.wait()
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)
        delete(name)


def tcp_ports(ss_output: str, pids: set[int]) -> set[int]:
    """The local ports of the TCP sockets (listening or connected) the processes ``pids`` hold,
    from ``ss -tanpH`` (pure)."""
    ports = set()
    for line in ss_output.splitlines():
        if {int(p) for p in re.findall(r"pid=(\d+)", line)} & pids:
            ports.add(int(line.split()[3].rsplit(":", 1)[1]))
    return ports


def ports_of(pids: set[int]) -> set[int]:
    """The local TCP ports the processes hold now (this process's namespace: the topology's)."""
    return tcp_ports(run("ss", "-tanpH", check=False).stdout, pids)


class Cuts:
    """The ports cut in namespace ``ns``; ``heal_all`` lifts every rule left (a run's finally)."""

    def __init__(self, ns: str) -> None:
        self.ns = ns
        self.ports: set[int] = set()

    def cut(self, ports: Iterable[int]) -> None:
        for port in sorted(set(ports)):
            self.ports.add(port)  # before the rule: a failure half-way still heals it
            blackhole(self.ns, port)

    def heal(self, ports: Iterable[int]) -> None:
        for port in sorted(set(ports)):
            heal(self.ns, port)
            self.ports.discard(port)

    def heal_all(self) -> None:
        self.heal(list(self.ports))


def kill_side_argv(port: int, side: str) -> list[str]:
    """``ss -K`` of the established connections to ``port`` on one side (pure): ``server``, the
    sockets whose local port it is (never the listening one: ``state established``); ``client``,
    the sockets connected to it."""
    if side not in ("server", "client"):
        raise ValueError(f"kill_side: side expected 'server' or 'client', found {side!r}")
    where = ["src", "127.0.0.1", "sport", "=", f":{port}"] if side == "server" else \
        ["dst", "127.0.0.1", "dport", "=", f":{port}"]
    return ["ss", "-K", "-t", "-n", "-H", "state", "established", *where]


def kill_side(port: int, side: str) -> int:
    """Kills one side of the connections to ``port``; how many sockets ``ss`` killed."""
    out = run(*kill_side_argv(port, side), check=False).stdout
    return sum(1 for line in out.splitlines() if line.strip())

