"""The local scheduler's per-topology supervisor: it restarts an executor that died.

An executor restarts its own children, and the topology master relaunches a container whose
stream manager went silent; but nothing watched the executors themselves. A container whose
executor died stays dead when nobody relaunches it: container 0 without a standby master (the
master never relaunches its own container, and it outlives its executor), or any container
while the master is down. Heron's local scheduler keeps a thread per executor that waits for
it and starts it again unless the topology was killed; this is the same job in a process of its
own, since ``heron-py submit`` exits once the topology runs.

``submit local`` starts it (``LocalScheduler.launch``); ``kill`` stops it before it stops the
executors, so it never restarts one after a kill; it also exits on its own once the topology's
record is gone or names another run (another submit under the name). A dead executor is
relaunched whole with the scheduler's ``restart`` of that container (which first stops the
processes the dead executor left, such as container 0's master), under the topology's
scheduler lock shared with the master's relauncher, after a backoff that doubles from 1.5 s to
10 s and resets once the executor stayed up for 30 s. Each restart is a line in
``logs/supervisor.log``.

If the supervisor itself dies, the topology runs on unsupervised as before (the master still
relaunches silent containers); nothing restarts it.
"""

from __future__ import annotations

import argparse
import logging
import os
import select
import signal
import socket
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from heron_py.common.daemon import setup_logging
from heron_py.common.process import StopSignals
from heron_py.state import StateManager, StateManagerError, open_state
from heron_py.state import config as statecfg

# the first wait lets the dead executor's children notice it (alive.BEAT_S) and stop on their own,
# so a relaunch rarely has to stop them
BACKOFF_MIN_S = 1.5
BACKOFF_MAX_S = 10.0
STABLE_S = 30.0  # an executor up this long has recovered: its next death restarts at the minimum
TICK_S = 0.5


@dataclass
class _Slot:
    backoff: float = BACKOFF_MIN_S
    due_at: float | None = None  # when the dead executor is to be relaunched
    restarted_at: float | None = None
    restarts: int = 0


@dataclass
class RestartBook:
    """When each container's dead executor is relaunched. Pure: the caller says which
    containers' executors are dead now and which it relaunched; an injected clock."""

    slots: dict[int, _Slot] = field(default_factory=dict)

    def due(self, dead: set[int], now: float) -> list[int]:
        """The containers whose executor is to be relaunched now (sorted). A container seen dead
        the first time waits its backoff; one seen alive again (someone else relaunched it, the
        master's relauncher or ``heron-py restart``) is forgotten until it dies again."""
        out = []
        for k in sorted(dead):
            slot = self.slots.setdefault(k, _Slot())
            if slot.due_at is None:
                slot.due_at = now + self._backoff(slot, now)
            if now >= slot.due_at:
                out.append(k)
        for k, slot in self.slots.items():
            if k not in dead:
                slot.due_at = None
        return out

    def relaunched(self, k: int, now: float) -> _Slot:
        slot = self.slots.setdefault(k, _Slot())
        slot.restarts += 1
        slot.restarted_at = now
        slot.due_at = None
        return slot

    def forget(self, k: int) -> None:
        self.slots.setdefault(k, _Slot()).due_at = None

    def failed(self, k: int, now: float) -> None:
        """A relaunch that raised: tried again after the next backoff."""
        slot = self.slots.setdefault(k, _Slot())
        slot.restarted_at = now
        slot.due_at = now + self._backoff(slot, now)

    @staticmethod
    def _backoff(slot: _Slot, now: float) -> float:
        """The wait before the next relaunch; doubles while the executor keeps dying young."""
        if slot.restarted_at is None or now - slot.restarted_at >= STABLE_S:
            slot.backoff = BACKOFF_MIN_S
        elif slot.restarts:
            slot.backoff = min(BACKOFF_MAX_S, slot.backoff * 2)
        return slot.backoff


def reap_children() -> None:
    """Collects the exit status of executors this process started and that died since: they
    would stay zombies, which psutil still lists."""
    while True:
        try:
            pid, _status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


class WakingStop(StopSignals):
    """StopSignals whose wait between two passes ends at the signal: ``kill`` waits for this
    process to exit before it stops the executors, and a plain sleep made it wait out the rest
    of the tick (the handler runs, then the sleep goes on). The wait is a ``select`` on the
    interpreter's signal wakeup fd, to which the C-level handler writes a byte: no lock is taken
    in the handler (setting a threading.Event there could deadlock on the Event's own lock, held
    by the very wait the signal interrupted)."""

    def __init__(self) -> None:
        super().__init__()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._old_wakeup_fd = signal.set_wakeup_fd(self._wake_w.fileno(), warn_on_full_buffer=False)

    def close(self) -> None:
        """Gives the wakeup fd back (a process that goes on after its loop, as a test does)."""
        signal.set_wakeup_fd(self._old_wakeup_fd)
        self._wake_r.close()
        self._wake_w.close()

    def wait(self, timeout_s: float) -> bool:
        """Sleeps ``timeout_s`` or until a signal arrives; whether a stop was requested."""
        if not self.requested:
            select.select([self._wake_r], [], [], timeout_s)
            try:
                self._wake_r.recv(512)  # drain: the next wait sleeps again
            except BlockingIOError:
                pass
        return self.requested


class LocalSchedulerLike(Protocol):
    """What the supervisor needs of ``LocalScheduler`` (a protocol: tests can drive the loop
    with a scheduler of their own, and this module does not import local.py at load)."""

    state: StateManager

    def dead_executors(self, name: str, topology_id: str) -> dict[int, int]:
        """Container -> recorded pid of each executor that is gone."""

    def relaunch_if_gone(self, name: str, container: int, pid: int) -> int | None:
        """Relaunches the container when its record still names ``pid`` and it is gone; the new
        executor's pid, or None when someone else relaunched it first."""


class Supervisor:
    """The I/O loop: reads the record, asks the scheduler which executors are gone, relaunches."""

    def __init__(self, name: str, topology_id: str, scheduler: LocalSchedulerLike, log: logging.Logger,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.name = name
        self.topology_id = topology_id
        self.scheduler = scheduler
        self.log = log
        self.clock = clock
        self.book = RestartBook()

    def tick(self) -> bool:
        """One pass; False once the topology this supervisor was started for is gone."""
        reap_children()
        info = self.scheduler.state.get_scheduler_location(self.name) or {}
        if str(info.get("topology_id", "")) != self.topology_id:
            self.log.info("topology '%s' (%s) is no longer running here: the supervisor stops",
                          self.name, self.topology_id)
            return False
        now = self.clock()
        dead = self.scheduler.dead_executors(self.name, self.topology_id)
        for k in self.book.due(set(dead), now):
            old = dead[k]
            try:
                new_pid = self.scheduler.relaunch_if_gone(self.name, k, old)
            except Exception as e:  # any failure is logged and retried after a backoff
                self.book.failed(k, now)
                self.log.error("container %d: relaunching its executor failed: %s; retrying in %.1f s", k, e,
                               self.book.slots[k].backoff)
                continue
            if new_pid is None:
                self.book.forget(k)  # someone else relaunched it meanwhile
                continue
            slot = self.book.relaunched(k, now)
            self.log.warning("container %d: its executor (pid %d) was gone; relaunched the container (executor "
                             "pid %d), restart %d", k, old, new_pid, slot.restarts)
        return True


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="heron_py.scheduler.supervisor")
    ap.add_argument("--topology", required=True)
    ap.add_argument("--topology-id", required=True)
    ap.add_argument("--home", type=Path, default=None)
    ap.add_argument("--host", default="127.0.0.1")
    statecfg.add_arguments(ap)
    args = ap.parse_args(argv)
    log = setup_logging("supervisor")
    state_config = statecfg.resolve(args, home=args.home)
    from heron_py.scheduler.local import LocalScheduler

    try:
        state = open_state(state_config, args.home)
    except StateManagerError as e:
        log.error("topology '%s': the supervisor cannot start: %s", args.topology, e)
        return 2
    sched = LocalScheduler(state, args.home, state_config, host=args.host)
    sup = Supervisor(args.topology, args.topology_id, sched, log)
    signals = WakingStop()
    log.info("supervising the executors of topology '%s' (%s)", args.topology, args.topology_id)
    while not signals.requested:
        try:
            if not sup.tick():
                break
        except StateManagerError as e:
            log.warning("state manager: %s; retrying", e)  # a ZooKeeper outage: wait it out
        except Exception:  # a supervisor that died of one odd error would leave the topology unsupervised
            log.exception("supervisor pass failed; trying again")
        signals.wait(TICK_S)
    log.info("supervisor of topology '%s' stopped", args.topology)
    state.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
