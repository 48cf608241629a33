"""A running word count on the local scheduler, as its user and as another local user (uid
65534, a real process): the heron home and the topology's folders are 0700 and every log
0600; the page's address comes with an admin token and a read-only one; another user on the
host reads the page's numbers but not a task's log without a token; the read token reads
logs and cannot act; the admin token acts."""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from heron_py.common.container_layout import TopologyPaths
from heron_py.testing import run_local
from tests.conftest import EXAMPLES
from tests.support import run_cli

pytestmark = pytest.mark.integration
NAME = "wc_private"
NOBODY = 65534
LOG_REFUSED = ("a task's log needs the header 'Authorization: Bearer TOKEN' with the topology's read or admin token "
               "from anyone but the topology's own user on this host (heron-py status prints the page's address "
               "with them), found no Authorization header")


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _as_nobody(url: str, token: str | None = None) -> tuple[int, str]:
    code = ("import sys, urllib.request, urllib.error\n"
            "req = urllib.request.Request(sys.argv[1])\n"
            "if len(sys.argv) > 2: req.add_header('Authorization', 'Bearer ' + sys.argv[2])\n"
            "try:\n"
            "    r = urllib.request.urlopen(req, timeout=10); print(r.status); print(r.read().decode(), end='')\n"
            "except urllib.error.HTTPError as e:\n"
            "    print(e.code); print(e.read().decode(), end='')\n")
    p = subprocess.run(["/usr/bin/python3", "-c", code, url, *([token] if token else [])], capture_output=True,
                       text=True, timeout=30, user=NOBODY, group=NOBODY, cwd="/", env={"PATH": "/usr/bin:/bin"})
    assert p.returncode == 0, p.stderr
    status, _, body = p.stdout.partition("\n")
    return int(status), body


def _post(url: str, token: str) -> int:
    req = urllib.request.Request(url, method="POST", headers={"Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return int(r.status)
    except urllib.error.HTTPError as e:
        return int(e.code)


@pytest.mark.skipif(os.geteuid() != 0, reason="starting a process of another user needs root")
def test_logs_are_the_users_alone(heron_home: Path) -> None:
    os.chmod(heron_home, 0o755)  # as a user's umask makes it: narrowed at the first command
    run_local(EXAMPLES / "reliable_word_count.py", ["--sentences", "100000000", "--rate", "50"], home=heron_home,
              name=NAME, keep_running=True)
    paths = TopologyPaths.of(NAME, heron_home)
    for d in (heron_home, heron_home / "topologies", paths.root, paths.logs, paths.container_logs(0),
              paths.container(0)):
        assert _mode(d) == 0o700, d
    logs = sorted(paths.logs.rglob("*.log"))
    assert any(p.name.startswith("sentence-") for p in logs), logs
    assert {p.name: _mode(p) for p in logs} == {p.name: 0o600 for p in logs}

    status = run_cli(heron_home, "status", "local", NAME)
    page = re.search(r"^  web page and HTTP API: (http://\S+/)#token=([0-9a-f]{64})$", status.stdout, re.M)
    read = re.search(r"^  read-only \(no actions\): (http://\S+/)#token=([0-9a-f]{64})$", status.stdout, re.M)
    assert page and read and page.group(1) == read.group(1), status.stdout
    base, admin_token, read_token = page.group(1).rstrip("/"), page.group(2), read.group(2)
    assert admin_token != read_token

    tasks = json.loads(_as_nobody(f"{base}/topologies/tasks")[1])["result"]["tasks"]
    task = next(t for t, row in tasks.items() if row["component"] == "sentence")
    log_url = f"{base}/topologies/logs?task={task}"
    assert _as_nobody(log_url) == (401, LOG_REFUSED)
    code, body = _as_nobody(log_url, read_token)
    assert code == 200 and json.loads(body)["result"]["component"] == "sentence"
    with urllib.request.urlopen(log_url, timeout=10) as r:  # the topology's own user needs none
        assert json.loads(r.read())["result"]["component"] == "sentence"

    assert _post(f"{base}/topologies/actions/deactivate", read_token) == 401
    assert "RUNNING" in run_cli(heron_home, "status", "local", NAME).stdout
    assert _post(f"{base}/topologies/actions/deactivate", admin_token) == 200
    assert re.search(r"^topology wc_private: PAUSED", run_cli(heron_home, "status", "local", NAME).stdout, re.M)
