"""The Slurm scheduler: one batch job per container, each running the container's executor.

One job per container (not one job of N tasks) because containers live and die on their
own: ``restart --container K`` and a container lost with its node are one ``scancel`` and
one ``sbatch``, without touching the jobs of the other containers. Jobs ask for a whole node
(``--exclusive``, unless ``--share``) so that containers spread over nodes, as Heron's
containers spread over hosts.

The batch scripts are written under ``$HERON_PY_HOME/topologies/NAME/slurm/`` for the user to
read; each job's own output (the executor's log) goes to
``logs/container-K/slurm-JOBID.out`` beside the daemons' logs, on the shared home. The
executor binds to the address its node uses to reach ZooKeeper (``--host auto``).
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from heron_py.common.container_layout import TOPOLOGY_ID_ENV, TopologyPaths
from heron_py.scheduler.base import ContainerStatus, Scheduler, SchedulerError
from heron_py.state import StateConfig, StateManager

JOB_PREFIX = "heronpy"


@dataclass(frozen=True)
class SlurmOptions:
    partition: str | None = None
    time_limit: str | None = None  # sbatch --time
    python: str = ""  # the interpreter on the nodes; default: the one running the CLI
    exclusive: bool = True
    host: str = "auto"  # what each executor binds: "auto" = its address toward ZooKeeper


_SLURM_VALUE = __import__("re").compile(r"[A-Za-z0-9_.,:+-]+")


def check_slurm_value(what: str, value: str) -> str:
    """A value written into an ``#SBATCH`` line: one token of the characters Slurm's partitions
    and time limits use; a newline or a space would inject lines into the job script."""
    if not _SLURM_VALUE.fullmatch(value):
        raise SchedulerError(f"slurm scheduler: {what} {value!r}: expected letters, digits and '_.,:+-' only "
                             f"(it goes into an #SBATCH line)")
    return value


def job_name(topology: str, container: int) -> str:
    return f"{JOB_PREFIX}-{topology}-{container}"


def batch_script(*, topology: str, container: int, topology_id: str, home: Path, python: str,
                 options: SlurmOptions, state_args: Sequence[str]) -> str:
    """The sbatch script of one container (pure)."""
    paths = TopologyPaths.of(topology, home)
    logs = paths.container_logs(container)
    head = [
        "#!/bin/bash",
        f"#SBATCH --job-name={job_name(topology, container)}",
        "#SBATCH --nodes=1",
        "#SBATCH --ntasks=1",
        f"#SBATCH --output={logs}/slurm-%j.out",
        f"#SBATCH --chdir={paths.root}",
    ]
    if options.exclusive:
        head.append("#SBATCH --exclusive")
    if options.partition:
        head.append(f"#SBATCH --partition={check_slurm_value('partition', options.partition)}")
    if options.time_limit:
        head.append(f"#SBATCH --time={check_slurm_value('time limit', options.time_limit)}")
    argv = [python, "-m", "heron_py.scheduler.executor", "--topology", topology, "--container", str(container),
            "--home", str(home), "--host", options.host, *state_args]
    body = [
        "# written by heron-py submit slurm; one container of the topology per job",
        "set -e",
        f"mkdir -p {shlex.quote(str(logs))}",
        "# containers see the user's code only through the topology package",
        "unset PYTHONPATH",
        f"export HERON_PY_HOME={shlex.quote(str(home))}",
        f"export {TOPOLOGY_ID_ENV}={shlex.quote(topology_id)}",
        "export PYTHONUNBUFFERED=1",
        "echo \"heron-py container " + str(container) + " of " + topology + " on $(hostname) (job $SLURM_JOB_ID)\"",
        "exec " + " ".join(shlex.quote(a) for a in argv),
    ]
    return "\n".join(head + body) + "\n"


def parse_squeue(text: str) -> dict[str, tuple[str, str]]:
    """``squeue -h -o '%i|%T|%N'`` output -> job id -> (state, node list) (pure)."""
    out: dict[str, tuple[str, str]] = {}
    for line in text.splitlines():
        parts = line.strip().split("|")
        if len(parts) == 3 and parts[0]:
            out[parts[0]] = (parts[1].lower(), parts[2])
    return out


class SlurmScheduler(Scheduler):
    kind = "slurm"
    cluster = True

    def __init__(self, state: StateManager, home: Path | None = None, state_config: StateConfig | None = None,
                 options: SlurmOptions | None = None) -> None:
        super().__init__(state)
        self.home = home
        self.state_config = state_config or StateConfig()
        self.options = options or SlurmOptions()

    # --- the Slurm commands ---
    @staticmethod
    def _tool(name: str) -> str:
        path = shutil.which(name)
        if path is None:
            raise SchedulerError(f"slurm scheduler: {name} not found on PATH; expected Slurm's client commands "
                                 f"(Debian: apt-get install slurm-client) on the machine that runs heron-py")
        return path

    def _run(self, argv: list[str], what: str) -> str:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=60)
        if p.returncode != 0:
            raise SchedulerError(f"slurm scheduler: {what} failed (exit code {p.returncode}): "
                                 f"{(p.stderr or p.stdout).strip()[:500]}")
        return p.stdout

    def _submit(self, name: str, container: int, topology_id: str) -> str:
        paths = TopologyPaths.of(name, self.home)
        folder = paths.private(paths.root / "slurm")
        paths.private(paths.container_logs(container))
        script = folder / f"container-{container}.sbatch"
        script.write_text(batch_script(topology=name, container=container, topology_id=topology_id,
                                       home=paths.home, python=self.options.python or _python(),
                                       options=self.options, state_args=self.state_config.to_args()))
        out = self._run([self._tool("sbatch"), "--parsable", str(script)], f"sbatch {script}")
        job = out.strip().split(";")[0]
        if not job.isdigit():
            raise SchedulerError(f"slurm scheduler: sbatch {script} answered {out.strip()[:200]!r}; "
                                 f"expected a job id")
        return job

    def _cancel(self, jobs: list[str]) -> None:
        # stored job ids come from the state store: only numbers go to scancel (an "-u user" or a
        # "--signal" there would cancel or signal other jobs)
        bad = [j for j in jobs if not str(j).isdigit()]
        if bad:
            raise SchedulerError(f"slurm scheduler: stored job ids {bad!r} are not Slurm job ids (expected digits "
                                 f"only); refusing to pass them to scancel")
        if jobs:
            # a job already gone is no error for scancel: nothing to check
            subprocess.run([self._tool("scancel"), *jobs], capture_output=True, text=True, timeout=60)

    def _queue(self, jobs: list[str]) -> dict[str, tuple[str, str]]:
        if not jobs:
            return {}
        out = self._run([self._tool("squeue"), "-h", "-o", "%i|%T|%N", "-j", ",".join(jobs)], "squeue")
        return parse_squeue(out)

    def _wait_gone(self, jobs: list[str], grace_s: float) -> None:
        deadline = time.monotonic() + grace_s
        while jobs and time.monotonic() < deadline:
            try:
                left = [j for j, (st, _) in self._queue(jobs).items() if st not in ("completed", "cancelled")]
            except SchedulerError:
                left = []  # squeue refuses ids it has forgotten: they are gone
            if not left:
                return
            time.sleep(0.5)

    # --- Scheduler ---
    @classmethod
    def check_tools(cls) -> None:
        for tool in ("sbatch", "squeue", "scancel"):
            cls._tool(tool)

    def launch(self, name: str, num_containers: int) -> dict[str, Any]:
        topology_id = f"{name}-{uuid.uuid4().hex[:12]}"
        jobs: dict[str, str] = {}
        try:
            for k in range(num_containers):
                jobs[str(k)] = self._submit(name, k, topology_id)
        except SchedulerError:
            self._cancel(list(jobs.values()))
            raise
        o = self.options
        # the options go with the record: a topology master that relaunches a lost container
        # submits it the way the user did
        info: dict[str, Any] = {"scheduler": "slurm", "topology_id": topology_id, "jobs": jobs,
                                "options": {"partition": o.partition or "", "time_limit": o.time_limit or "",
                                            "python": o.python or _python(), "exclusive": o.exclusive}}
        self.state.set_scheduler_location(name, info)
        return info

    def restart(self, name: str, containers: list[int], num_containers: int, grace_s: float = 10.0) -> None:
        info = self.record(name)
        jobs = {str(k): str(v) for k, v in dict(info.get("jobs", {})).items()}
        stop = [k for k in jobs if int(k) in containers or int(k) >= num_containers]
        self._cancel([jobs[k] for k in stop])
        self._wait_gone([jobs[k] for k in stop], grace_s)
        for k in stop:
            jobs.pop(k, None)
        for c in containers:
            if c < num_containers:
                jobs[str(c)] = self._submit(name, c, str(info.get("topology_id", "")))
        info["jobs"] = jobs
        self.state.set_scheduler_location(name, info)

    def kill(self, name: str, grace_s: float = 10.0) -> list[int]:
        info = self.record(name)
        jobs = [str(v) for v in dict(info.get("jobs", {})).values()]
        self._cancel(jobs)
        self._wait_gone(jobs, grace_s)
        return []

    def containers(self, name: str) -> list[ContainerStatus]:
        info = self.record(name)
        jobs = {int(k): str(v) for k, v in dict(info.get("jobs", {})).items()}
        queue = self._queue(list(jobs.values()))
        out = []
        for k, job in sorted(jobs.items()):
            st, nodes = queue.get(job, ("gone", ""))
            out.append(ContainerStatus(k, st, nodes, job))
        return out


def _python() -> str:
    import sys

    return sys.executable
