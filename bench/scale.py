"""Scale: what k containers cost at rest. Start-up, idle CPU per container, the topology
master's heartbeat and plan-push load, and each stream manager's sockets against the clique's
k-1 peers.

    python bench/scale.py --containers 8,16,32 [--window 30] [--settle 5] [--rate 5] [--pushes 3]

For each k, in its own HERON_PY_HOME (a fresh temporary folder, as bench/run.py), on the local
scheduler:

1. submits this file's topology packed into exactly k containers (``--containers k``): one
   spout emitting ``--rate`` tuples a second, shuffled to a bolt of parallelism k-1, so k tasks
   and, by round-robin packing, one task per container; every stream manager's peer links
   carry a tuple now and then and are otherwise idle. Start-up is timed from the submit
   command's start to each phase seen in the state manager's execution state (read as
   ``heron_py/cli/lifecycle.py`` reads it): the master's location, every stream manager
   registered, the first physical plan, every task ready;
2. after ``--settle`` seconds, reads the CPU times (user + system) of every process of the
   topology, waits ``--window`` seconds without touching them, reads them again: CPU seconds
   per second per process, summed per container and per kind (stream manager, metrics
   manager, master, instance, executor, fork server; the local scheduler's per-topology
   supervisor belongs to no container);
3. the master: its CPU over the window against the heartbeats it takes (one from each of the k
   stream managers every ``HEARTBEAT_S``), and the time to push a new plan: ``deactivate`` then ``activate``
   ``--pushes`` times each, timed in this process (``run_state_command``: the admin round trip,
   the master's push to k stream managers and its plan write) and through the CLI (what a user
   waits for, interpreter start included); the plan's and the execution state's size;
4. sockets, after the window: each stream manager's TCP connections, classified by the process
   at the other end (a peer stream manager dialled by us or dialling us, the master, the
   metrics manager), its Unix sockets, its open file descriptors and RSS; the master's too;

then kills the topology and waits until none of its processes is left. The topology file is
this file: ``heron-py submit local --containers K bench/scale.py topology K RATE`` builds it
(the ``topology`` argument); its instances import it as ``__heron_main__`` and run none of the
runner below.

Output: one JSON line per k on stdout as it finishes, then markdown tables: the measurements,
the fits across the ks (file descriptors, CPU and RSS of a stream manager against k; the
master's CPU against k, with a k^2 term; the plan's size and push time), and the model to
``--model`` containers (default up to 1,000) from those fits. docs/operating/scale.md explains
each column.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from heronpy.api.bolt.bolt import Bolt
from heronpy.api.spout.spout import Spout
from heronpy.api.stream import Grouping
from heronpy.api.topology import TopologyBuilder

if TYPE_CHECKING:  # the runner's only: the topology's instances import this file too
    from heron_py.state import StateManager

CLI = [sys.executable, "-m", "heron_py.cli.main"]
TOPOLOGY_ARG = "topology"  # heron-py submit ... bench/scale.py topology K RATE
RATE_KEY = "bench.scale.rate"
# the kinds with a column of their own in the results table (the master has its own columns)
TABLE_KINDS = ("stmgr", "metricsmgr", "instance", "executor", "fork server")
# the default soft RLIMIT_NOFILE of most Linux logins and systemd services (the hard limit is higher)
DEFAULT_NOFILE = 1024


# --- the topology -------------------------------------------------------------------------


class PacedSpout(Spout):
    """One tuple every 1/rate seconds, so that each peer link carries a batch now and then and
    is idle otherwise; no burst to catch up after a pause (deactivate)."""

    outputs = ["n"]

    def initialize(self, config: dict[str, Any], context: Any) -> None:
        self.period = 1.0 / float(config[RATE_KEY])
        self.next_at = time.monotonic()
        self.n = 0

    def next_tuple(self) -> None:
        now = time.monotonic()
        if now < self.next_at:
            return
        self.next_at = max(self.next_at + self.period, now)
        self.n += 1
        self.emit([self.n])


class SinkBolt(Bolt):
    outputs: list[str] = []

    def initialize(self, config: dict[str, Any], context: Any) -> None:
        self.seen = 0

    def process(self, tup: Any) -> None:
        self.seen += 1


def topology_name(k: int) -> str:
    return f"bench_scale_k{k}"


def build_topology(k: int, rate: float) -> TopologyBuilder:
    """1 spout + (k-1) bolts: k tasks, one per container under round-robin packing."""
    b = TopologyBuilder(topology_name(k))
    spout = b.add_spout("pace", PacedSpout, par=1)
    b.add_bolt("sink", SinkBolt, par=k - 1, inputs={spout: Grouping.SHUFFLE})
    b.set_config({"topology.stmgrs": k, RATE_KEY: rate})
    return b


# --- pure parts: parsing, classifying, summing, fitting, the model, the tables -------------


def parse_containers(text: str, flag: str = "--containers") -> list[int]:
    """'8,16,32' -> [8, 16, 32]; each at least 2 (a spout and one bolt, in containers of their own)."""
    out: list[int] = []
    for word in text.split(","):
        word = word.strip()
        if not word.isdigit() or int(word) < 2:
            raise ValueError(f"{flag} {text!r}: expected comma-separated integers >= 2, found {word!r}")
        out.append(int(word))
    return out


def process_kind(cmdline: Sequence[str]) -> str:
    """A topology process's kind from its command line (a forked child's is the one it would have
    had: ``-m instance --task-id 3 ...``, heron_py/scheduler/zygote.py)."""
    words = set(cmdline)
    for module, kind in (("instance", "instance"), ("stream_manager", "stmgr"), ("metrics_manager", "metricsmgr"),
                         ("topology_master", "master"), ("heron_py.scheduler.executor", "executor"),
                         ("heron_py.scheduler.zygote", "fork server"), ("heron_py.scheduler.supervisor", "supervisor")):
        if module in words:
            return kind
    return "other"


Addr = tuple[str, int]
ANY_HOST = "*"  # the owners' key of a port listening on every interface (0.0.0.0, ::)


@dataclass(frozen=True)
class Sock:
    """One TCP socket of a process, as psutil lists it (raddr None when listening)."""

    laddr: Addr
    raddr: Addr | None
    status: str


def classify_tcp(socks: Iterable[Sock], owners: Mapping[Addr, str],
                 ends: Mapping[tuple[Addr, Addr], str] | None = None) -> dict[str, int]:
    """A process's TCP sockets by what is at the other end: ``listen``; ``in:<kind>`` for a
    connection to one of its listening ports (the peer dialled it), ``out:<kind>`` for one it
    made; the kind is ``owners[remote address]`` (every topology process's local addresses; a
    port listening on every interface under the host ``*``), ``unknown`` when no process of the
    topology holds it (the CLI, a closed peer). ``ends`` (a socket's (local, remote) -> its
    process's kind) names the process holding this very connection's other end first: a local
    address alone can be held by two processes (a socket a child inherited), which once counted a
    peer's connection under another kind."""
    socks = list(socks)
    ends = ends or {}
    listening = {s.laddr[1] for s in socks if s.status == "LISTEN"}
    out: dict[str, int] = {}
    for s in socks:
        if s.status == "LISTEN":
            key = "listen"
        elif s.raddr is None:
            key = "unconnected"
        else:
            owner = (ends.get((s.raddr, s.laddr)) or owners.get(s.raddr)
                     or owners.get((ANY_HOST, s.raddr[1]), "unknown"))
            key = f"{'in' if s.laddr[1] in listening else 'out'}:{owner}"
        out[key] = out.get(key, 0) + 1
    return out


def cpu_rates(before: Mapping[int, float], after: Mapping[int, float], window_s: float) -> dict[int, float]:
    """CPU seconds per second per pid, for the pids read at both ends of the window."""
    return {pid: (after[pid] - before[pid]) / window_s for pid in before if pid in after}


def cpu_summary(rates: Mapping[int, float], kinds: Mapping[int, str], containers: Mapping[int, int | None],
                k: int) -> dict[str, Any]:
    """The window's CPU (s/s) in all, per container (0..k-1; processes in none apart) and per kind."""
    per_container = [0.0] * k
    outside = 0.0
    by_kind: dict[str, list[float]] = {}
    for pid, rate in rates.items():
        c = containers.get(pid)
        if c is None or not 0 <= c < k:
            outside += rate
        else:
            per_container[c] += rate
        by_kind.setdefault(kinds.get(pid, "other"), []).append(rate)
    return {
        "total": sum(rates.values()),
        "per_container": {"mean": statistics.fmean(per_container), "max": max(per_container),
                          "container0": per_container[0],
                          "others_mean": statistics.fmean(per_container[1:]) if k > 1 else 0.0},
        "outside_containers": outside,
        "by_kind": {kind: {"n": len(v), "total": sum(v), "mean": statistics.fmean(v), "max": max(v)}
                    for kind, v in sorted(by_kind.items())},
    }


def peers_ok(tcp: Mapping[str, int], k: int) -> bool:
    """A stream manager holds its clique: one connection to each of the k-1 peers and one from each."""
    return tcp.get("out:stmgr", 0) == k - 1 and tcp.get("in:stmgr", 0) == k - 1


@dataclass(frozen=True)
class Poly:
    """y = c0 + c1*x (+ c2*x^2), least squares over the measured ks."""

    coef: tuple[float, ...]

    def at(self, x: float) -> float:
        return sum(c * x**i for i, c in enumerate(self.coef))

    def reaches(self, y: float) -> float | None:
        """The positive x at which the curve rises to y; None when it never does."""
        c0, c1, c2 = (*self.coef, 0.0, 0.0)[:3]
        if c2 > 0:
            disc = c1 * c1 - 4 * c2 * (c0 - y)
            return (-c1 + disc**0.5) / (2 * c2) if disc >= 0 else None
        if c2 == 0 and c1 > 0:
            return (y - c0) / c1
        return None


def _solve(a: list[list[float]], b: list[float]) -> list[float] | None:
    """Gaussian elimination with partial pivoting; None for a singular system."""
    n = len(b)
    m = [[*row, rhs] for row, rhs in zip(a, b, strict=True)]
    for col in range(n):
        pivot = max(range(col, n), key=lambda r: abs(m[r][col]))
        if abs(m[pivot][col]) < 1e-12 * max(1.0, max(abs(v) for row in m for v in row[:n])):
            return None
        m[col], m[pivot] = m[pivot], m[col]
        for r in range(n):
            if r != col:
                f = m[r][col] / m[col][col]
                m[r] = [v - f * w for v, w in zip(m[r], m[col], strict=True)]
    return [m[i][n] / m[i][i] for i in range(n)]


def fit_poly(points: Sequence[tuple[float, float]], degree: int) -> Poly | None:
    """The least-squares polynomial of ``degree``; None without more distinct x than the degree."""
    if len({x for x, _ in points}) <= degree:
        return None
    powers = range(degree + 1)
    a = [[sum(x ** (i + j) for x, _ in points) for j in powers] for i in powers]
    b = [sum(y * x**i for x, y in points) for i in powers]
    coef = _solve(a, b)
    return None if coef is None else Poly(tuple(coef))


def fit_master(points: Sequence[tuple[float, float]]) -> Poly | None:
    """The master's CPU against k: c0 + c1 k + c2 k^2 with three or more ks (each heartbeat
    rebuilds an execution state that grows with k: k of them a second cost k^2), the line when
    fewer, or when the k^2 term comes out negative (noise in a flat curve)."""
    quad = fit_poly(points, 2)
    if quad is not None and quad.coef[2] >= 0:
        return quad
    return fit_poly(points, 1)


@dataclass(frozen=True)
class Fits:
    """What the measured ks give for the model: each against k."""

    stmgr_fds: Poly | None
    stmgr_cpu: Poly | None  # one stream manager's CPU s/s
    stmgr_rss_mb: Poly | None
    master_cpu: Poly | None  # the master's CPU s/s
    plan_bytes: Poly | None = None  # the physical plan's JSON
    execution_state_bytes: Poly | None = None
    push_ms: Poly | None = None  # a deactivate or activate, in process: the median


def fits_of(results: Sequence[Mapping[str, Any]]) -> Fits:
    def points(get: Callable[[Mapping[str, Any]], float]) -> list[tuple[float, float]]:
        return [(float(r["k"]), get(r)) for r in results]

    return Fits(stmgr_fds=fit_poly(points(lambda r: float(r["stmgr"]["fds"]["mean"])), 1),
                stmgr_cpu=fit_poly(points(lambda r: float(r["cpu"]["by_kind"]["stmgr"]["mean"])), 1),
                stmgr_rss_mb=fit_poly(points(lambda r: float(r["stmgr"]["rss_mb"]["mean"])), 1),
                master_cpu=fit_master(points(lambda r: float(r["master"]["cpu"]))),
                plan_bytes=fit_poly(points(lambda r: float(r["plan"]["bytes"])), 1),
                execution_state_bytes=fit_poly(points(lambda r: float(r["plan"]["execution_state_bytes"])), 1),
                push_ms=fit_poly(points(push_ms), 1))


def push_ms(result: Mapping[str, Any]) -> float:
    """The median in-process deactivate/activate round trip of one k's run, in ms."""
    p = result["plan"]["push_s"]
    return float(statistics.median(p["deactivate"] + p["activate"]) * 1e3)


@dataclass(frozen=True)
class Intervals:
    """The periods that set the idle message rates (defaults: stream_manager/links.py HEARTBEAT_S,
    heron_py.network.heartbeat.interval.secs, topology.metrics.export.interval.secs)."""

    stmgr_heartbeat_s: float = 1.0
    link_ping_s: float = 2.0
    metrics_s: float = 10.0


def model_row(k: int, iv: Intervals, fits: Fits) -> dict[str, Any]:
    """The counts that follow from the design at k containers, and the fits' predictions."""
    hb = k / iv.stmgr_heartbeat_s
    row: dict[str, Any] = {
        "k": k,
        "peer_sockets_per_stmgr": 2 * (k - 1),  # one connection dialled to each peer, one taken from each
        "clique_pairs": k * (k - 1) // 2,
        "clique_tcp_connections": k * (k - 1),
        "master_links": 2 * k,  # each container's stream manager and metrics manager
        "master_msgs_per_s": hb + k / iv.metrics_s,
        # every socket end checks its link once an interval, and pings when it sent nothing
        "timer_callbacks_per_stmgr_per_s": 2 * (k - 1) / iv.link_ping_s,
    }
    if fits.stmgr_fds is not None:
        row["stmgr_fds"] = fits.stmgr_fds.at(k)
    if fits.stmgr_cpu is not None:
        row["stmgr_cpu"] = fits.stmgr_cpu.at(k)
        row["all_stmgrs_cpu"] = k * fits.stmgr_cpu.at(k)
    if fits.stmgr_rss_mb is not None:
        row["stmgr_rss_mb"] = fits.stmgr_rss_mb.at(k)
    if fits.master_cpu is not None:
        row["master_cpu"] = fits.master_cpu.at(k)
    if fits.plan_bytes is not None:
        row["plan_kb"] = fits.plan_bytes.at(k) / 1024
        row["push_mb"] = k * fits.plan_bytes.at(k) / 2**20  # one plan change: the plan to each stream manager
    if fits.execution_state_bytes is not None:
        row["execution_state_kb"] = fits.execution_state_bytes.at(k) / 1024
    if fits.push_ms is not None:
        row["push_ms"] = fits.push_ms.at(k)
    return row


def limits(fits: Fits, nofile: int = DEFAULT_NOFILE) -> dict[str, float | None]:
    """The k at which each limit is met: a stream manager's descriptors at ``nofile``; one
    stream manager, and the master, using a whole core."""

    def reach(p: Poly | None, y: float) -> float | None:
        return None if p is None else p.reaches(y)

    return {"stmgr_fds_at_nofile": reach(fits.stmgr_fds, nofile), "stmgr_one_core": reach(fits.stmgr_cpu, 1.0),
            "master_one_core": reach(fits.master_cpu, 1.0)}


def _f(x: float | None, fmt: str = ".3f") -> str:
    return "-" if x is None else format(x, fmt)


def _kind_mean(cpu: Mapping[str, Any], kind: str) -> str:
    d = cpu["by_kind"].get(kind)
    return "-" if d is None else f"{d['mean']:.4f}"


def results_table(results: Sequence[Mapping[str, Any]]) -> str:
    head = ("| k | start-up s (master / registered / plan / all ready) | CPU cores, all | CPU per container "
            "mean / max / container 0 | stmgr | metricsmgr | instance | executor | fork server | master CPU "
            "| master µs per heartbeat | plan push ms, in process (CLI) | plan / execution state KB "
            "| stmgr peers out / in (expected) | stmgr fds | stmgr RSS MB | master fds |")
    lines = [head, "|" + "---|" * head.count(" | ") + "---|"]
    for r in results:
        s, cpu, m, p, st = r["startup"], r["cpu"], r["master"], r["plan"], r["stmgr"]
        push = push_ms(r)
        push_cli = statistics.median(p["push_cli_s"]["deactivate"] + p["push_cli_s"]["activate"]) * 1e3 \
            if p["push_cli_s"]["deactivate"] else None
        pc = cpu["per_container"]
        per_kind = " | ".join(_kind_mean(cpu, kind) for kind in TABLE_KINDS)
        lines.append(
            f"| {r['k']} | {_f(s['master_up_s'], '.1f')} / {_f(s['registered_s'], '.1f')} / "
            f"{_f(s['first_plan_s'], '.1f')} / {_f(s['all_ready_s'], '.1f')} | {cpu['total']:.3f} | "
            f"{pc['mean']:.4f} / {pc['max']:.4f} / {pc['container0']:.4f} | {per_kind} | {m['cpu']:.4f} | "
            f"{m['us_per_heartbeat']:.0f} | {push:.0f} ({_f(push_cli, '.0f')}) | "
            f"{p['bytes'] / 1024:.1f} / {p['execution_state_bytes'] / 1024:.1f} | "
            f"{st['tcp']['out:stmgr']['min']}-{st['tcp']['out:stmgr']['max']} / "
            f"{st['tcp']['in:stmgr']['min']}-{st['tcp']['in:stmgr']['max']} ({r['k'] - 1}) | "
            f"{st['fds']['mean']:.0f} | {st['rss_mb']['mean']:.1f} | {_f(m['fds'], '.0f')} |")
    return "\n".join(lines)


def fits_table(fits: Fits) -> str:
    rows = [("stream manager file descriptors", fits.stmgr_fds, "fds"),
            ("one stream manager's CPU", fits.stmgr_cpu, "CPU s/s"),
            ("one stream manager's RSS", fits.stmgr_rss_mb, "MB"),
            ("the master's CPU", fits.master_cpu, "CPU s/s"),
            ("the physical plan", fits.plan_bytes, "bytes"),
            ("the execution state", fits.execution_state_bytes, "bytes"),
            ("a plan push (deactivate or activate, in process)", fits.push_ms, "ms")]
    lines = ["| against k | c0 | c1 (per container) | c2 (per container squared) | unit |", "|---|---|---|---|---|"]
    for name, poly, unit in rows:
        coef = [*(poly.coef if poly is not None else ()), None, None, None][:3]
        lines.append(f"| {name} | " + " | ".join(_f(c, ".4g") for c in coef) + f" | {unit} |")
    return "\n".join(lines)


def model_table(ks: Sequence[int], iv: Intervals, fits: Fits) -> str:
    lines = ["| k | peer sockets per stmgr | clique pairs (TCP connections) | master links | master msgs/s "
             "| timer callbacks per stmgr /s | stmgr fds (fit) | stmgr CPU (fit) | all stmgrs CPU (fit) "
             "| stmgr RSS MB (fit) | master CPU (fit) | plan KB (fit) | one push, MB sent | plan push ms (fit) "
             "| execution state KB (fit) |",
             "|" + "---|" * 15]
    for k in ks:
        r = model_row(k, iv, fits)
        lines.append(f"| {k} | {r['peer_sockets_per_stmgr']} | {r['clique_pairs']:,} "
                     f"({r['clique_tcp_connections']:,}) | {r['master_links']} | {r['master_msgs_per_s']:.0f} | "
                     f"{r['timer_callbacks_per_stmgr_per_s']:.0f} | "
                     f"{_f(r.get('stmgr_fds'), '.0f')} | {_f(r.get('stmgr_cpu'), '.3f')} | "
                     f"{_f(r.get('all_stmgrs_cpu'), '.2f')} | {_f(r.get('stmgr_rss_mb'), '.1f')} | "
                     f"{_f(r.get('master_cpu'), '.3f')} | {_f(r.get('plan_kb'), '.0f')} | "
                     f"{_f(r.get('push_mb'), '.1f')} | {_f(r.get('push_ms'), '.0f')} | "
                     f"{_f(r.get('execution_state_kb'), '.0f')} |")
    lim = limits(fits)
    per_socket = fits.stmgr_rss_mb.coef[1] / 2 * 1024 if fits.stmgr_rss_mb is not None else None
    lines.append("")
    lines.append(f"k at which a stream manager's descriptors reach {DEFAULT_NOFILE} (the default soft limit): "
                 f"{_f(lim['stmgr_fds_at_nofile'], '.0f')}; one stream manager uses a core: "
                 f"{_f(lim['stmgr_one_core'], '.0f')}; the master uses a core: {_f(lim['master_one_core'], '.0f')}; "
                 f"a stream manager's RSS per peer socket (c1 / 2): {_f(per_socket, '.1f')} KB")
    return "\n".join(lines)


def read_results(text: str) -> list[dict[str, Any]]:
    """The measured ks of a run's output (its JSON lines; a failed k's line and the tables are skipped)."""
    out: list[dict[str, Any]] = []
    for line in text.splitlines():
        if not line.startswith("{"):
            continue
        doc = json.loads(line)
        if isinstance(doc, dict) and "error" not in doc:
            out.append(doc)
    return out


def spread(values: Sequence[float]) -> dict[str, float]:
    return {"min": min(values), "max": max(values), "mean": statistics.fmean(values)} if values else \
        {"min": 0, "max": 0, "mean": 0.0}


# --- the measurement (I/O) ----------------------------------------------------------------


@dataclass(frozen=True)
class Settings:
    """One k's run, from the command line."""

    rate: float
    settle_s: float
    window_s: float
    pushes: int
    cli_pushes: int
    wait_s: float
    properties: tuple[str, ...]


class StartupWatch:
    """Polls the state manager while the submit command runs: when the master's location
    appears, when every stream manager registered, the first plan, every task ready (seconds
    from the submit command's start)."""

    def __init__(self, state: StateManager, name: str, k: int, t0: float,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.state, self.name, self.k, self.t0, self.clock = state, name, k, t0, clock
        self.phases: dict[str, float | None] = {"master_up_s": None, "registered_s": None, "first_plan_s": None,
                                                "all_ready_s": None}

    def _mark(self, phase: str) -> None:
        if self.phases[phase] is None:
            self.phases[phase] = self.clock() - self.t0

    def poll_once(self) -> bool:
        """True once every task is ready."""
        if self.state.get_tmanager_location(self.name) is not None:
            self._mark("master_up_s")
        es = self.state.get_execution_state(self.name) or {}
        if len(es.get("stmgrs", {})) >= self.k:
            self._mark("registered_s")
        if int(es.get("pplan_version", 0)) > 0:
            self._mark("first_plan_s")
        inst = es.get("instances", {})
        if len(inst) >= self.k and all(i.get("ready") for i in inst.values()):
            self._mark("all_ready_s")
            return True
        return False


def _cli(env: Mapping[str, str], *args: str, timeout: float = 600) -> tuple[float, str]:
    import subprocess

    t0 = time.monotonic()
    p = subprocess.run([*CLI, *args], env=dict(env), cwd=env["HERON_PY_HOME"], capture_output=True, text=True,
                       timeout=timeout)
    took = time.monotonic() - t0
    if p.returncode != 0:
        raise RuntimeError(f"scale: heron-py {' '.join(args[:3])} failed ({p.returncode}): "
                           f"{p.stdout.strip()[-1500:]} {p.stderr.strip()[-1500:]}")
    return took, p.stdout


def _submit(env: Mapping[str, str], state: StateManager, k: int, s: Settings) -> tuple[float, dict[str, float | None]]:
    import subprocess

    name = topology_name(k)
    props = [a for p in s.properties for a in ("--config-property", p)]
    cmd = [*CLI, "submit", "local", "--name", name, "--containers", str(k), "--wait", str(s.wait_s), *props,
           str(Path(__file__).resolve()), TOPOLOGY_ARG, str(k), str(s.rate)]
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, env=dict(env), cwd=env["HERON_PY_HOME"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    watch = StartupWatch(state, name, k, t0)
    cli_s: float | None = None
    while True:
        ready = watch.poll_once()
        if cli_s is None and proc.poll() is not None:
            cli_s = time.monotonic() - t0
            if proc.returncode != 0:
                out, err = proc.communicate()
                raise RuntimeError(f"scale: submit of {k} containers failed ({proc.returncode}): "
                                   f"{out.strip()[-1500:]} {err.strip()[-3000:]}")
        if ready and cli_s is not None:
            break
        if time.monotonic() - t0 > s.wait_s + 60:
            proc.kill()
            raise RuntimeError(f"scale: {k} containers not all ready within {s.wait_s + 60:g} s: {watch.phases}")
        time.sleep(0.05)
    proc.communicate()
    return cli_s, watch.phases


def _processes(topology_id: str) -> list[Any]:
    from heron_py.scheduler.local import LocalScheduler

    return LocalScheduler.topology_processes(topology_id)


def _cpu_of(procs: Iterable[Any]) -> dict[int, float]:
    import psutil

    out: dict[int, float] = {}
    for p in procs:
        try:
            t = p.cpu_times()
        except psutil.Error:
            continue
        out[p.pid] = t.user + t.system
    return out


def _tcp_socks(p: Any) -> list[Sock]:
    return [Sock((c.laddr.ip, c.laddr.port), (c.raddr.ip, c.raddr.port) if c.raddr else None, c.status)
            for c in p.net_connections(kind="tcp")]


def _sockets(procs: Sequence[Any], kinds: Mapping[int, str], k: int, master_pid: int | None) -> dict[str, Any]:
    """Each stream manager's and the master's sockets, descriptors and RSS."""
    import psutil

    socks: dict[int, list[Sock]] = {}
    for p in procs:
        try:
            socks[p.pid] = _tcp_socks(p)
        except psutil.Error:
            continue
    owners = {s.laddr: kinds.get(pid, "other") for pid, ss in socks.items() for s in ss}
    owners.update({(ANY_HOST, s.laddr[1]): kinds.get(pid, "other") for pid, ss in socks.items() for s in ss
                   if s.status == "LISTEN" and s.laddr[0] in ("0.0.0.0", "::")})
    ends = {(s.laddr, s.raddr): kinds.get(pid, "other") for pid, ss in socks.items() for s in ss
            if s.raddr is not None}
    stmgrs: list[dict[str, Any]] = []
    master: dict[str, Any] = {}
    for p in procs:
        kind = kinds.get(p.pid)
        if kind != "stmgr" and p.pid != master_pid:
            continue
        try:
            doc = {"pid": p.pid, "tcp": classify_tcp(socks.get(p.pid, []), owners, ends),
                   "unix": len(p.net_connections(kind="unix")), "fds": p.num_fds(),
                   "rss_mb": p.memory_info().rss / 2**20,
                   "nofile_soft": p.rlimit(psutil.RLIMIT_NOFILE)[0]}
        except psutil.Error:
            continue
        if kind == "stmgr":
            stmgrs.append(doc)
        else:
            master = doc
    tcp_keys = sorted({key for d in stmgrs for key in d["tcp"]} | {"out:stmgr", "in:stmgr"})
    return {
        "stmgr": {"n": len(stmgrs), "expected_peers": k - 1,
                  "peers_ok": len(stmgrs) == k and all(peers_ok(d["tcp"], k) for d in stmgrs),
                  "tcp": {key: spread([d["tcp"].get(key, 0) for d in stmgrs]) for key in tcp_keys},
                  "unix": spread([d["unix"] for d in stmgrs]), "fds": spread([d["fds"] for d in stmgrs]),
                  "rss_mb": spread([d["rss_mb"] for d in stmgrs]),
                  "nofile_soft": min((d["nofile_soft"] for d in stmgrs), default=0)},
        "master": master,
    }


def _pushes(state: StateManager, env: Mapping[str, str], name: str, s: Settings) -> dict[str, Any]:
    """deactivate/activate round trips: in this process, then through the CLI."""
    from heron_py.cli.admin import run_state_command

    timed: dict[str, list[float]] = {"deactivate": [], "activate": []}
    for _ in range(s.pushes):
        for command in ("deactivate", "activate"):
            t0 = time.monotonic()
            ok, message = run_state_command(state, name, command, 30.0)
            timed[command].append(time.monotonic() - t0)
            if not ok:
                raise RuntimeError(f"scale: {command} of '{name}' not applied: {message}")
    cli: dict[str, list[float]] = {"deactivate": [], "activate": []}
    for _ in range(s.cli_pushes):
        for command in ("deactivate", "activate"):
            cli[command].append(_cli(env, command, "local", name, "--wait", "30")[0])
    return {"push_s": timed, "push_cli_s": cli}


def _kill_and_wait(env: Mapping[str, str], name: str, topology_id: str | None) -> None:
    import subprocess

    subprocess.run([*CLI, "kill", "local", name], env=dict(env), cwd=env["HERON_PY_HOME"], capture_output=True,
                   timeout=300)
    if topology_id is None:
        return
    deadline = time.monotonic() + 60
    while _processes(topology_id):
        if time.monotonic() > deadline:
            raise RuntimeError(f"scale: processes of '{name}' still running 60 s after heron-py kill: "
                               f"{[p.pid for p in _processes(topology_id)]}")
        time.sleep(0.5)


def measure(k: int, s: Settings, home: Path, iv: Intervals) -> dict[str, Any]:
    import psutil

    from heron_py.scheduler.local import process_container
    from heron_py.state import open_state
    from heron_py.state.config import resolve

    name = topology_name(k)
    env = {**os.environ, "HERON_PY_HOME": str(home)}
    state = open_state(resolve(env=env, home=home), home)
    topology_id: str | None = None
    try:
        submit_cli_s, phases = _submit(env, state, k, s)
        topology_id = str((state.get_scheduler_location(name) or {})["topology_id"])
        loc = state.get_tmanager_location(name)
        master_pid = loc.pid if loc is not None else None
        time.sleep(s.settle_s)
        procs = _processes(topology_id)
        kinds: dict[int, str] = {}
        containers: dict[int, int | None] = {}
        for p in procs:
            try:
                kinds[p.pid] = process_kind(p.cmdline())
                containers[p.pid] = process_container(p, topology_id)
            except psutil.Error:
                continue
        load_before = os.getloadavg()[0]
        before = _cpu_of(procs)
        time.sleep(s.window_s)
        after = _cpu_of(procs)
        load_after = os.getloadavg()[0]
        rates = cpu_rates(before, after, s.window_s)
        cpu = cpu_summary(rates, kinds, containers, k)
        sockets = _sockets(procs, kinds, k, master_pid)
        master_cpu = rates.get(master_pid, 0.0) if master_pid is not None else 0.0
        heartbeats = k / iv.stmgr_heartbeat_s
        pushes = _pushes(state, env, name, s)
        plan = state.get_physical_plan(name)
        es = state.get_execution_state(name) or {}
        return {
            "k": k, "tasks": k, "rate": s.rate, "window_s": s.window_s, "cores": os.cpu_count(),
            "load_avg": [load_before, load_after],
            "processes": len(procs), "exited_in_window": len(before) - len(rates),
            "startup": {"submit_cli_s": submit_cli_s, **phases},
            "cpu": cpu,
            "master": {"pid": master_pid, "cpu": master_cpu, "heartbeats_per_s": heartbeats,
                       "us_per_heartbeat": master_cpu / heartbeats * 1e6,
                       "fds": sockets["master"].get("fds"), "tcp": sockets["master"].get("tcp"),
                       "rss_mb": sockets["master"].get("rss_mb")},
            "plan": {"bytes": len(json.dumps(plan.to_dict()).encode()) if plan is not None else 0,
                     "version": plan.version if plan is not None else 0,
                     "execution_state_bytes": len(json.dumps(es).encode()), **pushes},
            "stmgr": sockets["stmgr"],
        }
    finally:
        try:
            if topology_id is None:  # a submit that failed or timed out may have launched it all the same
                topology_id = (state.get_scheduler_location(name) or {}).get("topology_id")
            _kill_and_wait(env, name, None if topology_id is None else str(topology_id))
        finally:
            state.close()


def _intervals() -> Intervals:
    from heron_py.common.config import HEARTBEAT_INTERVAL, METRICS
    from stream_manager.links import HEARTBEAT_S

    return Intervals(stmgr_heartbeat_s=float(HEARTBEAT_S), link_ping_s=float(HEARTBEAT_INTERVAL.default),
                     metrics_s=float(METRICS.default))


def main(argv: Sequence[str]) -> int:
    import platform
    import shutil
    import subprocess
    import tempfile

    from heron_py.cli.errors import AdminError

    ap = argparse.ArgumentParser(prog="bench/scale.py", description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--containers", help="the ks to measure, comma-separated (each >= 2): 8,16,32")
    ap.add_argument("--rate", type=float, default=5.0, help="tuples a second from the spout (default 5)")
    ap.add_argument("--settle", type=float, default=5.0, help="seconds after every task is ready before the window")
    ap.add_argument("--window", type=float, default=30.0, help="seconds of the idle CPU window (default 30)")
    ap.add_argument("--pushes", type=int, default=3, help="deactivate/activate pairs timed in this process")
    ap.add_argument("--cli-pushes", type=int, default=1, help="deactivate/activate pairs timed through the CLI")
    ap.add_argument("--wait", type=float, default=None,
                    help="submit's --wait (default 60 s + 5 s per container)")
    ap.add_argument("--config-property", action="append", default=[], metavar="KEY=VALUE",
                    help="passed to submit (repeatable), e.g. heron.network.tls.enabled=true")
    ap.add_argument("--model", default="100,250,500,1000", help="the ks of the model table (default 100,250,500,1000)")
    ap.add_argument("--keep-home", action="store_true", help="keep the HERON_PY_HOME (logs) after the run")
    ap.add_argument("--tables-from", type=Path, default=None, metavar="FILE",
                    help="measure nothing: print the tables of the JSON lines a run printed (saved to FILE)")
    args = ap.parse_args(argv)
    try:
        model_ks = parse_containers(args.model, "--model")
        ks = parse_containers(args.containers) if args.containers is not None else []
    except ValueError as e:
        ap.error(str(e))
    if not ks and args.tables_from is None:
        ap.error("expected --containers K,K,... (or --tables-from FILE), found neither")
    iv = _intervals()
    results: list[dict[str, Any]] = []
    failed: list[int] = []
    if args.tables_from is not None:
        results = read_results(args.tables_from.read_text())
    else:
        home = Path(tempfile.mkdtemp(prefix="heron-scale-"))
        try:
            for k in ks:
                s = Settings(rate=args.rate, settle_s=args.settle, window_s=args.window, pushes=args.pushes,
                             cli_pushes=args.cli_pushes,
                             wait_s=args.wait if args.wait is not None else 60.0 + 5.0 * k,
                             properties=tuple(args.config_property))
                try:
                    r = measure(k, s, home, iv)
                except (RuntimeError, OSError, subprocess.SubprocessError, AdminError) as e:
                    # where it breaks is a result too: the line says so, and the next k still runs
                    failed.append(k)
                    print(json.dumps({"k": k, "error": f"{type(e).__name__}: {e}"}), flush=True)
                    continue
                results.append(r)
                print(json.dumps(r, sort_keys=True), flush=True)
        finally:
            if not args.keep_home:
                shutil.rmtree(home, ignore_errors=True)
            else:
                print(f"scale: HERON_PY_HOME kept at {home}", file=sys.stderr)
    fits = fits_of(results)
    print(f"\n{platform.node()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
          f"window {args.window:g} s, spout {args.rate:g} tuples/s; intervals: stream manager heartbeat "
          f"{iv.stmgr_heartbeat_s:g} s, link ping {iv.link_ping_s:g} s, metrics {iv.metrics_s:g} s\n")
    print(results_table(results))
    print("\n" + fits_table(fits))
    print("\n" + model_table(model_ks, iv, fits))
    bad = [r["k"] for r in results if not r["stmgr"]["peers_ok"]]
    if bad:
        print(f"scale: stream managers without one connection to and from each of the k-1 peers at k = {bad}",
              file=sys.stderr)
    if failed:
        print(f"scale: no measurement at k = {failed} (their JSON lines say why)", file=sys.stderr)
    return 1 if bad or failed else 0


if __name__ == "__main__":
    if sys.argv[1:2] == [TOPOLOGY_ARG]:
        build_topology(int(sys.argv[2]), float(sys.argv[3])).build_and_submit()
    else:
        sys.exit(main(sys.argv[1:]))
