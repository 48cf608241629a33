"""Chaos run (issue 18): an at-least-once word count on 2 containers with ZooKeeper state;
every few seconds a seeded random kill -9 of one process of the topology (an instance, a
stream manager, a metrics manager, the active topology master) and, once, a ZooKeeper restart.
Then: every message id acked exactly once, the counts at least the plain counts and exact
after de-duplication by id, and no process left behind after ``heron-py kill``.

    python tests/chaos/chaos_run.py --seed 7 --duration 120
    python tests/chaos/chaos_run.py --zk 127.0.0.1:2181/chaos   # a ZooKeeper of yours (no restart)

Without ``--zk`` it starts a ZooKeeper of its own (the Debian ``zookeeper`` package), which
it also restarts once. It prints the seed, each kill with its recovery time, and the totals;
its exit code is 0 when every check holds. tests/chaos/test_chaos.py runs a 30-second version.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(ROOT))

import psutil  # noqa: E402

from heron_py.common.container_layout import TopologyPaths  # noqa: E402
from heron_py.state import config as statecfg  # noqa: E402
from heron_py.state import open_state  # noqa: E402
from heron_py.testing import run_local  # noqa: E402
from heron_py.testing.local import kill_local  # noqa: E402

TOPOLOGY = Path(__file__).with_name("chaos_topology.py")
KINDS = ("instance", "stmgr", "metricsmgr", "tmanager")
RECOVERY_TIMEOUT_S = 45.0


# --- pure: the schedule and the checks ----------------------------------------------------

@dataclass(frozen=True)
class Fault:
    at: float  # seconds after the start of the chaos
    kind: str  # one of KINDS, or "zookeeper"


def schedule(seed: int, duration: float, *, gap: tuple[float, float] = (3.0, 6.0),
             zookeeper: bool = True) -> list[Fault]:
    """The faults of a run, a function of the seed: one every 3-6 s, kinds drawn uniformly,
    one ZooKeeper restart near the middle instead of a kill."""
    rng = random.Random(seed)
    out: list[Fault] = []
    t = rng.uniform(*gap)
    while t < duration:
        out.append(Fault(round(t, 2), rng.choice(KINDS)))
        t += rng.uniform(*gap)
    if zookeeper and out:
        mid = min(range(len(out)), key=lambda i: abs(out[i].at - duration / 2))
        out[mid] = Fault(out[mid].at, "zookeeper")
    return out


@dataclass
class Totals:
    sentences: int
    acked_ids: int
    duplicate_acks: int
    words_written: int  # rows the count tasks wrote, replays included
    words_unique: int  # after de-duplication by (sentence id, position)
    problems: list[str] = field(default_factory=list)


def check_output(out: Path, n: int, plain: Callable[[int], str]) -> Totals:
    """Reads the spout's ack logs and the count tasks' files against the plain count."""
    acks: Counter[int] = Counter()
    for f in out.glob("acks-*.log"):
        acks.update(int(line) for line in f.read_text().splitlines() if line)
    dup_file = out / "duplicate-acks.log"
    dups = len(dup_file.read_text().splitlines()) if dup_file.exists() else 0
    rows: list[tuple[int, int, str]] = []
    for f in out.glob("count-*.txt"):
        for line in f.read_text().splitlines():
            sid, pos, word = line.split(" ")
            rows.append((int(sid), int(pos), word))
    expected: Counter[str] = Counter(w for sid in range(n) for w in plain(sid).split())
    written: Counter[str] = Counter(w for _, _, w in rows)
    unique = {(sid, pos): w for sid, pos, w in rows}
    totals = Totals(n, len(acks), dups, len(rows), len(unique))
    if set(acks) != set(range(n)):
        totals.problems.append(f"acked ids: expected 0..{n - 1}, missing {len(set(range(n)) - set(acks))}")
    if any(c != 1 for c in acks.values()) or dups:
        totals.problems.append(f"ids acked more than once: {sum(c > 1 for c in acks.values()) + dups}")
    short = [w for w, c in expected.items() if written[w] < c]
    if short:
        totals.problems.append(f"{len(short)} words counted fewer times than the plain count, e.g. {short[:3]}")
    if Counter(unique.values()) != expected:
        totals.problems.append("counts after de-duplication by (sentence id, position) differ from the plain count")
    return totals


# --- I/O: the topology's processes ---------------------------------------------------------

class Topology:
    def __init__(self, home: Path, name: str) -> None:
        self.home = home
        self.name = name
        self.paths = TopologyPaths.of(name, home)
        self.state = open_state(statecfg.resolve(home=home), home)

    def es(self) -> dict[str, Any]:
        try:
            return self.state.get_execution_state(self.name) or {}
        except Exception:  # ZooKeeper restarting: the caller asks again
            return {}

    def mm_pid(self, container: int) -> int:
        try:
            return int(json.loads((self.paths.container(container) / "metricsmgr.json").read_text())["pid"])
        except (FileNotFoundError, ValueError, KeyError):
            return 0

    def candidates(self, kind: str) -> list[tuple[str, int]]:
        """(label, pid) of the live processes of a kind, sorted (the seed picks among them)."""
        es = self.es()
        if kind == "instance":
            return sorted((f"{i['component']}-{t}", int(i["pid"])) for t, i in es.get("instances", {}).items()
                          if i.get("pid") and i.get("ready"))
        if kind == "stmgr":
            return sorted((f"stmgr {c}", int(s["pid"])) for c, s in es.get("stmgrs", {}).items())
        if kind == "metricsmgr":
            return [(f"metricsmgr {c}", self.mm_pid(c)) for c in (0, 1) if self.mm_pid(c)]
        if kind == "tmanager":
            pid = es.get("tmanager", {}).get("pid")
            return [("tmanager (active)", int(pid))] if pid else []
        raise ValueError(kind)

    def recovered(self, kind: str, label: str, old_pid: int) -> bool:
        """Whether the killed process's successor is back at its job."""
        es = self.es()
        if kind == "instance":
            task = label.rsplit("-", 1)[1]
            i = es.get("instances", {}).get(task, {})
            return i.get("pid") not in (None, 0, old_pid) and bool(i.get("ready"))
        if kind == "stmgr":
            s = es.get("stmgrs", {}).get(label.split()[1], {})
            return s.get("pid") not in (None, old_pid) and len(es.get("stmgrs", {})) == 2
        if kind == "metricsmgr":
            return self.mm_pid(int(label.split()[1])) not in (0, old_pid)
        if kind == "tmanager":
            try:
                loc = self.state.get_tmanager_location(self.name)
            except Exception:
                return False
            tm = es.get("tmanager", {})
            # back at its job: active, and both stream managers registered with it again
            return (loc is not None and loc.pid != old_pid and tm.get("pid") == loc.pid
                    and bool(tm.get("active_since")) and len(es.get("stmgrs", {})) == 2)
        raise ValueError(kind)

    def leftovers(self) -> list[str]:
        me = os.getpid()
        out = []
        for p in psutil.process_iter(["pid", "cmdline"]):
            try:
                cmd = " ".join(p.info["cmdline"] or ())
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                continue
            if p.info["pid"] != me and str(self.home) in cmd and "zookeeper" not in cmd.lower():
                out.append(f"{p.info['pid']} {cmd[:120]}")
        return out


def _wait(cond: Callable[[], bool], timeout: float) -> float | None:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if cond():
            return time.monotonic() - t0
        time.sleep(0.1)
    return None


@dataclass
class Kill:
    at: float
    kind: str
    label: str
    pid: int
    recovery_s: float | None


def inflict(topo: Topology, fault: Fault, rng: random.Random, zk_restart: Callable[[], None] | None,
            t0: float) -> Kill:
    at = round(time.monotonic() - t0, 2)
    if fault.kind == "zookeeper":
        if zk_restart is None:
            return Kill(at, "zookeeper", "not restarted (an outside ZooKeeper)", 0, 0.0)
        began = time.monotonic()
        zk_restart()  # stop, 1 s down, start: recovery counts from the stop
        rec = _wait(lambda: topo.es().get("tmanager") is not None and _location(topo), RECOVERY_TIMEOUT_S)
        return Kill(at, "zookeeper", "server stopped, restarted", 0,
                    None if rec is None else time.monotonic() - began)
    cands: list[tuple[str, int]] = []
    # a process of the kind may be between incarnations (a restart after the previous fault)
    _wait(lambda: bool(cands.extend(topo.candidates(fault.kind)) or cands), 15.0)
    if not cands:
        return Kill(at, fault.kind, "none alive to kill", 0, None)
    label, pid = rng.choice(cands)
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    rec = _wait(lambda: topo.recovered(fault.kind, label, pid), RECOVERY_TIMEOUT_S)
    return Kill(at, fault.kind, label, pid, rec)


def _location(topo: Topology) -> bool:
    try:
        return topo.state.get_tmanager_location(topo.name) is not None
    except Exception:
        return False


def chaos(home: Path, seed: int, duration: float, *, rate: float = 60.0, zk_restart: Callable[[], None] | None,
          log: Callable[[str], None] = print) -> tuple[list[Kill], Totals, list[str]]:
    """Runs the topology under the faults of ``seed``; returns the kills, the totals and the
    processes left after kill (none expected)."""
    name = f"chaos{seed}"
    out = home / "chaos-out"
    out.mkdir(parents=True, exist_ok=True)
    n = int(rate * duration)  # the spout keeps emitting through the whole run
    log(f"chaos run: seed {seed}, {duration:g} s of faults, {n} sentences at {rate:g}/s, home {home}")
    run_local(TOPOLOGY, ["--sentences", str(n), "--rate", str(rate), "--out", str(out)], home=home, name=name,
              keep_running=True, timeout=120)
    topo = Topology(home, name)
    kills: list[Kill] = []
    try:
        if _wait(lambda: len(topo.candidates("instance")) == 5 and len(topo.candidates("stmgr")) == 2, 60) is None:
            raise RuntimeError("the topology did not start within 60 s")
        rng = random.Random(seed ^ 0x5EED)
        t0 = time.monotonic()
        for fault in schedule(seed, duration, zookeeper=True):
            time.sleep(max(0.0, fault.at - (time.monotonic() - t0)))
            k = inflict(topo, fault, rng, zk_restart, t0)
            kills.append(k)
            rec = f"{k.recovery_s:.2f} s" if k.recovery_s is not None else f"NOT within {RECOVERY_TIMEOUT_S:g} s"
            what = "restart" if k.kind == "zookeeper" else "kill -9"
            log(f"  t={k.at:6.2f} s  {what} {k.kind:<10} {k.label:<26} pid {k.pid:<7} recovered in {rec}")
        acked = _wait(lambda: sum(len(f.read_text().splitlines()) for f in out.glob("acks-*.log")) >= n, 180)
        when = f"{acked:.1f} s after the last fault" if acked is not None else "NOT within 180 s"
        log(f"every sentence acked {when}")
        time.sleep(1.0)
    finally:
        kill_local(home, name)
        topo.state.close()
    left = _leftovers_after(topo)
    from tests.chaos.chaos_topology import sentence

    totals = check_output(out, n, sentence)
    log(f"totals: {totals.sentences} sentences, {totals.acked_ids} ids acked, {totals.duplicate_acks} duplicate acks, "
        f"{totals.words_written} words written ({totals.words_written - totals.words_unique} replayed duplicates), "
        f"{totals.words_unique} after de-duplication (plain count {10 * n}); "
        f"{len(kills)} faults, processes left after kill: {len(left)}")
    for p in totals.problems:
        log(f"PROBLEM: {p}")
    return kills, totals, left


def _leftovers_after(topo: Topology) -> list[str]:
    left: list[str] = []
    for _ in range(50):  # kill waits for the executors; their children go with them
        left = topo.leftovers()
        if not left:
            break
        time.sleep(0.2)
    return left


def ok(kills: list[Kill], totals: Totals, left: list[str]) -> bool:
    return not totals.problems and not left and all(k.recovery_s is not None for k in kills)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seed", type=int, default=None, help="default: random (printed)")
    ap.add_argument("--duration", type=float, default=120.0, help="seconds of faults")
    ap.add_argument("--rate", type=float, default=60.0, help="sentences per second")
    ap.add_argument("--zk", default=None, help="HOST:PORT[/chroot] of a ZooKeeper of yours (not restarted)")
    ap.add_argument("--home", type=Path, default=None, help="heron-py home for the run (default: a temporary one)")
    args = ap.parse_args(argv)
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1 << 30)
    home = args.home or Path(tempfile.mkdtemp(prefix="heron-chaos-"))
    server = None
    if args.zk is None:
        from tests.zkserver import ZkServer

        server = ZkServer(home / "zookeeper")
        server.start()
        zk = server.hosts + "/chaos"
    else:
        zk = args.zk
    os.environ.update({"HERON_PY_HOME": str(home), "HERON_PY_STATE_MANAGER": "zookeeper", "HERON_PY_ZK": zk,
                       "HERON_PY_ZK_AUTH_FILE": str(home / "zk.auth")})

    def restart() -> None:
        assert server is not None
        server.stop()
        time.sleep(1.0)
        server.start()

    try:
        kills, totals, left = chaos(home, seed, args.duration, rate=args.rate,
                                    zk_restart=restart if server is not None else None)
    finally:
        if server is not None:
            server.stop()
    print(f"seed {seed}: {'OK' if ok(kills, totals, left) else 'FAILED'}")
    return 0 if ok(kills, totals, left) else 1


if __name__ == "__main__":
    sys.exit(main())
