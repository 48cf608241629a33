"""streamparse's own quickstart project (examples/streamparse/wordcount, unchanged) on
the local scheduler: ``heron-py submit local topologies/NAME.py`` runs it, the counts are
exact, and a pystorm bolt that raises is reported in its log and its task restarted. The exact
count and the crashing bolt run side by side in one topology (topologies/bounded_and_crashing.py,
a heron-py addition like wordcount_bounded.py and crashing.py), launched once for the module;
the unchanged quickstart file keeps its own launch."""

import re
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from heron_py.common.container_layout import TopologyPaths
from heron_py.testing import run_local
from heron_py.testing.local import read_capture
from tests.integration._shared_topology import running
from tests.support import wait_for

pytestmark = pytest.mark.integration

PROJECT = Path(__file__).resolve().parents[2] / "examples" / "streamparse" / "wordcount"
N = 4000


def _logs(home, name, pattern):
    return "".join(f.read_text() for f in TopologyPaths.of(name, home).logs.glob(pattern))


def _expected():
    sys.path.insert(0, str(PROJECT / "src"))
    from spouts.bounded_words import bounded_words  # the spout's own list of words

    words = bounded_words(N)
    totals: Counter = Counter()
    for w in words:
        totals[w] += 10 if w == "dog" else 1  # WordCountBolt's rule
    return Counter(words), totals


@pytest.fixture(scope="module")
def bounded_and_crashing(tmp_path_factory):
    """The bounded word count and the crashing bolt, running until the sink has every count."""
    home = tmp_path_factory.mktemp("streamparse") / "heron-home"
    home.mkdir()
    with running(home, PROJECT / "topologies" / "bounded_and_crashing.py", name="sp_wc",
                 capture=["count_bolt", "sink"], until=lambda r: len(r["sink"]) >= N, timeout=90) as run:
        yield run


def test_bounded_word_count_is_exact(bounded_and_crashing):
    run = bounded_and_crashing
    time.sleep(1.0)  # anything more (a duplicate) would show now
    got = read_capture(run.home / "capture" / run.name, ["count_bolt", "sink"])
    words, totals = _expected()
    assert Counter(r["values"][0] for r in got["count_bolt"]) == words
    assert len(got["sink"]) == N
    final: dict[str, int] = {}
    for r in got["sink"]:
        word, count = r["values"]
        final[word] = max(final.get(word, 0), count)
    assert final == dict(totals)


def test_the_unchanged_quickstart_topology_runs(heron_home):
    # its spout emits flat out: paced at submit (Heron's output rate limit, on every component), as
    # the test needs 2,000 words, not millions captured
    run = run_local(PROJECT / "topologies" / "wordcount.py", home=heron_home, name="sp_quick",
                    capture=["count_bolt"], until=lambda r: len(r["count_bolt"]) >= 2000, timeout=90,
                    properties={"topology.component.output.bps": "200000"})
    assert {v[0] for v in run.values("count_bolt")} == {"dog", "cat", "zebra", "elephant"}
    # WordCountBolt's self.logger lines reach the task's log
    log = _logs(heron_home, run.name, "container-*/count_bolt-*.log")
    assert re.search(r"counted \[[\d,]+\] words \[pid=\d+\]", log)


def test_a_raising_pystorm_bolt_is_reported_and_restarted(bounded_and_crashing):
    run = bounded_and_crashing
    wait_for(lambda: re.search(r"crash_bolt-\d+ exited with code 1 after [\d.]+ s; restart 1",
                               _logs(run.home, run.name, "executor-*.log")), 60, "a restart of crash_bolt")
    log = _logs(run.home, run.name, "container-*/crash_bolt-*.log")
    assert "Exception in CrashingBolt.run()" in log
    assert re.search(r"Python ValueError raised while processing Tuple Tuple\(id='\d+', "
                     r"component='word_spout', stream='default', task=\d+, "
                     r"values=Word_SpoutDefaultTuple\(word='zebra'\)\)", log)
    assert "Traceback (most recent call last)" in log and "no zebras here" in log
