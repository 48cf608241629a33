"""Heron's own Python examples (apache/incubator-heron examples/src/python, unchanged; see
tests/heron_examples/README.md), each submitted with its own package layout on PYTHONPATH as a
Heron user would: each runs without a traceback in any log and logs its expected output within a
minute; the stateful one checkpoints and recovers; the one heron-py cannot run (Pulsar) fails at
submit with one clear error."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from heron_py.common.container_layout import TopologyPaths
from heron_py.state import LocalFsStateManager
from heron_py.testing.local import kill_local
from tests.support import wait_for

pytestmark = pytest.mark.integration

SOURCE = Path(__file__).resolve().parent.parent / "heron_examples" / "examples"


@pytest.fixture
def layout(tmp_path: Path) -> Path:
    """The examples twice, as Heron's Bazel build made them importable: examples.src.python
    and heron.examples.src.python."""
    root = tmp_path / "heron-src"
    shutil.copytree(SOURCE, root / "examples")
    shutil.copytree(SOURCE, root / "heron" / "examples")
    return root


# Heron's examples emit flat out and log what the tests look for at their bolts' ticks (every 10
# or 15 s): their output is paced at submit, as a Heron user would pace a topology without
# editing it (Heron's topology.component.output.bps, here for every component), so the tests do
# not spend two cores on tuples nobody looks at; with short outbound queues, so that what waits
# behind the limit (the stateful example's checkpoint markers too) waits seconds, not a minute
PACED = ("topology.component.output.bps=100000", "heron_py.instance.outbound.queue.batches=4")


def _submit(home: Path, root: Path, file: str, *args: str,
            props: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HERON_PY_HOME": str(home), "PYTHONPATH": str(root)}
    options = [a for p in PACED + props for a in ("--config-property", p)]
    return subprocess.run([sys.executable, "-m", "heron_py.cli.main", "submit", "local", *options,
                           f"examples/src/python/{file}", *args], cwd=root, env=env, text=True,
                          capture_output=True, timeout=180)


def _logs(home: Path, name: str, pattern: str = "container-*/*.log") -> str:
    return "".join(f.read_text(errors="replace") for f in TopologyPaths.of(name, home).logs.glob(pattern))


def _current_map_has_words(text: str) -> bool:
    # heronpy's CountBolt logs a Counter: "Current map: Counter({'heron': 12, ...})"
    return re.search(r"Current map: Counter\(\{'\w+': [1-9]", text) is not None


def _stream_counter(text: str) -> bool:
    return re.search(r"Current stream counter: Counter\(\{.*'default': [1-9]", text) is not None


def _received(label: str) -> Callable[[str], bool]:
    return lambda text: re.search(label + r" [1-9]\d*", text) is not None


RUNS: dict[str, tuple[str, Callable[[str], bool]]] = {
    # file: (the logs to look at, what must show in them)
    "word_count_topology.py": ("container-*/count_bolt-*.log", _current_map_has_words),
    "window_size_topology.py": ("container-*/count_bolt-*.log",
                                lambda t: re.search(r"The current average is [1-9][\d.]*", t) is not None),
    "multi_stream_topology.py": ("container-*/stream_aggregator-*.log", _stream_counter),
    "custom_grouping_topology.py": ("container-*/consume_bolt-*.log", _received("Total received data tuple:")),
    "half_acking_topology.py": ("container-*/half_ack_bolt-*.log", _received("Total received:")),
    # the Streamlet log() lines: (KeyedWindow {key: K, window: Window {...}}, RESULT), as heronpy
    "word_count_streamlet.py": ("container-*/log-*.log", lambda t: re.search(
        r"\(KeyedWindow \{key: (Mary|lamb|Love), window: Window \{start_time: \d+, end_time: \d+\}\}, [1-9]\d*\)", t)
        is not None),
    "join_streamlet_topology.py": ("container-*/log-*.log", lambda t: re.search(
        r"\(KeyedWindow \{key: key1, window: Window \{.*\}\}, '[ab][cd]'\)", t) is not None),
}


@pytest.mark.parametrize("file", sorted(RUNS))
def test_heron_example_runs_unchanged(heron_home: Path, layout: Path, file: str) -> None:
    name = "ex-" + file.removesuffix(".py").replace("_", "-")
    proc = _submit(heron_home, layout, file, name)
    assert proc.returncode == 0, f"submit failed:\n{proc.stdout}\n{proc.stderr}"
    pattern, shows = RUNS[file]
    try:
        wait_for(lambda: shows(_logs(heron_home, name, pattern)), 60, f"{file}: its expected output")
        assert "Traceback" not in _logs(heron_home, name)
    finally:
        kill_local(heron_home, name)


def test_stateful_example_checkpoints_and_recovers_after_kill_9(heron_home: Path, layout: Path) -> None:
    """Heron's stateful_word_count, unchanged (EFFECTIVELY_ONCE), submitted with a checkpoint
    every 5 s instead of the default 30 s (a submit-time property, as a Heron user would set it;
    the wait for the first checkpoint was most of the test): the master logs each completed
    checkpoint and the tasks log their snapshots; after kill -9 of a count task, the restarted
    task logs the state it recovered, not empty."""
    name = "ex-stateful"
    proc = _submit(heron_home, layout, "stateful_word_count_topology.py", name,
                   # paced ten times faster than the other examples: a checkpoint's markers wait
                   # behind what the spouts' gateways hold (up to their write watermark), 21 s at
                   # 100,000 B/s
                   props=("topology.stateful.checkpoint.interval.seconds=5", "topology.component.output.bps=1000000"))
    assert proc.returncode == 0, f"submit failed:\n{proc.stdout}\n{proc.stderr}"
    try:
        tm = "container-0/tmanager.log"
        # checkpoint ids are the master's epoch << 32 | n (issue 37): the first is 2**32 + 1
        first = wait_for(lambda: re.search(r"checkpoint (\d+) complete: \d+ tasks", _logs(heron_home, name, tm)),
                         60, "the first checkpoint (5 s after the start)").group(1)
        assert re.search(rf"Checkpoint Snapshot {first} : \{{'\w+': [1-9]", _logs(heron_home, name,
                                                                              "container-*/word_spout-*.log"))
        instances = LocalFsStateManager(heron_home).get_execution_state(name)["instances"]
        task, pid = next((int(t), int(i["pid"])) for t, i in sorted(instances.items())
                         if i["component"] == "count_bolt")
        log = next(iter(TopologyPaths.of(name, heron_home).logs.glob(f"container-*/count_bolt-{task}.log")))
        os.kill(pid, 9)
        # the first process logged the clean start's empty state; the restarted one its checkpoint's
        recovered = re.compile(r"Checkpoint Snapshot recovered : \{'\w+': [1-9]")
        wait_for(lambda: recovered.search(log.read_text(errors="replace")), 90,
                 "the restarted count task's recovered state, not empty")
        tm_log = _logs(heron_home, name, tm)
        # the master saw the pid go, or the task's stream manager reported its connection lost first;
        # it restores the first checkpoint or one completed after it before the kill landed
        # (checkpoints come every 5 s), never a clean start
        failure = (rf"restore \d+ to checkpoint (\d+) \(failure: .*(task {task} \(pid {pid}\) (restarted|is gone)|"
                   rf"the connection of instance task {task} closed)\)")
        restored = re.search(failure, tm_log)
        assert restored, tm_log[-2000:]
        assert int(restored.group(1)) >= int(first), restored.group(0)
        assert "Traceback" not in _logs(heron_home, name)
    finally:
        kill_local(heron_home, name)


def test_pulsar_example_fails_at_submit_naming_pulsar(heron_home: Path, layout: Path) -> None:
    proc = _submit(heron_home, layout, "pulsar_word_count_streamlet.py", "ex-pulsar", "pulsar://127.0.0.1:6650",
                   "topic")
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr + proc.stdout
    assert proc.stderr.strip().splitlines()[-1].startswith(
        "heron-py: error: PulsarStreamlet.pulsarStreamlet: Pulsar connector is not supported by heron-py: ")
