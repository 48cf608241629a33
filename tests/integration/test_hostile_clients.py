"""Issue 18, hostile clients: on every listening port of a running word count (stream
managers' TCP ports and Unix sockets, metrics managers' report and Prometheus ports, the
topology master's port and HTTP API), 300 idle connections, a 16 MiB length prefix with no
handshake and a slowloris HTTP request. The daemons' summed RSS must grow by less than
100 MB, the connections must be shed, and the topology's output must stay exact.

The attack starts as soon as the ports are known and runs while the sentences flow; the
figures (RSS before, peak, after; connections shed) are printed (pytest -s shows them)."""

from __future__ import annotations

import json
import resource
import socket
import struct
import threading
import time
from collections import Counter
from pathlib import Path

import psutil
import pytest
import wc_common

from heron_py.common.container_layout import TopologyPaths
from heron_py.common.framing import MsgType
from heron_py.state import LocalFsStateManager
from heron_py.testing import run_local
from tests.conftest import EXAMPLES

pytestmark = pytest.mark.integration

N = 20000  # sentences: enough for the run to outlast the attack's start
IDLE = 300
MB = 1024 * 1024
SHED_WITHIN_S = 15.0  # the handshake deadline and the HTTP head timeout are 5 s


def _daemons(home: Path) -> list[psutil.Process]:
    out = []
    for p in psutil.process_iter(["cmdline"]):
        try:
            if str(home) in " ".join(p.info["cmdline"] or ()) and p.pid != psutil.Process().pid:
                out.append(p)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return out


def _rss(home: Path) -> int:
    total = 0
    for p in _daemons(home):
        try:
            total += p.memory_info().rss
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            pass
    return total


def _ports(home: Path, name: str) -> dict[str, tuple[str, object]] | None:
    """Every listening port: label -> ("tcp", port) | ("unix", path) | ("http", port)."""
    state = LocalFsStateManager(home)
    es = state.get_execution_state(name)
    loc = state.get_tmanager_location(name)
    if not es or loc is None or len(es.get("stmgrs", {})) < 2 or not loc.http_port:
        return None
    paths = TopologyPaths.of(name, home)
    ports: dict[str, tuple[str, object]] = {"tmanager": ("tcp", loc.port), "tmanager http": ("http", loc.http_port)}
    for c, sm in es["stmgrs"].items():
        ports[f"stmgr {c}"] = ("tcp", int(sm["port"]))
        ports[f"stmgr {c} unix"] = ("unix", paths.layout(int(c)).stmgr_socket())
        try:
            mm = json.loads((paths.container(int(c)) / "metricsmgr.json").read_text())
        except (FileNotFoundError, ValueError):
            return None
        ports[f"metricsmgr {c}"] = ("tcp", int(mm["port"]))
        ports[f"metricsmgr {c} http"] = ("http", int(mm["http_port"]))
    return ports


def _open(kind: str, addr: object) -> socket.socket:
    if kind == "unix":
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(str(addr))
    else:
        s = socket.create_connection(("127.0.0.1", int(addr)))  # type: ignore[call-overload]
    s.setblocking(False)
    return s


def _closed(s: socket.socket) -> bool:
    try:
        while True:
            if not s.recv(65536):
                return True
    except BlockingIOError:
        return False
    except OSError:
        return True


class Attack:
    def __init__(self, home: Path, ports: dict[str, tuple[str, object]]) -> None:
        self.home = home
        self.ports = ports
        self.rss_before = _rss(home)
        self.rss_peak = self.rss_before
        self.shed: dict[str, int] = {}
        self.prefix_closed: dict[str, bool] = {}
        self.slowloris_closed: dict[str, bool] = {}
        self.error: BaseException | None = None
        self.done = threading.Event()
        self.took = 0.0  # seconds from the first connection to the last close (printed)

    def run(self) -> None:
        try:
            self._run()
        except BaseException as e:  # reported by the test, not lost in the thread
            self.error = e
        finally:
            self.done.set()

    def _sample(self) -> None:
        self.rss_peak = max(self.rss_peak, _rss(self.home))

    def _run(self) -> None:
        started = time.monotonic()
        idle = {label: [_open(kind, addr) for _ in range(IDLE)] for label, (kind, addr) in self.ports.items()}
        prefix = {}
        for label, (kind, addr) in self.ports.items():
            s = _open(kind, addr)
            try:  # a 16 MiB frame announced, then as much of it as the peer takes
                s.setblocking(True)
                s.settimeout(2.0)
                s.sendall(struct.pack(">IH", 16 * MB, MsgType.CLIENT_HELLO) + b"\0" * MB)
            except OSError:
                pass
            s.setblocking(False)
            prefix[label] = s
        slow = {}
        for label, (kind, addr) in self.ports.items():
            if kind == "http":
                s = _open(kind, addr)
                s.send(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
                slow[label] = s
        deadline = time.monotonic() + SHED_WITHIN_S
        closed = {label: set() for label in idle}
        tick = 0
        while time.monotonic() < deadline:
            self._sample()
            for label, socks in idle.items():
                closed[label] |= {i for i, s in enumerate(socks) if i not in closed[label] and _closed(s)}
            for label, s in slow.items():
                if not self.slowloris_closed.get(label):
                    self.slowloris_closed[label] = _closed(s)
                    if not self.slowloris_closed[label] and tick % 5 == 0:
                        try:
                            s.send(b"X")  # one byte of a header line now and then: never a whole request
                        except OSError:
                            self.slowloris_closed[label] = True
            for label, s in prefix.items():
                self.prefix_closed[label] = self.prefix_closed.get(label) or _closed(s)
            if all(len(c) == IDLE for c in closed.values()) and all(self.slowloris_closed.values()) \
                    and all(self.prefix_closed.values()):
                break
            tick += 1
            time.sleep(0.2)
        self.shed = {label: len(c) for label, c in closed.items()}
        self.took = time.monotonic() - started
        for socks in [*idle.values(), list(prefix.values()), list(slow.values())]:
            for s in socks:
                s.close()


def test_hostile_clients_on_every_port_are_shed_and_the_output_stays_exact(heron_home, capsys):
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 16384), hard))
    expected = wc_common.expected_counts(N)
    total = sum(expected.values())
    name = "wc_hostile"
    attack: list[Attack] = []

    def until(received: dict) -> bool:
        if not attack:
            ports = _ports(heron_home, name)
            if ports is not None:
                attack.append(Attack(heron_home, ports))
                threading.Thread(target=attack[0].run, daemon=True).start()
        return bool(attack) and attack[0].done.is_set() and len(received["count"]) >= total

    started = time.monotonic()
    run = run_local(EXAMPLES / "word_count.py", ["--sentences", str(N)], home=heron_home, containers=2,
                    capture=["count"], until=until, timeout=240, name=name)
    a = attack[0]
    words = [v[0] for v in run.values("count")]
    with capsys.disabled():
        print(f"\nhostile clients: {len(a.ports)} ports, {IDLE} idle connections each, a 16 MiB prefix and a "
              f"slowloris per HTTP port; run {time.monotonic() - started:.1f} s, attack {a.took:.1f} s")
        print(f"  daemons' summed RSS: before {a.rss_before / MB:.1f} MB, peak {a.rss_peak / MB:.1f} MB, "
              f"growth {(a.rss_peak - a.rss_before) / MB:.1f} MB")
        for label in sorted(a.ports):
            print(f"  {label:<20} idle shed {a.shed.get(label, 0)}/{IDLE}  prefix closed "
                  f"{a.prefix_closed.get(label)}  slowloris closed {a.slowloris_closed.get(label, '-')}")
        print(f"  words counted {len(words)} (expected {total})")
    assert a.error is None, repr(a.error)
    assert a.rss_peak - a.rss_before < 100 * MB
    assert all(n == IDLE for n in a.shed.values()), a.shed
    assert all(a.prefix_closed.values()), a.prefix_closed
    assert all(a.slowloris_closed.values()), a.slowloris_closed
    assert len(words) == total and Counter(words) == expected
