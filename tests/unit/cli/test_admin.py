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
