"""Batch runs on real PySpark (local[2]): partitioning equals the streaming engine's routing,
word count is exact, a streamed run through the Parquet sink reconciles with the batch run,
and a perturbed stream output fails reconciliation with a report."""

import os
import shutil
import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import wc_common

from heron_py.cli.submit import load_topology_file
from heron_py.common.package import build_package
from heron_py.spark.batch import run_topology_batch
from heron_py.testing import run_in_process
from heron_py.testing.local import kill_local
from tests.conftest import EXAMPLES

pytestmark = [pytest.mark.spark, pytest.mark.integration]

HERE = Path(__file__).resolve().parent
N = 20_000


def _cli(home, *args, timeout=300):
    env = dict(os.environ, HERON_PY_HOME=str(home), SPARK_LOCAL_IP="127.0.0.1")
    return subprocess.run([sys.executable, "-m", "heron_py.cli.main", *args], text=True, capture_output=True,
                          env=env, timeout=timeout)


def _rows(folder):
    rows = []
    for f in sorted(Path(folder).glob("*.parquet")):
        rows += pq.read_table(f).to_pylist()
    return rows


def test_partitioning_equals_streaming_routing(spark):
    from tests.spark import grouping_topology as gt

    path = HERE / "grouping_topology.py"
    topo = load_topology_file(path, [])
    package = build_package(path, [], [p for p in sys.path if p])
    frames = run_topology_batch(spark, topo, {}, gt.KINDS, package=package)
    batch = {k: [tuple(r) for r in frames[k].collect()] for k in gt.KINDS}
    streaming = run_in_process(topo, capture=gt.KINDS)
    stream = {k: [(r.task, r.values[0], r.values[1]) for r in streaming.received[k]] for k in gt.KINDS}
    for k in ("fields", "all", "lowest", "custom", "direct"):
        # deterministic groupings: the same task gets the same tuples
        assert sorted(batch[k]) == sorted(stream[k]), k
    assert len(batch["all"]) == 3 * gt.COUNT
    assert {t for t, _, _ in batch["lowest"]} == {min(t for t, _, _ in batch["lowest"])}
    for k in ("shuffle", "none", "local"):
        # round robin: every tuple once, an equal share per task, in both engines
        for rows in (batch[k], stream[k]):
            assert sorted(n for _, n, _ in rows) == list(range(gt.COUNT)), k
            assert sorted(Counter(t for t, _, _ in rows).values()) == [gt.COUNT // 3] * 3, k
    # partial key: each key goes to at most its two candidate tasks, the same two in both engines
    tasks = defaultdict(set)
    for t, _, key in batch["partial"] + stream["partial"]:
        tasks[key].add(t)
    assert all(1 <= len(ts) <= 2 for ts in tasks.values())
    assert sorted(n for _, n, _ in batch["partial"]) == list(range(gt.COUNT))


@pytest.fixture(scope="module")
def batch_counts(tmp_path_factory):
    """`heron-py batch` over the shared benchmark sentences: the word count's output folder."""
    d = tmp_path_factory.mktemp("batch")
    (d / "sentences.txt").write_text("".join(wc_common.sentence(i) + "\n" for i in range(N)))
    # the split's words too: 100,000 rows per partition, more than one row group a worker writes
    proc = _cli(d, "batch", "--input", f"sentence={d / 'sentences.txt'}", "--output", f"count={d / 'counts'}",
                "--output", f"split={d / 'words'}", str(EXAMPLES / "word_count.py"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"count -> {d / 'counts'} (1000 rows, Parquet)" in proc.stdout
    assert f"split -> {d / 'words'} ({10 * N} rows, Parquet)" in proc.stdout
    return d / "counts"


def test_batch_writes_every_word_the_split_emits(batch_counts):
    words = pq.read_table(batch_counts.parent / "words")
    assert words.column_names == ["word"]
    assert Counter(words.column("word").to_pylist()) == wc_common.expected_counts(N)
    groups = [pq.ParquetFile(f).metadata.num_row_groups for f in (batch_counts.parent / "words").glob("*.parquet")]
    assert max(groups) > 1


def test_batch_word_count_is_exact(batch_counts):
    rows = _rows(batch_counts)
    assert len(rows) == 1000
    assert {r["word"]: r["count"] for r in rows} == wc_common.expected_counts(N)


def test_batch_errors(tmp_path):
    wc = str(EXAMPLES / "word_count.py")
    cases = [
        (["--input", "sentences=x.txt"], "--input sentences=x.txt: the topology has no spout 'sentences'; "
         "expected one of sentence"),
        (["--input", f"sentence={tmp_path / 'nope.txt'}"], f"--input sentence={tmp_path / 'nope.txt'}: "
         "no such file or directory"),
        (["--output", "cnt=out"], "--output cnt=out: the topology has no bolt 'cnt'; expected one of count, split"),
        (["--output", "count"], "--output: expected BOLT[:STREAM]=PATH, found 'count'"),
    ]
    for args, message in cases:
        proc = _cli(tmp_path, "batch", *args, wc)
        assert (proc.returncode, proc.stderr) == (1, f"heron-py: error: {message}\n"), args


def test_stream_through_parquet_sink_reconciles_with_batch(batch_counts, heron_home, tmp_path):
    from heron_py.testing import run_local

    sink = tmp_path / "stream"
    run = run_local(EXAMPLES / "word_count.py", ["--sentences", str(N), "--parquet-sink", str(sink)],
                    home=heron_home, name="wc_sink", keep_running=True)
    try:
        def final_total():
            latest = {}
            for r in _rows(sink):
                latest[r["word"]] = max(latest.get(r["word"], 0), r["count"])
            return sum(latest.values())

        deadline = time.monotonic() + 60
        while final_total() < 10 * N:
            assert time.monotonic() < deadline, f"sink holds {final_total()} of {10 * N} words"
            time.sleep(0.5)
    finally:
        kill_local(heron_home, run.name)
    ok = _cli(tmp_path, "reconcile", "--stream", str(sink), "--batch", str(batch_counts), "--key", "word",
              "--version", "count")
    assert ok.returncode == 0, ok.stdout + ok.stderr[-2000:]
    assert ok.stdout == ("reconcile: 1000 keys in the batch output, 1000 in the stream output: "
                         "0 missing, 0 extra, 0 differing\n")

    # perturb: drop every row of one word, raise another word's last count, add a word
    rows = _rows(sink)
    words = sorted({r["word"] for r in rows})
    gone, changed = words[0], words[1]
    top = max(r["count"] for r in rows if r["word"] == changed)
    bad_rows = [r for r in rows if r["word"] != gone]
    bad_rows = [dict(r, count=r["count"] + 1) if (r["word"], r["count"]) == (changed, top) else r for r in bad_rows]
    bad_rows.append({"word": "zzz-not-a-word", "count": 1})
    bad = tmp_path / "perturbed"
    bad.mkdir()
    pq.write_table(pa.Table.from_pylist(bad_rows), bad / "part-0.parquet")
    proc = _cli(tmp_path, "reconcile", "--stream", str(bad), "--batch", str(batch_counts), "--key", "word",
                "--version", "count")
    assert proc.returncode == 1
    expected = wc_common.expected_counts(N)
    assert proc.stdout == (
        "reconcile: 1000 keys in the batch output, 1000 in the stream output: 1 missing, 1 extra, 1 differing\n"
        f"  missing: word={gone!r}\n"
        f"  extra: word='zzz-not-a-word'\n"
        f"  differing: word={changed!r}: stream {{'count': {expected[changed] + 1}}}, "
        f"batch {{'count': {expected[changed]}}}\n")
    shutil.rmtree(bad)


def test_a_sink_bolt_runs_in_a_batch_run(tmp_path):
    """A bolt that emits nothing (a sink writing to its own store) runs in a batch run, with no
    --output at all and beside an --output of another bolt: every input row reaches one sink
    task's file, once."""
    numbers = [str(i) for i in range(500)]
    text = tmp_path / "numbers.txt"
    text.write_text("\n".join(numbers) + "\n")
    for name, extra in (("alone", []), ("beside-output", ["--output", f"pass={tmp_path / 'passed'}"])):
        folder = tmp_path / name
        folder.mkdir()
        proc = _cli(tmp_path, "batch", "--input", f"numbers={text}", *extra, str(HERE / "sink_topology.py"),
                    str(folder))
        assert proc.returncode == 0, proc.stderr[-3000:]
        files = sorted(folder.glob("task-*.txt"))
        assert len(files) == 2, (name, files)
        written = [line for f in files for line in f.read_text().splitlines()]
        assert sorted(written, key=int) == numbers, name
    assert sorted((r["n"] for r in _rows(tmp_path / "passed")), key=int) == numbers
