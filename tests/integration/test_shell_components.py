"""Shell components with real subprocesses: Storm's own storm.py and storm.js adapters
(tests/multilang, unchanged), pystorm with msgpack framing, in process and on the local
scheduler; subprocesses that break the protocol die with their stderr tail and are restarted.
On the local scheduler the healthy and the faulty split bolts run side by side in one topology
(tests/multilang/shell_topology.py --all), launched once for the module."""

import logging
import sys
from collections import Counter
from pathlib import Path

import pytest

from heron_py.api.bolt.bolt import Bolt
from heron_py.api.metrics import CountMetric
from heron_py.api.shell import ShellBolt, ShellSpout
from heron_py.api.stream import Grouping
from heron_py.api.topology import TopologyBuilder
from heron_py.multilang.errors import ShellError
from heron_py.testing.inprocess import run_in_process
from tests.integration._shared_topology import running
from tests.multilang.sentences import sentence

pytestmark = pytest.mark.integration

MULTILANG = Path(__file__).resolve().parent.parent / "multilang"
SHELL = {"heron_py.shell.cwd": str(MULTILANG)}
WORD_FIELDS = ["word", "sid", "pos"]


class CountBolt(Bolt):
    def process(self, tup):
        self.ack(tup)


class MeteredSplitBolt(ShellBolt):
    """Storm's way: a ShellBolt subclass registers the metrics its subprocess updates."""

    command = ["python3", "splitsentence.py"]
    outputs = WORD_FIELDS

    def initialize(self, config, context):
        super().initialize(config, context)
        self.sentences = CountMetric()
        context.register_metric("sentences", self.sentences, 60)


def expected_words(n):
    return {(sid, pos, w) for sid in range(n) for pos, w in enumerate(sentence(sid).split(" "))}


def by_source(rows):
    out = {}
    for source, values in rows:
        out.setdefault(source, []).append((*values[1:], values[0]))  # (sid, pos, word)
    return out


def test_word_count_in_process_with_storm_py_storm_js_and_pystorm_msgpack():
    n = 60
    b = TopologyBuilder("shell_in_process")
    spout = ShellSpout.spec("python3 sentencespout.py", outputs=["sid", "sentence"], name="sentence",
                            config={**SHELL, "test.sentences": n})
    b.add_spec(spout)
    splits = [
        MeteredSplitBolt.spec(name="split", inputs={spout: Grouping.SHUFFLE}, par=2,
                              config={**SHELL, "test.metrics": True}),
        ShellBolt.spec(["node", "splitsentence.js"], WORD_FIELDS, {spout: Grouping.SHUFFLE}, name="split_js",
                       config=SHELL),
        ShellBolt.spec([sys.executable, "split_pystorm.py"], WORD_FIELDS, {spout: Grouping.SHUFFLE},
                       name="split_mp", config=SHELL, serializer="msgpack"),
    ]
    b.add_spec(*splits)
    # TopologyBuilder.add_bolt style: the command in the config
    b.add_bolt("split_cfg", ShellBolt, 1, {spout: Grouping.SHUFFLE},
               config={**SHELL, "heron_py.shell.command": ["python3", "splitsentence.py"]},
               optional_outputs=WORD_FIELDS)
    b.add_bolt("count", CountBolt, 2, {s: Grouping.fields("word") for s in [*splits, "split_cfg"]})
    result = run_in_process(b, capture=["count"], ticks=1)
    got = by_source((r.source, r.values) for r in result.received["count"])
    want = expected_words(n)
    for source in ("split", "split_js", "split_mp", "split_cfg"):
        assert Counter(got[source]) == Counter(want), source  # each word exactly once
    metered = [c for c in result.components.values() if isinstance(c, MeteredSplitBolt)]
    assert sum(c.sentences.get_value_and_reset() for c in metered) == n


@pytest.mark.parametrize(("mode", "config", "reason"), [
    ("nonjson", {}, "the subprocess wrote a line that is not JSON: 'this line is not JSON'"),
    ("oversize", {"heron_py.shell.max.message.bytes": 65536},
     # how many bytes were read when it was refused depends on the pipe's chunks
     "bytes read without its end, limit 65536 bytes (heron_py.shell.max.message.bytes)"),
    ("silent", {"topology.subprocess.timeout.secs": 1}, "heartbeat timeout: nothing heard for more than 1 s"),
])
def test_broken_subprocess_is_killed_with_its_stderr_tail(tmp_path, caplog, mode, config, reason):
    b = TopologyBuilder(f"shell_{mode}")
    spout = ShellSpout.spec(["python3", "sentencespout.py"], ["sid", "sentence"], name="sentence",
                            config={**SHELL, "test.sentences": 10})
    b.add_spec(spout)
    b.add_spec(ShellBolt.spec(["python3", "misbehave.py"], WORD_FIELDS, {spout: Grouping.SHUFFLE}, name="bad",
                              config={**SHELL, **config, "test.misbehave": mode, "test.marker.dir": str(tmp_path)}))
    with caplog.at_level(logging.ERROR), pytest.raises(ShellError) as e:
        run_in_process(b, settle_timeout_s=30)
    msg = str(e.value)
    assert msg.startswith("shell component 'bad' task 2: multilang subprocess ['python3', 'misbehave.py'] (pid ")
    assert reason in msg
    assert msg.endswith(f"last 1 lines of its stderr:\n  about to misbehave: {mode}")
    assert msg in caplog.text  # logged where it happened, too


def _complete(received, sources, want):
    got = by_source((r["source"], r["values"]) for r in received.get("count", []))
    return all(set(got.get(s, ())) >= want for s in sources)


HEALTHY, FAULTY = ("split", "split_js", "split_mp"), ("bad_nonjson", "bad_oversize", "bad_silent")
SENTENCES = 200


@pytest.fixture(scope="module")
def shell_run(tmp_path_factory):
    """One run on the local scheduler (2 containers) of the healthy split bolts and the faulty
    ones side by side (shell_topology.py --all), until every split bolt has passed on every
    word; yields the run and the faulty bolts' marker folder."""
    root = tmp_path_factory.mktemp("shell")
    home, markers = root / "heron-home", root / "markers"
    home.mkdir()
    markers.mkdir()
    want = expected_words(SENTENCES)
    args = ["--sentences", str(SENTENCES), "--faults", str(markers), "--all"]
    with running(home, MULTILANG / "shell_topology.py", args,
                 containers=2, capture=["count"], until=lambda r: _complete(r, HEALTHY + FAULTY, want),
                 timeout=150) as run:
        yield run, markers


def test_word_count_on_the_local_scheduler(shell_run):
    run, _ = shell_run
    want = expected_words(SENTENCES)
    got = by_source((r["source"], r["values"]) for r in run.received["count"])
    for s in HEALTHY:
        assert set(got[s]) == want, s


def test_broken_subprocesses_are_restarted_and_output_is_complete(shell_run):
    run, markers = shell_run
    want = expected_words(SENTENCES)
    got = by_source((r["source"], r["values"]) for r in run.received["count"])
    for s in FAULTY:
        assert set(got[s]) == want, s  # at least once: every word, duplicates allowed
        mode = s.removeprefix("bad_")
        assert (markers / f"misbehaved-{mode}").exists()
        logs = "".join(p.read_text(errors="replace") for p in run.home.rglob(f"{s}-*.log"))
        assert "multilang subprocess ['python3', 'misbehave.py']" in logs
        assert f"last 1 lines of its stderr:\n  about to misbehave: {mode}" in logs, s
