"""The effectively-once fault checker (issue 37): an effectively-once word count
(examples/stateful_word_count.py: a replayable spout with its position in state, a stateful
count) on 2-3 containers of the local scheduler, under a seeded schedule of faults:

- kill -9 of any process: an instance, a stream manager, a metrics manager, the master, the
  standby master (when the seed runs one), an executor;
- SIGSTOP of any of them for 1-15 s, then SIGCONT;
- a TCP reset of every connection to a stream manager's or the master's port (``ss -K``);
- the checkpoint folder full: the run's ``heron_py.checkpoint.root`` is a small tmpfs the
  checker mounts, fills with a file for 2-10 s, then frees (root only);
- a ZooKeeper restart, with ``--zookeeper`` (the run then uses the ZooKeeper state manager);
- overlapping faults: ZooKeeper restarted while every stream manager's links are reset, twice,
  in its down time (the master's session is SUSPENDED, not lost, when the rollback requests
  come: the review's reproduction of a loss), with ``--zookeeper`` where ``ss -K`` works;
- a master whose clock is behind: the active master is killed with kill -9 and replaced by one
  started under libfaketime with its wall clock 30-900 s behind (its executor held with SIGSTOP
  until the replacement is active, so that the executor's own restart waits as a standby).
  Drawn in place of half the kill -9 of the active master, from a random stream of its own, so
  a seed's schedule is the same with or without libfaketime but for those faults.

- with ``--sinks`` (the topology then also writes every word to exact sinks, see below): a sink
  server restarted (``sink_restart``: the PostgreSQL or Redis sink server stopped, 1-5 s down,
  started) or frozen (``sink_freeze``: SIGSTOP for 1-10 s, then SIGCONT);
- with ``--redis-checkpoints`` (the checkpoints kept in a redis-server the checker starts, not in
  files): the checkpoint store frozen (``store_freeze``: its redis-server SIGSTOPped 1-10 s);
- a network partition (``partition``, 2-10 s): every TCP packet to or from the sockets of a
  container's processes (its stream manager's listening port and every connection they hold),
  of the active master's, or of a sink server's or the checkpoint store's port, dropped both
  ways with iptables; connections a cut process opens meanwhile to a port outside are not cut
  (on one loopback there is no host boundary to drop them at);
- a half-open link (``half_open``, 2-10 s): a stream manager's or the master's port cut as above,
  then one side of its established connections killed with ``ss -K`` (the server's side or the
  clients'), so the RST is dropped and the other side keeps a connection whose peer is gone; it
  learns that from its heartbeat timeout, or from the RST its next segment draws after the heal;
- a fault during a recovery (``overlap``): kill -9 of an instance, a stream manager, the master
  or an executor and, 0.5-2 s later while the topology recovers from it, a kill -9 of any process
  or a TCP reset of the links to a stream manager or the master.

Partitions and half-open links need iptables, which must never touch the host's firewall: the
checker creates a network namespace of its own (``ip netns add hpyeo-PID-...``), re-executes
itself inside it (``ip netns exec``), so the topology, its servers and every link between them
are on that namespace's loopback, and puts its rules only there; the namespace is deleted at the
end (a crashed run's, by the next run). Kinds that need root, ``ip``, ``iptables``, ``ss -K`` or
a server this machine lacks are not drawn, and a note says why.

Each schedule runs to the end of the input and checks the counts of the newest complete
checkpoint covering the whole input are exactly the plain Python count. With ``--sinks`` the
topology is tests/chaos/eo_sinks_topology.py: every word of every sentence is also written to a
PostgreSQL table with no key (PostgresInsertBolt), to FileSink part files and to a Redis hash
(RedisStoreBolt HINCRBY), each as the row ``I:POS:WORD``, and each sink must then hold every row
of the input exactly once (nothing twice, nothing missing, nothing else); a sink whose server
cannot run here is left out with a note. It prints the seed, every fault with its time, and each
fault's recovery time (until the next checkpoint completes after it). Exit code 1 when any
schedule is not exact.

    python -m tests.chaos.eo_checker --seed 1 --schedules 5 --duration 60 --out results.md
    python -m tests.chaos.eo_checker --seed 1000 --schedules 50 --duration 60 --sinks --redis-checkpoints \\
        --out rows.md --json rows.jsonl
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import pickle
import random
import re
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
for _p in (ROOT, ROOT / "examples"):  # run as a script or a module from anywhere
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))

import wc_common  # type: ignore[import-not-found]  # noqa: E402  (examples/, on sys.path above)

from heron_py.checkpoint.storage import CheckpointError, CheckpointStorage, LocalFsStorage  # noqa: E402
from heron_py.common.container_layout import TopologyPaths  # noqa: E402
from heron_py.state import config as statecfg  # noqa: E402
from heron_py.state import open_state  # noqa: E402
from heron_py.testing import run_local  # noqa: E402
from heron_py.testing.local import kill_local  # noqa: E402
from tests.chaos import eo_faults, eo_netns  # noqa: E402
from tests.chaos.eo_faults import SINK_SERVERS, STORE  # noqa: E402
from tests.chaos.eo_sinks_topology import entry  # noqa: E402

TOPOLOGY = ROOT / "examples" / "stateful_word_count.py"
SINKS_TOPOLOGY = Path(__file__).resolve().parent / "eo_sinks_topology.py"
SPOUT, COUNT = "sentence", "count"
ROLES = ("instance", "stmgr", "metricsmgr", "tmanager", "standby", "executor")
# how often each kind is drawn, among the kinds this machine can make (a new kind goes last:
# the draws of a schedule without it stay what they were)
WEIGHTS = {"kill": 4, "stop": 3, "reset": 2, "disk_full": 2, "zk_restart": 1, "zk_links": 1,
           "sink_restart": 1, "sink_freeze": 1, "store_freeze": 1, "partition": 2, "half_open": 2, "overlap": 2}
# kinds drawn in place of another: a clock-behind master replaces a kill -9 of the master
DERIVED = ("clock_behind",)
KINDS = (*WEIGHTS, *DERIVED)
SERVERS = (*SINK_SERVERS, STORE)  # the servers a run may have besides the topology's daemons
# the kinds that act on a server, and which: a sink's (postgres, redis) or the checkpoint store
NEEDS_SERVER = {"sink_restart": SINK_SERVERS, "sink_freeze": SINK_SERVERS, "store_freeze": (STORE,)}
# the processes whose kill -9 starts a recovery: an overlap's first fault (a metrics manager's or
# a standby's does not roll the topology back)
RECOVERING = ("instance", "stmgr", "tmanager", "executor")
SINKS = ("postgres", "files", "redis")  # the sinks checked with --sinks (files need no server)
STOP_S = (1.0, 15.0)
FULL_S = (2.0, 10.0)
SKEW_S = (30.0, 900.0)  # how far behind the replaced master's wall clock is
CLOCK_SHARE = 0.5  # of the kill -9 of the active master, when the machine can set a clock back
DOWN_S = (1.0, 5.0)  # a sink server's down time in a restart
FREEZE_S = (1.0, 10.0)  # a sink server or the checkpoint store frozen
CUT_S = (2.0, 10.0)  # a partition or a half-open link
OVERLAP_S = (0.5, 2.0)  # from the first fault of an overlap to the second, while it recovers
TABLE, HASH = "eo_rows", "eo-rows"  # the PostgreSQL sink's table, the Redis sink's hash


# --- pure: the schedule, recoveries and the exactness check ------------------------------------

@dataclass(frozen=True)
class ScheduleConfig:
    duration: float  # seconds of faults
    kinds: tuple[str, ...] = ("kill", "stop")  # what this machine can make (see Capabilities)
    gap: tuple[float, float] = (3.0, 7.0)  # seconds between the end of a fault and the next
    roles: tuple[str, ...] = ROLES  # the processes kill and stop pick from
    servers: tuple[str, ...] = ()  # the run's servers (SERVERS): what the server faults and partitions pick

    def __post_init__(self) -> None:
        if not self.roles or any(r not in ROLES for r in self.roles):
            raise ValueError(f"ScheduleConfig.roles: expected a non-empty subset of {list(ROLES)}, "
                             f"found {list(self.roles)}")
        bad = [k for k in self.kinds if k not in KINDS]
        if bad or not [k for k in self.kinds if k in WEIGHTS]:
            raise ValueError(f"ScheduleConfig.kinds: expected a non-empty subset of {sorted(KINDS)} with one of "
                             f"{sorted(WEIGHTS)}, found {list(self.kinds)}")
        if any(s not in SERVERS for s in self.servers):
            raise ValueError(f"ScheduleConfig.servers: expected a subset of {list(SERVERS)}, "
                             f"found {list(self.servers)}")
        serverless = [k for k in self.kinds if k in NEEDS_SERVER and not set(NEEDS_SERVER[k]) & set(self.servers)]
        if serverless:
            raise ValueError(f"ScheduleConfig.kinds: {serverless} act on a server; expected one of "
                             f"{sorted({s for k in serverless for s in NEEDS_SERVER[k]})} in servers, "
                             f"found {list(self.servers)}")
        if self.duration <= self.gap[0]:
            raise ValueError(f"ScheduleConfig.duration: expected more than {self.gap[0]:g} s (the first gap), "
                             f"found {self.duration:g}")


@dataclass(frozen=True)
class Fault:
    at: float  # seconds after the faults began
    kind: str  # one of KINDS
    # the process kind of kill, stop and an overlap's first kill; "stmgr" or "tmanager" for a
    # reset or a half-open link; "container", "tmanager" or a server for a partition; the
    # server of a sink_restart, sink_freeze or store_freeze
    role: str = ""
    pick: int = 0  # which one among the live processes (or ports) of the role, modulo their number
    hold_s: float = 0.0  # how long a stop, a full disk, a server's down time or freeze, a cut lasts
    skew_s: float = 0.0  # how far behind a clock_behind master's wall clock is
    side: str = ""  # a half-open link's side whose sockets are killed: "server" or "client"
    then: str = ""  # an overlap's second fault: "kill" or "reset"
    then_role: str = ""  # ... its role and pick, as role and pick are the first's
    then_pick: int = 0
    delay_s: float = 0.0  # an overlap's time from the first fault to the second

    def describe(self) -> str:
        then = f"kill -9 {self.then_role}" if self.then == "kill" else f"TCP reset of the links to a {self.then_role}"
        cut = {"container": "a container's processes", "tmanager": "the active tmanager",
               "postgres": "the postgres sink server", "redis": "the redis sink server",
               STORE: "the redis checkpoint store"}.get(self.role, self.role)
        what = {"kill": f"kill -9 {self.role}", "stop": f"SIGSTOP {self.role} for {self.hold_s:.1f} s",
                "reset": f"TCP reset of the links to a {self.role}",
                "disk_full": f"checkpoint folder full for {self.hold_s:.1f} s",
                "zk_restart": "ZooKeeper restart",
                "zk_links": "ZooKeeper restart, the stream managers' links reset while it is down",
                "clock_behind": f"kill -9 tmanager, replaced with its clock {self.skew_s:.0f} s behind",
                "sink_restart": f"{self.role} sink server restarted, {self.hold_s:.1f} s down",
                "sink_freeze": f"SIGSTOP {self.role} sink server for {self.hold_s:.1f} s",
                "store_freeze": f"SIGSTOP the redis checkpoint store for {self.hold_s:.1f} s",
                "partition": f"partition of {cut} for {self.hold_s:.1f} s",
                "half_open": f"half-open links to a {self.role} ({self.side} side killed) for {self.hold_s:.1f} s",
                "overlap": f"kill -9 {self.role}, {self.delay_s:.1f} s later {then}"}[self.kind]
        return f"t={self.at:6.2f} s  {what}"

    @property
    def lasts_s(self) -> float:
        """How long applying it takes: the next fault is drawn a gap after that."""
        return self.hold_s + self.delay_s


@dataclass(frozen=True)
class Schedule:
    seed: int
    containers: int
    standby: bool
    faults: tuple[Fault, ...]


def schedule(seed: int, cfg: ScheduleConfig) -> Schedule:
    """The run a seed stands for: 2 or 3 containers, a standby master or not, and faults one
    after another (a stop, a full disk, a cut, a server's restart or freeze ends, and an
    overlap's second fault is made, before the next fault starts)."""
    rng = random.Random(seed)
    clock_rng = random.Random(f"clock-behind-{seed}")  # its own stream: the other faults stay the seed's
    containers = rng.choice((2, 3))
    standby = rng.random() < 0.5
    roles = [r for r in cfg.roles if standby or r != "standby"] or list(cfg.roles)
    kinds = [k for k in cfg.kinds if k in WEIGHTS]
    weights = [WEIGHTS[k] for k in kinds]
    sinks = [s for s in cfg.servers if s in SINK_SERVERS]
    faults: list[Fault] = []
    t = rng.uniform(*cfg.gap)
    while t < cfg.duration:
        kind = rng.choices(kinds, weights)[0]
        pick = rng.randrange(1 << 16)
        at = round(t, 2)
        if kind in ("kill", "stop"):
            role = rng.choice(roles)
            hold = round(rng.uniform(*STOP_S), 1) if kind == "stop" else 0.0
            fault = Fault(at, kind, role, pick, hold)
            if (kind, role) == ("kill", "tmanager") and "clock_behind" in cfg.kinds \
                    and clock_rng.random() < CLOCK_SHARE:
                fault = Fault(at, "clock_behind", role, pick, skew_s=round(clock_rng.uniform(*SKEW_S)))
        elif kind == "reset":
            fault = Fault(at, kind, rng.choice(("stmgr", "stmgr", "tmanager")), pick)
        elif kind == "disk_full":
            fault = Fault(at, kind, "", pick, round(rng.uniform(*FULL_S), 1))
        elif kind in ("sink_restart", "sink_freeze"):
            server = rng.choice(sinks)
            hold = round(rng.uniform(*(DOWN_S if kind == "sink_restart" else FREEZE_S)), 1)
            fault = Fault(at, kind, server, pick, hold)
        elif kind == "store_freeze":
            fault = Fault(at, kind, STORE, pick, round(rng.uniform(*FREEZE_S), 1))
        elif kind == "partition":
            # a container twice as often as the master: there are 2-3 of them
            target = rng.choice(("container", "container", "tmanager", *cfg.servers))
            fault = Fault(at, kind, target, pick, round(rng.uniform(*CUT_S), 1))
        elif kind == "half_open":
            role = rng.choice(("stmgr", "stmgr", "tmanager"))
            fault = Fault(at, kind, role, pick, round(rng.uniform(*CUT_S), 1), side=rng.choice(("server", "client")))
        elif kind == "overlap":
            # the first is a kill -9 that starts a recovery (a rollback or a takeover)
            first = rng.choice([r for r in roles if r in RECOVERING] or roles)
            then = rng.choice(("kill", "reset") if "reset" in cfg.kinds else ("kill",))
            then_role = rng.choice(roles) if then == "kill" else rng.choice(("stmgr", "stmgr", "tmanager"))
            fault = Fault(at, kind, first, pick, then=then, then_role=then_role, then_pick=rng.randrange(1 << 16),
                          delay_s=round(rng.uniform(*OVERLAP_S), 1))
        else:
            fault = Fault(at, kind)
        faults.append(fault)
        t += fault.lasts_s + rng.uniform(*cfg.gap)
    return Schedule(seed, containers, standby, tuple(faults))


def drawable_kinds(caps: eo_faults.Capabilities, *, zookeeper: bool, servers: tuple[str, ...]) -> tuple[str, ...]:
    """The kinds a run can draw (pure): what the machine can make (``caps``) and the run has (the
    ZooKeeper state manager; ``servers``, the sink servers and the checkpoint store that run)."""
    store = STORE in servers
    kinds = ["kill", "stop"] + (["reset"] if caps.reset else []) \
        + (["disk_full"] if caps.disk_full and not store else []) \
        + (["zk_restart"] if zookeeper else []) + (["zk_links"] if zookeeper and caps.reset else []) \
        + (["clock_behind"] if caps.clock_behind else [])
    if set(servers) & set(SINK_SERVERS):
        kinds += ["sink_restart", "sink_freeze"]
    if store:
        kinds.append("store_freeze")
    if caps.partition:
        kinds += ["partition", *(["half_open"] if caps.reset else [])]
    kinds.append("overlap")
    return tuple(kinds)


def recoveries(fault_times: Sequence[float], completions: Sequence[tuple[float, int]]) -> list[float | None]:
    """For each fault time, the seconds until the first checkpoint completed after it (None:
    none did). ``completions`` are (time, id) in time order, on the same clock."""
    out: list[float | None] = []
    for at in fault_times:
        nxt = next((t for t, _ in completions if t > at), None)
        out.append(None if nxt is None else round(nxt - at, 2))
    return out


def shares(spout_tasks: Sequence[int], n: int) -> dict[int, int]:
    """How many sentences each spout task owns (task i of p reads i, i+p, ...)."""
    ordered = sorted(spout_tasks)
    return {t: len(range(i, n, len(ordered))) for i, t in enumerate(ordered)}


def count_problems(counts: Counter[str], expected: Counter[str]) -> list[str]:
    """What differs between the checkpoint's counts and the plain count (empty: exact)."""
    if counts == expected:
        return []
    high = sorted(w for w in counts if counts[w] > expected[w])
    low = sorted(w for w in expected if counts[w] < expected[w])
    return [f"{sum(counts.values())} words counted, expected {sum(expected.values())}: "
            f"{len(high)} words too high (e.g. {high[:3]}), {len(low)} too low (e.g. {low[:3]})"]


def expected_rows(n: int) -> Counter[str]:
    """The rows every sink must hold, each once: sentence i's word at each position, i < n."""
    return Counter(entry(i, pos, word) for i in range(n) for pos, word in enumerate(wc_common.sentence(i).split()))


def _row_order(row: str) -> tuple[int, int, str]:
    i, pos, word = [*row.split(":", 2), "", ""][:3]
    return (int(i), int(pos), word) if i.isdigit() and pos.isdigit() else (-1, -1, row)


def row_problems(sink: str, rows: Counter[str], expected: Counter[str]) -> list[str]:
    """What differs between a sink's rows (row -> times written) and the input's (empty:
    exact): rows written more than once, rows missing, rows the input never had."""
    if rows == expected:
        return []
    twice = sorted((r for r in rows if rows[r] > expected[r] > 0), key=_row_order)
    missing = sorted((r for r in expected if rows[r] < expected[r]), key=_row_order)
    extra = sorted((r for r in rows if rows[r] > 0 and not expected[r]), key=_row_order)
    parts = [f"{len(rows_)} {what} (e.g. {rows_[:3]})" for rows_, what in
             ((twice, "written more than once"), (missing, "missing"), (extra, "not in the input")) if rows_]
    return [f"{sink}: {sum(rows.values())} rows, expected {sum(expected.values())}: " + ", ".join(parts)]


# --- I/O: one run -------------------------------------------------------------------------------

@dataclass
class Applied:
    fault: Fault
    at: float  # when it was applied (seconds after the faults began)
    target: str  # the process label, port or note
    recovery_s: float | None = None


@dataclass
class Result:
    seed: int
    containers: int
    standby: bool
    applied: list[Applied]
    exact: bool
    checkpoint_id: int | None
    problems: list[str] = field(default_factory=list)
    restores: list[str] = field(default_factory=list)  # the master's restore lines, for the causes
    elapsed_s: float = 0.0
    sinks: dict[str, int] = field(default_factory=dict)  # each sink checked: the rows it held at the end

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


class Checker:
    """Runs one schedule on one topology under ``home``."""

    def __init__(self, home: Path, sched: Schedule, *, rate: float, duration: float,
                 disk: eo_faults.FullDisk | None, zk_restart: Callable[[Callable[[], None] | None], None] | None,
                 log: Callable[[str], None] = print, clock: Callable[[], float] = time.monotonic,
                 final_timeout: float = 300.0, servers: eo_faults.Servers | None = None,
                 sinks: tuple[str, ...] = (), netns: str | None = None, sink_timeout: float = 120.0) -> None:
        self.final_timeout = final_timeout
        self.home = home
        self.sched = sched
        self.name = f"eo{sched.seed}"
        self.n = int(2 * rate * duration)  # 2 spout tasks: the input lasts the whole schedule
        self.rate = rate
        self.disk = disk
        self.zk_restart = zk_restart
        self._es_seen: dict[str, Any] = {}
        self.log = log
        self.clock = clock
        self.paths = TopologyPaths.of(self.name, home)
        self.state = open_state(statecfg.resolve(home=home), home)
        self.servers = servers
        self.sinks = sinks  # of SINKS: what the topology writes to, checked row by row at the end
        self.sink_timeout = sink_timeout
        self.out = home / "sink-out"  # the file sink's folder
        self.cuts = eo_netns.Cuts(netns) if netns is not None else None
        self.store_url = servers.url(STORE) if servers is not None and STORE in servers.servers else None
        self.storage: CheckpointStorage
        if self.store_url is not None:
            from heron_py.checkpoint.redis_storage import RedisCheckpointStorage  # redis-py: only when used

            self.storage = RedisCheckpointStorage(self.store_url)  # checksums only: a tool's reader
        else:
            self.storage = LocalFsStorage(disk.where if disk else home / "checkpoints")
        self.completions: list[tuple[float, int]] = []
        self.stopped: set[int] = set()
        self.spawned: list[subprocess.Popen[bytes]] = []  # masters started with their clock behind
        self._done = threading.Event()
        self._watcher: threading.Thread | None = None

    def es(self) -> dict[str, Any]:
        try:
            return self.state.get_execution_state(self.name) or {}
        except Exception:  # a ZooKeeper restart: asked again
            return {}

    def _watch(self, t0: float) -> None:
        """Records when each new complete checkpoint appears (the recoveries' clock)."""
        last = 0
        while True:
            stopping = self._done.is_set()  # one more look after the stop: the final checkpoint counts
            try:
                ids = self.storage.completed_ids(self.name)
            except (OSError, CheckpointError):
                ids = []
            if ids and ids[-1] > last:
                last = ids[-1]
                self.completions.append((self.clock() - t0, last))
            if stopping:
                return
            time.sleep(0.2)

    def start(self) -> None:
        props = {"topology.tmanager.standby": "true" if self.sched.standby else "false"}
        if self.disk is not None:
            props["heron_py.checkpoint.root"] = str(self.disk.where)
        if self.store_url is not None:
            props.update({"heron_py.checkpoint.storage": "redis", "heron_py.checkpoint.redis.url": self.store_url})
        topology, args = TOPOLOGY, ["--sentences", str(self.n), "--interval", "1", "--rate", str(self.rate),
                                    "--containers", str(self.sched.containers)]
        if self.sinks:
            assert self.servers is not None or set(self.sinks) == {"files"}
            topology = SINKS_TOPOLOGY
            if "postgres" in self.sinks:
                assert self.servers is not None
                self.servers.servers["postgres"].execute(f"CREATE TABLE {TABLE} (entry text)")  # no key
                args += ["--postgres", self.servers.url("postgres"), "--table", TABLE]
            if "files" in self.sinks:
                args += ["--out", str(self.out)]
            if "redis" in self.sinks:
                assert self.servers is not None
                args += ["--redis", self.servers.url("redis"), "--hash", HASH]
        run_local(topology, args, home=self.home, name=self.name, keep_running=True, timeout=120, properties=props)
        if _wait(lambda: self.storage.completed_ids(self.name), 120.0, self.clock) is None:
            raise RuntimeError(f"{self.name}: no checkpoint completed within 120 s of the start")

    def run(self) -> Result:
        began = self.clock()
        applied: list[Applied] = []
        try:
            self.start()
            t0 = self.clock()
            self._watcher = threading.Thread(target=self._watch, args=(t0,), daemon=True)
            self._watcher.start()
            for fault in self.sched.faults:
                time.sleep(max(0.0, fault.at - (self.clock() - t0)))
                a = self.apply(fault, t0)
                applied.append(a)
                self.log(f"  {fault.describe():<52} on {a.target} (applied at {a.at:.2f} s)")
            found = _wait(self.final_counts, self.final_timeout, self.clock, stop=self.waiting_for_operator)
            # the sinks are read while the topology runs: their last commits follow the final checkpoint
            sink_problems, sink_rows = self.check_sinks() if self.sinks and found is not None else ([], {})
        finally:
            self._done.set()
            if self._watcher is not None:
                self._watcher.join(5.0)
            for pid in self.stopped:
                eo_faults.cont(pid)
            if self.servers is not None:
                for server in list(self.servers.frozen):
                    self.servers.thaw(server)
            if self.cuts is not None:
                self.cuts.heal_all()
            if self.disk is not None:
                self.disk.free()
            try:
                kill_local(self.home, self.name)
            finally:
                # a kill that failed (the CLI could not even start) leaves no topology behind
                for pid in eo_faults.leftovers(self.home, self.name):
                    eo_faults.kill9(pid)
                self.state.close()
                if self.store_url is not None:
                    self.storage.close()  # type: ignore[attr-defined]
                for proc in self.spawned:  # ended by kill (they carry the topology's id): reaped here
                    proc.wait(10)
        for a, rec in zip(applied, recoveries([a.at for a in applied], self.completions), strict=True):
            a.recovery_s = rec
        problems: list[str] = []
        cid = None
        if found is None:
            why = self.waiting_for_operator() or (f"no complete checkpoint covered the whole input within "
                                                  f"{self.final_timeout:g} s of the last fault")
            problems.append(why)
        else:
            cid, counts = found
            problems += count_problems(counts, wc_common.expected_counts(self.n))
            problems += sink_problems
        return Result(self.sched.seed, self.sched.containers, self.sched.standby, applied, not problems, cid,
                      problems, self.restores(), round(self.clock() - began, 1), sink_rows)

    # --- the sinks

    def read_sinks(self) -> tuple[dict[str, Counter[str]], list[str]]:
        """Each sink's rows (row -> times written), and what could not be read."""
        found: dict[str, Counter[str]] = {}
        errors: list[str] = []
        for sink in self.sinks:
            name = {"postgres": f"postgres table {TABLE}", "files": "part files", "redis": f"redis hash {HASH}"}[sink]
            try:
                if sink == "postgres":
                    assert self.servers is not None
                    rows = self.servers.servers["postgres"].execute(f"SELECT entry FROM {TABLE}")
                    found[name] = Counter(r for (r,) in rows)
                elif sink == "files":
                    # part-COMPONENT-TASK-CHECKPOINT-K, each renamed into place whole (hidden while written)
                    found[name] = Counter(line for part in sorted(self.out.glob("part-*"))
                                          for line in part.read_text().splitlines())
                else:
                    assert self.servers is not None
                    client = self.servers.servers["redis"].client()
                    try:
                        found[name] = Counter({k.decode(): int(v) for k, v in client.hgetall(HASH).items()})
                    finally:
                        client.close()
            except Exception as e:  # a server not answering: read again until the sink timeout
                errors.append(f"{name}: cannot be read: {type(e).__name__}: {str(e).strip()[:200]}")
        return found, errors

    def check_sinks(self) -> tuple[list[str], dict[str, int]]:
        """Waits (up to ``sink_timeout``) for every sink to hold exactly the input's rows, then
        reads them again after 3 more checkpoints: a batch written twice late shows there. The
        problems name each sink's rows written more than once, missing and not in the input."""
        expected = expected_rows(self.n)
        t0 = self.clock()
        while True:
            found, problems = self.read_sinks()
            problems += [p for name, rows in found.items() for p in row_problems(name, rows, expected)]
            if not problems:
                settled = len(self.completions) + 3
                _wait(lambda: len(self.completions) >= settled, 30.0, self.clock)  # noqa: B023  (used at once)
                found, problems = self.read_sinks()
                problems += [p for name, rows in found.items() for p in row_problems(name, rows, expected)]
                break
            if self.clock() - t0 > self.sink_timeout:
                problems.append(f"the sinks were not exact within {self.sink_timeout:g} s of the final checkpoint")
                break
            time.sleep(1.0)
        return problems, {name: sum(rows.values()) for name, rows in found.items()}

    def waiting_for_operator(self) -> str | None:
        ck = self.es().get("checkpoints") or {}
        if ck.get("waiting_for_operator"):
            return f"the topology waits for the operator: {ck.get('restore_error') or ck.get('failure')}"
        return None

    def restores(self) -> list[str]:
        lines: list[str] = []
        for f in sorted(self.paths.logs.glob("container-*/tmanager*.log")):
            lines += [ln.strip() for ln in f.read_text(errors="replace").splitlines()
                      if re.search(r"restore \d+ to |rollback|waiting for the operator|FAILING", ln)]
        return lines

    def final_counts(self) -> tuple[int, Counter[str]] | None:
        """(id, summed counts) of the newest complete checkpoint whose spout positions are the
        ends of their shares (as tests/integration/test_effectively_once.py reads them)."""
        try:
            packing = self.state.get_packing_plan(self.name)
        except Exception:  # a ZooKeeper restart: asked again
            return None
        if packing is None:
            return None
        tasks: dict[str, list[int]] = {}
        for placed in packing.tasks:
            tasks.setdefault(placed.component, []).append(placed.task_id)
        want = shares(tasks[SPOUT], self.n)
        try:
            ids = self.storage.completed_ids(self.name)
        except (OSError, CheckpointError):
            return None
        for cid in reversed(ids):
            try:
                pos = {t: pickle.loads(self.storage.load(self.name, cid, t) or pickle.dumps({})).get("pos")
                       for t in want}
                if pos != want:
                    continue
                counts: Counter[str] = Counter()
                for t in tasks[COUNT]:
                    counts.update(pickle.loads(self.storage.load(self.name, cid, t) or pickle.dumps({})))
            except (OSError, CheckpointError):  # gc removed it after the listing
                continue
            return cid, counts
        return None

    # --- the faults

    def apply(self, fault: Fault, t0: float) -> Applied:
        at = round(self.clock() - t0, 2)
        if fault.kind in ("kill", "stop"):
            return Applied(fault, at, self._signal(fault.kind, fault.role, fault.pick, fault.hold_s))
        if fault.kind == "reset":
            return Applied(fault, at, self._reset(fault.role, fault.pick))
        if fault.kind in ("sink_restart", "sink_freeze", "store_freeze"):
            return Applied(fault, at, self._server_fault(fault))
        if fault.kind == "partition":
            return Applied(fault, at, self._partition(fault))
        if fault.kind == "half_open":
            return Applied(fault, at, self._half_open(fault))
        if fault.kind == "overlap":
            return Applied(fault, at, self._overlap(fault))
        if fault.kind == "clock_behind":
            return self._clock_behind(fault, at)
        if fault.kind == "disk_full":
            assert self.disk is not None
            size = self.disk.fill()
            time.sleep(fault.hold_s)
            self.disk.free()
            return Applied(fault, at, f"the checkpoint tmpfs ({size >> 10} KiB filler)")
        assert self.zk_restart is not None
        if fault.kind == "zk_links":
            reset: list[int] = []

            def links() -> None:  # while ZooKeeper is down: the master cannot act on what it hears
                for _ in range(2):
                    ports = [int(st["port"]) for st in self._es_seen.get("stmgrs", {}).values() if st.get("port")]
                    reset.extend(eo_faults.reset_port(port) for port in ports)
                    time.sleep(0.4)

            self._es_seen = self.es()  # read while the state manager is still up
            self.zk_restart(links)
            return Applied(fault, at, f"the server, and {sum(reset)} stream manager connections reset while it "
                                      f"was down")
        self.zk_restart(None)
        return Applied(fault, at, "the server")

    def _signal(self, kind: str, role: str, pick: int, hold_s: float) -> str:
        """kill -9, or SIGSTOP for ``hold_s`` then SIGCONT, of a live process of ``role``; the target."""
        procs: list[eo_faults.Proc] = []

        def live() -> bool:
            active = int(self.es().get("tmanager", {}).get("pid") or 0)
            procs[:] = [p for p in eo_faults.processes(self.home, self.name, active) if p.role == role]
            return bool(procs)

        # a process of the role may be between incarnations (restarted after the previous fault)
        if _wait(live, 15.0, self.clock) is None:
            return f"no live {role} (skipped)"
        p = procs[pick % len(procs)]
        if kind == "kill":
            eo_faults.kill9(p.pid)
            return f"{p.label} pid {p.pid}"
        eo_faults.stop(p.pid)
        self.stopped.add(p.pid)
        time.sleep(hold_s)
        eo_faults.cont(p.pid)
        self.stopped.discard(p.pid)
        return f"{p.label} pid {p.pid}"

    def _listening(self, role: str) -> list[tuple[str, int]]:
        """(label, port) of the master's (``tmanager``) or every stream manager's listening port."""
        es = self.es()
        if role == "tmanager":
            ports = [("tmanager", int(es.get("tmanager", {}).get("port") or 0))]
        else:
            ports = sorted((f"stmgr c{c}", int(s["port"])) for c, s in es.get("stmgrs", {}).items())
        return [p for p in ports if p[1]]

    def _reset(self, role: str, pick: int) -> str:
        ports = self._listening(role)
        if not ports:
            return "no port known (skipped)"
        label, port = ports[pick % len(ports)]
        n = eo_faults.reset_port(port)
        return f"{label} port {port}: {n} connections reset"

    def _server_fault(self, fault: Fault) -> str:
        """A sink server restarted (down ``hold_s``), or a sink server or the store frozen."""
        assert self.servers is not None, f"{fault.kind} drawn without its server"
        port = self.servers.port(fault.role)
        if fault.kind == "sink_restart":
            self.servers.restart(fault.role, fault.hold_s)
            return f"{fault.role} server port {port}"
        self.servers.freeze(fault.role)
        try:
            time.sleep(fault.hold_s)
        finally:
            self.servers.thaw(fault.role)
        return f"{'redis checkpoint store' if fault.role == STORE else fault.role + ' server'} port {port}"

    def _partition(self, fault: Fault) -> str:
        """Every TCP packet to or from the ports of the target dropped for ``hold_s``: a server's
        port, or every socket (listening or connected) of the active master or of a container's
        processes (its stream manager, metrics manager, instances and executor; the master too
        when it runs there, as on one host)."""
        assert self.cuts is not None, "partition drawn outside the checker's network namespace"
        if fault.role in SERVERS:
            assert self.servers is not None
            ports = {self.servers.port(fault.role)}
            what = f"{fault.role} port {self.servers.port(fault.role)}"
        else:
            active = int(self.es().get("tmanager", {}).get("pid") or 0)
            procs = eo_faults.processes(self.home, self.name, active)
            if fault.role == "tmanager":
                pids = {p.pid for p in procs if p.pid == active}
                what = f"tmanager pid {active}"
            else:
                containers = sorted({p.container for p in procs if p.container is not None})
                if not containers:
                    return "no container known (skipped)"
                c = containers[fault.pick % len(containers)]
                pids = {p.pid for p in procs if p.container == c}
                what = f"container {c} ({len(pids)} processes)"
            ports = eo_netns.ports_of(pids)
            if not ports:
                return f"{what}: no TCP socket (skipped)"
            what += f", {len(ports)} ports"
        self.cuts.cut(ports)
        try:
            time.sleep(fault.hold_s)
        finally:
            self.cuts.heal(ports)
        return what

    def _half_open(self, fault: Fault) -> str:
        """A listening port cut, then one side of its connections killed (their RST dropped by
        the cut), healed after ``hold_s``: the other side held a connection to nobody."""
        assert self.cuts is not None, "half_open drawn outside the checker's network namespace"
        ports = self._listening(fault.role)
        if not ports:
            return "no port known (skipped)"
        label, port = ports[fault.pick % len(ports)]
        self.cuts.cut([port])
        try:
            n = eo_netns.kill_side(port, fault.side)
            time.sleep(fault.hold_s)
        finally:
            self.cuts.heal([port])
        return f"{label} port {port}: {n} {fault.side}-side sockets killed behind the cut"

    def _overlap(self, fault: Fault) -> str:
        """kill -9, then ``delay_s`` later, while the topology recovers from it, a second fault."""
        first = self._signal("kill", fault.role, fault.pick, 0.0)
        done = len(self.completions)
        time.sleep(fault.delay_s)
        second = self._signal("kill", fault.then_role, fault.then_pick, 0.0) if fault.then == "kill" \
            else self._reset(fault.then_role, fault.then_pick)
        during = "before the next checkpoint" if len(self.completions) == done else "AFTER a checkpoint completed"
        return f"{first}, then {second} ({during})"


    def _clock_behind(self, fault: Fault, at: float) -> Applied:
        lib = eo_faults.faketime_lib()
        assert lib is not None, "clock_behind drawn without libfaketime"
        old = int(self.es().get("tmanager", {}).get("pid") or 0)
        if not old or not eo_faults.signal_pid(old, 0):
            return Applied(fault, at, "no active master known (skipped)")
        executor = eo_faults.parent_executor(old)
        if executor is not None:
            eo_faults.stop(executor)
            self.stopped.add(executor)
        try:
            proc = eo_faults.master_with_clock_behind(old, lib, fault.skew_s, self.paths.logs)
            self.spawned.append(proc)
            became = _wait(lambda: int(self.es().get("tmanager", {}).get("pid") or 0) == proc.pid, 20.0, self.clock)
        finally:
            if executor is not None:
                eo_faults.cont(executor)
                self.stopped.discard(executor)
        return Applied(fault, at, f"tmanager active pid {old}, replaced by pid {proc.pid} "
                                  f"({'active' if became else 'NOT active within 20 s'})")


def _wait(cond: Callable[[], Any], timeout: float, clock: Callable[[], float],
          stop: Callable[[], Any] | None = None) -> Any:
    """Polls ``cond`` until it returns something true (returned), ``stop`` returns something
    true, or ``timeout``: None."""
    t0 = clock()
    while clock() - t0 < timeout:
        v = cond()
        if v:
            return v
        if stop is not None and stop():
            return None
        time.sleep(0.25)
    return None


def report(r: Result, log: Callable[[str], None] = print) -> None:
    log(f"seed {r.seed}: {r.containers} containers{', a standby master' if r.standby else ''}, "
        f"{len(r.applied)} faults, {r.elapsed_s:g} s: {'EXACT' if r.exact else 'NOT EXACT'}"
        + (f" (checkpoint {r.checkpoint_id})" if r.checkpoint_id else ""))
    for a in r.applied:
        rec = f"recovered in {a.recovery_s:.2f} s" if a.recovery_s is not None else "no checkpoint completed after it"
        log(f"  {a.fault.describe():<52} on {a.target}: {rec}")
    if r.sinks:
        log("  sinks: " + ", ".join(f"{name} {n} rows" for name, n in r.sinks.items())
            + (" (every row of the input once)" if r.exact else ""))
    for p in r.problems:
        log(f"  PROBLEM: {p}")
    if not r.exact:
        for line in r.restores[-20:]:
            log(f"  master: {line}")


TABLE_HEADER = ("| seed | containers | standby | faults (time: fault on target, recovery) | result |\n"
                "|---|---|---|---|---|\n")


def markdown_row(r: dict[str, Any]) -> str:
    """One schedule's table line, from a result as ``--json`` writes it (pure)."""
    return markdown_rows([r]).splitlines()[-1] + "\n"


def append_row(path: Path, r: dict[str, Any]) -> None:
    """Appends a schedule's row to a markdown file (the header first, into a new or empty one)
    and flushes it: a batch cut short keeps every row that ended."""
    new = not path.exists() or path.stat().st_size == 0
    with path.open("a") as f:
        f.write((TABLE_HEADER if new else "") + markdown_row(r))


def markdown_rows(rows: Sequence[dict[str, Any]]) -> str:
    """A markdown table of results as ``--json`` writes them (pure): one line per schedule."""
    out = TABLE_HEADER.splitlines()
    for r in rows:
        faults = "; ".join(
            f"{a['at']:.1f} s: {Fault(**a['fault']).describe().split('s  ', 1)[1]} on {a['target']}, "
            + (f"{a['recovery_s']:.1f} s" if a["recovery_s"] is not None else "no checkpoint after")
            for a in r["applied"])
        sinks = "".join(f"; {name}: {n} rows" for name, n in (r.get("sinks") or {}).items())
        verdict = f"exact (checkpoint {r['checkpoint_id']}{sinks})" if r["exact"] else \
            "NOT EXACT: " + "; ".join(r["problems"])
        out.append(f"| {r['seed']} | {r['containers']} | {'yes' if r['standby'] else 'no'} | {faults} | {verdict} |")
    return "\n".join(out) + "\n"


def run_schedules(seeds: Sequence[int], duration: float, *, rate: float, zookeeper: bool,
                  roles: tuple[str, ...] = ROLES, final_timeout: float = 300.0, only: tuple[str, ...] = KINDS,
                  base: Path | None = None, log: Callable[[str], None] = print,
                  on_result: Callable[[Result], None] | None = None, sinks: bool = False,
                  redis_checkpoints: bool = False, netns: str | None = None, netns_why: str = "",
                  sink_timeout: float = 120.0) -> list[Result]:
    """Runs each seed's schedule, one topology at a time, each under a fresh heron home (and with
    fresh servers). ``netns``: the network namespace this process runs in (partitions and
    half-open links are drawn), or None and ``netns_why`` not. RuntimeError when
    ``redis_checkpoints`` is asked for and no redis-server can run here."""
    scratch = Path(tempfile.mkdtemp(prefix="heron-eo-", dir=base))
    caps = eo_faults.Capabilities.probe(scratch, netns, netns_why)
    notes = list(caps.notes)
    wanted = (SINK_SERVERS if sinks else ()) + ((STORE,) if redis_checkpoints else ())
    servers = eo_faults.Servers.probe(scratch, wanted, notes)
    for note in notes:
        log(f"note: {note}")
    if redis_checkpoints and STORE not in servers:
        raise RuntimeError(f"--redis-checkpoints: no redis-server can run here ({notes[-1]})")
    checked = tuple(s for s in SINKS if s == "files" or s in servers) if sinks else ()
    kinds = drawable_kinds(caps, zookeeper=zookeeper, servers=servers)
    cfg = ScheduleConfig(duration, tuple(k for k in kinds if k in only), roles=roles, servers=servers)
    log(f"kinds drawn: {', '.join(cfg.kinds)}" + (f"; sinks checked: {', '.join(checked)}" if checked else "")
        + ("; checkpoints in redis" if redis_checkpoints else "") + (f"; network namespace {netns}" if netns else ""))
    results: list[Result] = []
    for seed in seeds:
        home = scratch / f"seed-{seed}"
        home.mkdir()
        results.append(_one(home, schedule(seed, cfg), duration, rate, caps, zookeeper, log, final_timeout,
                            sinks=checked, store=redis_checkpoints, netns=netns if caps.partition else None,
                            sink_timeout=sink_timeout))
        report(results[-1], log)
        if on_result is not None:
            on_result(results[-1])
    return results


def _one(home: Path, sched: Schedule, duration: float, rate: float, caps: eo_faults.Capabilities,
         zookeeper: bool, log: Callable[[str], None], final_timeout: float = 300.0, *, sinks: tuple[str, ...] = (),
         store: bool = False, netns: str | None = None, sink_timeout: float = 120.0) -> Result:
    env_before = dict(os.environ)
    os.environ["HERON_PY_HOME"] = str(home)
    server = None
    servers = None
    # checkpoints in Redis leave the folder unused: no tmpfs to fill. With sinks every sink
    # task's state holds its staged rows until their checkpoint commits: a few MB per
    # checkpoint kept, more while a fault holds the commits back
    disk = (eo_faults.FullDisk(home / "ckpt-tmpfs", size_mb=64 if sinks else 16)
            if caps.disk_full and not store else None)
    try:
        names = tuple(s for s in SINK_SERVERS if s in sinks) + ((STORE,) if store else ())
        if names:
            servers = eo_faults.Servers(home / "servers", names)
        if zookeeper:
            # imported by name: tests/zkserver.py is not typed
            server = importlib.import_module("tests.zkserver").ZkServer(home / "zookeeper")
            server.start()
            os.environ.update({"HERON_PY_STATE_MANAGER": "zookeeper", "HERON_PY_ZK": server.hosts + "/eo",
                               "HERON_PY_ZK_AUTH_FILE": str(home / "zk.auth")})
        if disk is not None:
            disk.mount()
        log(f"seed {sched.seed}: {sched.containers} containers, standby {sched.standby}, "
            f"{len(sched.faults)} faults over {duration:g} s, home {home}")
        checker = Checker(home, sched, rate=rate, duration=duration, disk=disk,
                          zk_restart=eo_faults.zk_restarter(server) if server else None, log=log,
                          final_timeout=final_timeout, servers=servers, sinks=sinks, netns=netns,
                          sink_timeout=sink_timeout)
        return checker.run()
    finally:
        if disk is not None:
            disk.unmount()
        if server is not None:
            server.stop()
        if servers is not None:
            servers.stop()
        os.environ.clear()
        os.environ.update(env_before)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seed", type=int, default=None, help="the first seed (default: random, printed)")
    ap.add_argument("--schedules", type=int, default=1, help="how many seeds, from --seed up")
    ap.add_argument("--duration", type=float, default=60.0, help="seconds of faults per schedule")
    ap.add_argument("--rate", type=float, default=300.0, help="sentences per second per spout task")
    ap.add_argument("--zookeeper", action="store_true", help="the ZooKeeper state manager, and its restarts")
    ap.add_argument("--sinks", action="store_true",
                    help="the topology also writes every word to a PostgreSQL table, part files and a Redis hash "
                         "(servers the checker starts), each checked row by row; and the sink servers' faults")
    ap.add_argument("--redis-checkpoints", action="store_true",
                    help="the checkpoints in a redis-server the checker starts, and its freezes")
    ap.add_argument("--sink-timeout", type=float, default=120.0,
                    help="seconds after the final checkpoint for the sinks to hold the whole input")
    ap.add_argument("--roles", default=",".join(ROLES),
                    help=f"the processes kill -9 and SIGSTOP pick from, comma-separated (default: {','.join(ROLES)})")
    ap.add_argument("--final-timeout", type=float, default=300.0,
                    help="seconds after the last fault for a checkpoint covering the whole input")
    ap.add_argument("--kinds", default=",".join(KINDS),
                    help=f"the fault kinds to draw from, among those this machine can make, comma-separated "
                         f"(default: {','.join(KINDS)}); e.g. without clock_behind to replay a schedule of before")
    ap.add_argument("--json", type=Path, default=None, help="append each result as a JSON line here")
    ap.add_argument("--out", type=Path, default=None,
                    help="append each schedule's markdown table row here as it ends (the header first, "
                         "when the file is new or empty)")
    ap.add_argument("--markdown", type=Path, default=None,
                    help="only print the markdown table of the results in this --json file")
    # set by the checker itself when it re-executes inside the network namespace it made
    ap.add_argument("--in-netns", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.markdown is not None:
        print(markdown_rows([json.loads(ln) for ln in args.markdown.read_text().splitlines() if ln]), end="")
        return 0
    roles = tuple(r for r in args.roles.split(",") if r)
    only = tuple(k for k in args.kinds.split(",") if k)
    try:
        ScheduleConfig(args.duration, kinds=only, roles=roles, servers=SERVERS)
    except ValueError as e:
        ap.error(str(e))
    if args.seed is None:  # drawn once, here: a re-execution inside the namespace gets it as --seed
        args.seed = random.SystemRandom().randrange(1 << 20)
        argv += ["--seed", str(args.seed)]
    netns_why = "left out by --kinds"
    if args.in_netns is None and {"partition", "half_open"} & set(only):
        ns, netns_why = eo_netns.create()
        if ns is not None:
            print(f"network namespace {ns}: the checker runs inside it", flush=True)
            # the script's path, not -m: the namespace's process may start in any folder
            return eo_netns.run_inside(ns, [sys.executable, str(Path(__file__).resolve()), *argv, "--in-netns", ns])

    def save(r: Result) -> None:  # as each schedule ends: a long batch cut short keeps its results
        if args.json is not None:
            with args.json.open("a") as f:
                f.write(json.dumps(r.to_json()) + "\n")
        if args.out is not None:
            append_row(args.out, r.to_json())

    try:
        results = run_schedules(range(args.seed, args.seed + args.schedules), args.duration, rate=args.rate,
                                zookeeper=args.zookeeper, roles=roles, final_timeout=args.final_timeout, only=only,
                                on_result=save, sinks=args.sinks, redis_checkpoints=args.redis_checkpoints,
                                netns=args.in_netns, netns_why=netns_why, sink_timeout=args.sink_timeout)
    except RuntimeError as e:
        print(f"eo_checker: {e}", file=sys.stderr)
        return 2
    bad = [r.seed for r in results if not r.exact]
    print(f"{len(results)} schedules, {len(results) - len(bad)} exact" + (f"; not exact: seeds {bad}" if bad else ""))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
