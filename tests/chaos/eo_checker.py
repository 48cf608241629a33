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

Each schedule runs to the end of the input and checks the counts of the newest complete
checkpoint covering the whole input are exactly the plain Python count. It prints the seed,
every fault with its time, and each fault's recovery time (until the next checkpoint completes
after it). Exit code 1 when any schedule is not exact.

    python -m tests.chaos.eo_checker --seed 1 --schedules 5 --duration 60 --out results.md
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

from heron_py.checkpoint.storage import CheckpointError, LocalFsStorage  # noqa: E402
from heron_py.scheduler.paths import TopologyPaths  # noqa: E402
from heron_py.state import config as statecfg  # noqa: E402
from heron_py.state import open_state  # noqa: E402
from heron_py.testing import run_local  # noqa: E402
from heron_py.testing.local import kill_local  # noqa: E402
from tests.chaos import eo_faults  # noqa: E402

TOPOLOGY = ROOT / "examples" / "stateful_word_count.py"
SPOUT, COUNT = "sentence", "count"
ROLES = ("instance", "stmgr", "metricsmgr", "tmanager", "standby", "executor")
# how often each kind is drawn, among the kinds this machine can make
WEIGHTS = {"kill": 4, "stop": 3, "reset": 2, "disk_full": 2, "zk_restart": 1, "zk_links": 1}
# kinds drawn in place of another: a clock-behind master replaces a kill -9 of the master
DERIVED = ("clock_behind",)
KINDS = (*WEIGHTS, *DERIVED)
STOP_S = (1.0, 15.0)
FULL_S = (2.0, 10.0)
SKEW_S = (30.0, 900.0)  # how far behind the replaced master's wall clock is
CLOCK_SHARE = 0.5  # of the kill -9 of the active master, when the machine can set a clock back


# --- pure: the schedule, recoveries and the exactness check ------------------------------------

@dataclass(frozen=True)
class ScheduleConfig:
    duration: float  # seconds of faults
    kinds: tuple[str, ...] = ("kill", "stop")  # what this machine can make (see Capabilities)
    gap: tuple[float, float] = (3.0, 7.0)  # seconds between the end of a fault and the next
    roles: tuple[str, ...] = ROLES  # the processes kill and stop pick from

    def __post_init__(self) -> None:
        if not self.roles or any(r not in ROLES for r in self.roles):
            raise ValueError(f"ScheduleConfig.roles: expected a non-empty subset of {list(ROLES)}, "
                             f"found {list(self.roles)}")
        bad = [k for k in self.kinds if k not in KINDS]
        if bad or not [k for k in self.kinds if k in WEIGHTS]:
            raise ValueError(f"ScheduleConfig.kinds: expected a non-empty subset of {sorted(KINDS)} with one of "
                             f"{sorted(WEIGHTS)}, found {list(self.kinds)}")
        if self.duration <= self.gap[0]:
            raise ValueError(f"ScheduleConfig.duration: expected more than {self.gap[0]:g} s (the first gap), "
                             f"found {self.duration:g}")


@dataclass(frozen=True)
class Fault:
    at: float  # seconds after the faults began
    kind: str  # kill, stop, reset, disk_full, zk_restart, clock_behind
    role: str = ""  # the process kind of kill and stop; "stmgr" or "tmanager" for a reset
    pick: int = 0  # which one among the live processes (or ports) of the role, modulo their number
    hold_s: float = 0.0  # how long a stop or a full disk lasts
    skew_s: float = 0.0  # how far behind a clock_behind master's wall clock is

    def describe(self) -> str:
        what = {"kill": f"kill -9 {self.role}", "stop": f"SIGSTOP {self.role} for {self.hold_s:.1f} s",
                "reset": f"TCP reset of the links to a {self.role}",
                "disk_full": f"checkpoint folder full for {self.hold_s:.1f} s",
                "zk_restart": "ZooKeeper restart",
                "zk_links": "ZooKeeper restart, the stream managers' links reset while it is down",
                "clock_behind": f"kill -9 tmanager, replaced with its clock {self.skew_s:.0f} s behind"}[self.kind]
        return f"t={self.at:6.2f} s  {what}"


@dataclass(frozen=True)
class Schedule:
    seed: int
    containers: int
    standby: bool
    faults: tuple[Fault, ...]


def schedule(seed: int, cfg: ScheduleConfig) -> Schedule:
    """The run a seed stands for: 2 or 3 containers, a standby master or not, and faults one
    after another (a stop or a full disk ends before the next fault starts)."""
    rng = random.Random(seed)
    clock_rng = random.Random(f"clock-behind-{seed}")  # its own stream: the other faults stay the seed's
    containers = rng.choice((2, 3))
    standby = rng.random() < 0.5
    roles = [r for r in cfg.roles if standby or r != "standby"] or list(cfg.roles)
    kinds = [k for k in cfg.kinds if k in WEIGHTS]
    weights = [WEIGHTS[k] for k in kinds]
    faults: list[Fault] = []
    t = rng.uniform(*cfg.gap)
    while t < cfg.duration:
        kind = rng.choices(kinds, weights)[0]
        pick = rng.randrange(1 << 16)
        if kind in ("kill", "stop"):
            role = rng.choice(roles)
            hold = round(rng.uniform(*STOP_S), 1) if kind == "stop" else 0.0
            fault = Fault(round(t, 2), kind, role, pick, hold)
            if (kind, role) == ("kill", "tmanager") and "clock_behind" in cfg.kinds \
                    and clock_rng.random() < CLOCK_SHARE:
                fault = Fault(round(t, 2), "clock_behind", role, pick, skew_s=round(clock_rng.uniform(*SKEW_S)))
        elif kind == "reset":
            fault = Fault(round(t, 2), kind, rng.choice(("stmgr", "stmgr", "tmanager")), pick)
        elif kind == "disk_full":
            fault = Fault(round(t, 2), kind, "", pick, round(rng.uniform(*FULL_S), 1))
        else:
            fault = Fault(round(t, 2), kind)
        faults.append(fault)
        t += fault.hold_s + rng.uniform(*cfg.gap)
    return Schedule(seed, containers, standby, tuple(faults))


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

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


class Checker:
    """Runs one schedule on one topology under ``home``."""

    def __init__(self, home: Path, sched: Schedule, *, rate: float, duration: float,
                 disk: eo_faults.FullDisk | None, zk_restart: Callable[[Callable[[], None] | None], None] | None,
                 log: Callable[[str], None] = print, clock: Callable[[], float] = time.monotonic,
                 final_timeout: float = 300.0) -> None:
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
        run_local(TOPOLOGY, ["--sentences", str(self.n), "--interval", "1", "--rate", str(self.rate),
                             "--containers", str(self.sched.containers)],
                  home=self.home, name=self.name, keep_running=True, timeout=120, properties=props)
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
        finally:
            self._done.set()
            if self._watcher is not None:
                self._watcher.join(5.0)
            for pid in self.stopped:
                eo_faults.cont(pid)
            if self.disk is not None:
                self.disk.free()
            try:
                kill_local(self.home, self.name)
            finally:
                self.state.close()
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
        return Result(self.sched.seed, self.sched.containers, self.sched.standby, applied, not problems, cid,
                      problems, self.restores(), round(self.clock() - began, 1))

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
            return self._signal(fault, at)
        if fault.kind == "reset":
            es = self.es()
            if fault.role == "tmanager":
                ports = [("tmanager", int(es.get("tmanager", {}).get("port") or 0))]
            else:
                ports = sorted((f"stmgr c{c}", int(s["port"])) for c, s in es.get("stmgrs", {}).items())
            ports = [p for p in ports if p[1]]
            if not ports:
                return Applied(fault, at, "no port known (skipped)")
            label, port = ports[fault.pick % len(ports)]
            n = eo_faults.reset_port(port)
            return Applied(fault, at, f"{label} port {port}: {n} connections reset")
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

    def _signal(self, fault: Fault, at: float) -> Applied:
        procs: list[eo_faults.Proc] = []

        def live() -> bool:
            active = int(self.es().get("tmanager", {}).get("pid") or 0)
            procs[:] = [p for p in eo_faults.processes(self.home, self.name, active) if p.role == fault.role]
            return bool(procs)

        # a process of the role may be between incarnations (restarted after the previous fault)
        if _wait(live, 15.0, self.clock) is None:
            return Applied(fault, at, f"no live {fault.role} (skipped)")
        p = procs[fault.pick % len(procs)]
        if fault.kind == "kill":
            eo_faults.kill9(p.pid)
            return Applied(fault, at, f"{p.label} pid {p.pid}")
        eo_faults.stop(p.pid)
        self.stopped.add(p.pid)
        time.sleep(fault.hold_s)
        eo_faults.cont(p.pid)
        self.stopped.discard(p.pid)
        return Applied(fault, at, f"{p.label} pid {p.pid}")


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
        verdict = f"exact (checkpoint {r['checkpoint_id']})" if r["exact"] else "NOT EXACT: " + "; ".join(r["problems"])
        out.append(f"| {r['seed']} | {r['containers']} | {'yes' if r['standby'] else 'no'} | {faults} | {verdict} |")
    return "\n".join(out) + "\n"


def run_schedules(seeds: Sequence[int], duration: float, *, rate: float, zookeeper: bool,
                  roles: tuple[str, ...] = ROLES, final_timeout: float = 300.0, only: tuple[str, ...] = KINDS,
                  base: Path | None = None, log: Callable[[str], None] = print,
                  on_result: Callable[[Result], None] | None = None) -> list[Result]:
    """Runs each seed's schedule, one topology at a time, each under a fresh heron home."""
    scratch = Path(tempfile.mkdtemp(prefix="heron-eo-", dir=base))
    caps = eo_faults.Capabilities.probe(scratch)
    for note in caps.notes:
        log(f"note: {note}")
    kinds = ["kill", "stop"] + (["reset"] if caps.reset else []) + (["disk_full"] if caps.disk_full else []) \
        + (["zk_restart"] if zookeeper else []) + (["zk_links"] if zookeeper and caps.reset else []) \
        + (["clock_behind"] if caps.clock_behind else [])
    cfg = ScheduleConfig(duration, tuple(k for k in kinds if k in only), roles=roles)
    results: list[Result] = []
    for seed in seeds:
        home = scratch / f"seed-{seed}"
        home.mkdir()
        results.append(_one(home, schedule(seed, cfg), duration, rate, caps, zookeeper, log, final_timeout))
        report(results[-1], log)
        if on_result is not None:
            on_result(results[-1])
    return results


def _one(home: Path, sched: Schedule, duration: float, rate: float, caps: eo_faults.Capabilities,
         zookeeper: bool, log: Callable[[str], None], final_timeout: float = 300.0) -> Result:
    env_before = dict(os.environ)
    os.environ["HERON_PY_HOME"] = str(home)
    server = None
    disk = eo_faults.FullDisk(home / "ckpt-tmpfs") if caps.disk_full else None
    try:
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
                          final_timeout=final_timeout)
        return checker.run()
    finally:
        if disk is not None:
            disk.unmount()
        if server is not None:
            server.stop()
        os.environ.clear()
        os.environ.update(env_before)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seed", type=int, default=None, help="the first seed (default: random, printed)")
    ap.add_argument("--schedules", type=int, default=1, help="how many seeds, from --seed up")
    ap.add_argument("--duration", type=float, default=60.0, help="seconds of faults per schedule")
    ap.add_argument("--rate", type=float, default=300.0, help="sentences per second per spout task")
    ap.add_argument("--zookeeper", action="store_true", help="the ZooKeeper state manager, and its restarts")
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
    args = ap.parse_args(argv)
    if args.markdown is not None:
        print(markdown_rows([json.loads(ln) for ln in args.markdown.read_text().splitlines() if ln]), end="")
        return 0
    first = args.seed if args.seed is not None else random.SystemRandom().randrange(1 << 20)
    roles = tuple(r for r in args.roles.split(",") if r)
    only = tuple(k for k in args.kinds.split(",") if k)
    try:
        ScheduleConfig(args.duration, kinds=only, roles=roles)
    except ValueError as e:
        ap.error(str(e))

    def save(r: Result) -> None:  # as each schedule ends: a long batch cut short keeps its results
        if args.json is not None:
            with args.json.open("a") as f:
                f.write(json.dumps(r.to_json()) + "\n")
        if args.out is not None:
            append_row(args.out, r.to_json())

    results = run_schedules(range(first, first + args.schedules), args.duration, rate=args.rate,
                            zookeeper=args.zookeeper, roles=roles, final_timeout=args.final_timeout, only=only,
                            on_result=save)
    bad = [r.seed for r in results if not r.exact]
    print(f"{len(results)} schedules, {len(results) - len(bad)} exact" + (f"; not exact: seeds {bad}" if bad else ""))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
