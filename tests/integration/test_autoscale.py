"""``heron-py autoscale`` on a real topology: a word count whose input steps 1x -> 4x -> 1x
(tests/integration/topologies/stepped_word_count.py: 15, then 60, then 15 sentences/s; the count
bolt takes 4 ms a word, so one task counts about 240 words/s and 4x needs 3 of them). The health
manager runs as its own process, with the topology's settings (``AUTOSCALE`` there: every 3 s
over 4 s windows, count between 1 and 4 tasks).

Asserted, at least once (every rescale live): after the step up, count's parallelism grows
within 3 actions and the topology keeps up (the newest sentence counted is within a few seconds
of the input); after the step down it shrinks within 3 actions; every step is on the master's
page and in container 0's Prometheus series; every sentence's 10 words are counted at least
once. Effectively once (every rescale live too, then a restore in place with count's state split
by key group): the same steps, and a checkpoint past every sentence arrived by 10 s after the
step down holds exactly the counts of the sentences before its spout's position.
The actions log is printed (pytest -s) with what each decision saw.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from heron_py.cli.autoscale_log import last_entries
from heron_py.testing import run_local
from heron_py.testing.local import kill_local, split_complete
from tests.support import wait_for

pytestmark = pytest.mark.integration

TOPOLOGY = Path(__file__).parent / "topologies" / "stepped_word_count.py"
NAME = "autoscaled"
KEEPS_UP_S = 6.0  # the newest sentence counted is at most this many seconds of input behind


def _topology_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("stepped_word_count", TOPOLOGY)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


class Counted:
    """The (sentence, position) pairs the count tasks received, from their capture files (each
    appended to by its task, and by the task's next process after an update), read on from
    where the last look stopped."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.offsets: dict[Path, int] = {}
        self.positions: dict[int, set[int]] = {}

    def newest(self) -> int:
        """The newest sentence a count task received a word of."""
        for f in sorted(self.folder.glob("count-*.jsonl")):
            with f.open("rb") as fh:
                fh.seek(self.offsets.get(f, 0))
                lines, used = split_complete(fh.read())
            self.offsets[f] = self.offsets.get(f, 0) + used
            for line in lines:
                _, sid, pos, _ = json.loads(line)["values"]
                self.positions.setdefault(sid, set()).add(pos)
        return max(self.positions, default=-1)


def _page_steps(home: Path) -> list[float]:
    """The times of the steps the master's web page shows (its API, /topologies/autoscale)."""
    import re
    import urllib.request

    from tests.support import run_cli

    status = run_cli(home, "status", "local", NAME).stdout
    url = re.search(r"web page and HTTP API: (https?://\S+?)/#token=", status)
    assert url is not None, status
    with urllib.request.urlopen(f"{url[1]}/topologies/autoscale?last=500", timeout=10) as resp:
        doc = json.load(resp)
    return [float(e["time"]) for e in doc["result"]["steps"]]


def _asked_count(home: Path) -> float | None:
    """What container 0's metrics manager exports as the parallelism last asked for count."""
    import http.client
    import re
    import urllib.request

    from heron_py.common.container_layout import TopologyPaths

    try:
        port = json.loads(TopologyPaths.of(NAME, home).layout(0).metricsmgr.read_text())["http_port"]
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
            text = resp.read().decode()
    except (OSError, ValueError, KeyError, http.client.HTTPException):
        return None
    m = re.search(rf'heron_autoscale_asked_parallelism{{component="count",topology="{NAME}"}} (\S+)', text)
    return float(m[1]) if m else None


def _actions(entries: list[dict[str, Any]], since: float) -> list[dict[str, Any]]:
    return [e for e in entries if e["time"] >= since and e.get("decision") in ("scale", "restart")]


def _log(entries: list[dict[str, Any]], epoch: float) -> str:
    """The steps as a table: when (from the epoch), what ran, what the sources emitted, and what
    was decided."""
    out = []
    for e in entries:
        if e.get("decision") == "no observation":
            out.append(f"{e['time'] - epoch:6.1f}  no observation: {e['error']}")
            continue
        action, outcome = e["action"], e.get("outcome") or {}
        did = (f"scale {action['parallelism']}" if action["kind"] == "scale" else
               f"restart container {action['container']}" if action["kind"] == "restart" else
               f"none: {action['why'][:100]}")
        done = "" if not outcome else " [done]" if outcome.get("ok") else f" [FAILED: {outcome.get('error')}]"
        out.append(f"{e['time'] - epoch:6.1f}  count {e['parallelism'].get('count')}  "
                   f"{e['throughput']:5.1f} sentences/s  {did}{done}")
    return "\n".join(out)


def test_count_grows_with_the_input_and_shrinks_after_it_and_nothing_is_lost(heron_home: Path,
                                                                             tmp_path: Path) -> None:
    """At least once: every rescale live; every sentence's 10 words counted at least once."""
    counted = Counted(heron_home / "capture" / NAME)

    def all_counted(covered: int) -> None:
        wait_for(lambda: counted.newest() >= covered and all(len(counted.positions.get(sid, ())) == 10
                                                             for sid in range(covered)), 30,
                 f"all 10 words of each of the first {covered} sentences to be counted")

    _scenario(heron_home, ["--offsets", str(tmp_path / "offsets")], tmp_path, counted.newest, all_counted,
              page_checks=True)


def test_effectively_once_count_grows_and_shrinks_with_exact_counts(heron_home: Path, tmp_path: Path) -> None:
    """Effectively once: every rescale is live and restores the newest checkpoint in place, with
    count's state split by key group; the topology keeps up with 4x and shrinks after it as at
    least once does; a checkpoint taken after the step down holds exactly the counts of the
    sentences before its spout's position. Its restores behind backpressure are short because the
    stream manager holds back what waits for a slow task and drops the old run's part of it."""
    wc = _topology_module()

    def newest() -> int:
        found = _checkpointed(heron_home, wc)
        return found[0] - 1 if found is not None else -1

    def exact(covered: int) -> None:
        found = wait_for(lambda: (lambda f: f if f is not None and f[0] >= covered else None)(
            _checkpointed(heron_home, wc)), 60, f"a checkpoint past sentence {covered}")
        position, counts = found
        expected = Counter(w for sid in range(position) for w in wc.sentence(sid).split())
        assert counts == expected, f"{sum(counts.values())} words counted, expected {sum(expected.values())}"

    _scenario(heron_home, ["--effectively-once"], tmp_path, newest, exact, page_checks=False)


def _checkpointed(home: Path, wc: ModuleType) -> tuple[int, Counter[str]] | None:
    """(the spout's next sentence, count's summed state) in the newest complete checkpoint, each
    task's state read by the packing its marker names, or None before the first."""
    import pickle

    from heron_py.checkpoint.storage import IncompleteCheckpointError, LocalFsStorage

    storage = LocalFsStorage(home / "checkpoints")
    for cid in reversed(storage.completed_ids(NAME)):
        try:
            marker = storage.marker(NAME, cid)
            assert marker.packing is not None
            spout = pickle.loads(storage.load(NAME, cid, marker.packing["sentence"][0]) or pickle.dumps({}))
            counts: Counter[str] = Counter()
            for t in marker.packing["count"]:
                counts.update(pickle.loads(storage.load(NAME, cid, t) or pickle.dumps({})))
        except IncompleteCheckpointError:
            continue  # removed by the master's garbage collection after it was listed
        return int(spout.get("next") or 0), counts
    return None


def _scenario(heron_home: Path, topology_args: list[str], tmp_path: Path, newest: Callable[[], int],
              finish: Callable[[int], None], *, page_checks: bool) -> None:
    """The step up and down with the health manager on: count grows within 3 actions after the
    step up, keeps up with 4x, shrinks within 3 after the step down; ``newest`` is the newest
    sentence counted, ``finish(covered)`` checks what the mode promises for the first
    ``covered`` sentences; ``page_checks``: the steps on the page and in Prometheus too."""
    wc = _topology_module()
    schedule, up, down = wc.parse_schedule(wc.SCHEDULE), wc.STEP_UP_S, wc.STEP_DOWN_S
    epoch = time.time()
    run_local(TOPOLOGY, ["--epoch", repr(epoch), "--name", NAME, *topology_args],
              home=heron_home, name=NAME, capture=["count"], keep_running=True)
    out = (tmp_path / "autoscale.out").open("w")
    hm = subprocess.Popen([sys.executable, "-m", "heron_py.cli.main", "autoscale", "local", NAME], stdout=out,
                          stderr=subprocess.STDOUT, env={**os.environ, "HERON_PY_HOME": str(heron_home)})

    def entries() -> list[dict[str, Any]]:
        return last_entries(NAME, 10_000, home=heron_home)

    def count_of(e: dict[str, Any]) -> int:
        """count's parallelism after an action (a restart keeps it)."""
        return int(e["action"].get("parallelism", {}).get("count", e["parallelism"]["count"]))

    try:
        # the step up: count grows within 3 actions, and the topology keeps up with 4x
        time.sleep(max(0.0, epoch + up - time.time()))
        wait_for(lambda: any(count_of(a) >= 3 for a in _actions(entries(), epoch + up)), 60,
                 "count to grow to 3 tasks or more after the step up")
        ups = _actions(entries(), epoch + up)
        grown = next(i for i, a in enumerate(ups) if count_of(a) >= 3)
        assert grown < 3, _log(entries(), epoch)
        assert all(a["outcome"]["ok"] for a in ups[:grown + 1]), _log(entries(), epoch)

        def lag_s() -> float:
            """Seconds of input between what has arrived and the newest sentence counted."""
            elapsed = time.time() - epoch
            return float((wc.arrived(schedule, elapsed) - newest()) / wc.rate_at(schedule, elapsed))

        wait_for(lambda: lag_s() < KEEPS_UP_S, max(1.0, epoch + down - time.time()),
                 f"the topology to keep up with 4x (within {KEEPS_UP_S:g} s of the input) before the step down")
        peak = max(int(e["parallelism"]["count"]) for e in entries() if "parallelism" in e)

        # the step down: count shrinks within 3 actions
        time.sleep(max(0.0, epoch + down - time.time()))
        wait_for(lambda: any(count_of(a) < peak for a in _actions(entries(), epoch + down)), 45,
                 "count to shrink after the step down")
        downs = _actions(entries(), epoch + down)
        assert next(i for i, a in enumerate(downs) if count_of(a) < peak) < 3, _log(entries(), epoch)
        covered = wc.arrived(schedule, down + 10)  # sentences from before the step up to after the step down

        if page_checks:  # every step is on the master's page (its API) and in container 0's Prometheus series
            shown = _page_steps(heron_home)
            assert shown and shown == sorted(shown) and set(shown) <= {e["time"] for e in entries()}
            last_scale = [a for a in _actions(entries(), epoch) if a["action"]["kind"] == "scale"][-1]
            wait_for(lambda: _asked_count(heron_home) == count_of(last_scale), 20,
                     "container 0's /metrics to show the parallelism last asked for count")

        finish(covered)
    finally:
        hm.send_signal(signal.SIGTERM)
        code = hm.wait(timeout=90)
        out.close()
        print(_log(entries(), epoch))
        kill_local(heron_home, NAME)
    assert code == 0, (tmp_path / "autoscale.out").read_text()[-3000:]
    assert not [e for e in entries() if (e.get("outcome") or {}).get("ok") is False], _log(entries(), epoch)
