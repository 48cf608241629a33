"""The CLI's admin link to the topology master (heron_py/cli/admin.py): a master that refuses
the CLI is one clear error."""

import asyncio
import logging
import threading
from types import SimpleNamespace

import pytest

from heron_py.common.net import BaseHandler, Counters, serve
from heron_py.state import TManagerLocation


def test_a_handshake_error_in_an_admin_command_is_one_clear_error(tmp_path):
    from heron_py.cli.admin import AdminError, admin_command

    async def other_topologys_master():
        return await serve("127.0.0.1", 0, BaseHandler, b"another topology's secret", role="tmanager",
                           log=logging.getLogger("other"), counters=Counters())

    loop = asyncio.new_event_loop()
    server = loop.run_until_complete(other_topologys_master())
    port = server.sockets[0].getsockname()[1]
    t = threading.Thread(target=loop.run_forever, daemon=True)
    t.start()
    try:
        state = SimpleNamespace(get_tmanager_location=lambda n: TManagerLocation("127.0.0.1", port, 1),
                                get_secret=lambda n: b"our secret", get_tls=lambda n: None)
        with pytest.raises(AdminError) as e:
            admin_command(state, "wc", "status", timeout=5.0)
        assert str(e.value) == (
            f"topology master of 'wc' at 127.0.0.1:{port} refused the CLI: server 127.0.0.1:{port} refused us: "
            "authentication failed (expected the master of 'wc'; is the location in the state manager stale?)")
    finally:
        loop.call_soon_threadsafe(loop.stop)
        t.join(5)


def test_a_command_waits_for_a_master_being_replaced_and_refuses_an_unknown_topology_at_once():
    """A submitted topology (its secret stored) without a live master is waited for: its master
    is being relaunched or a standby is taking over; one never submitted is refused at once."""
    from heron_py.cli.admin import AdminError, master_of
    from tests.fakes import ManualClock

    clock = ManualClock(0.0)
    here = TManagerLocation("127.0.0.1", 1, 1)
    looks = []

    def location(name):
        looks.append(clock.t)
        return here if clock.t >= 3.0 else None  # the relaunched master registers at 3 s

    state = SimpleNamespace(get_tmanager_location=location, get_secret=lambda n: b"s")
    assert master_of(state, "wc", 15.0, clock, clock.sleep) == (here, b"s")
    assert looks[0] == 0.0 and looks[-1] == pytest.approx(3.0)
    state = SimpleNamespace(get_tmanager_location=lambda n: None, get_secret=lambda n: b"s")
    with pytest.raises(AdminError) as e:
        master_of(state, "wc", 15.0, clock, clock.sleep)
    assert str(e.value) == ("topology 'wc' has no live topology master: none registered in 15 s "
                            "(its executors relaunch a dead one; see 'heron-py logs')")
    started = clock.t
    state = SimpleNamespace(get_tmanager_location=lambda n: None, get_secret=lambda n: None)
    with pytest.raises(AdminError) as e:
        master_of(state, "nope", 15.0, clock, clock.sleep)
    assert str(e.value) == "topology 'nope' is not running (no topology master in the state manager)"
    assert clock.t == started  # no wait
