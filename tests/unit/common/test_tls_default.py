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


