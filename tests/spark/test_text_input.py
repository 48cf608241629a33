"""The batch runner's own reader of a local text file against SparkContext.textFile: the same
splits and the same lines in each, on files with every kind of line end, byte order marks and
bytes that are not UTF-8."""

import os
import random

import pytest

from heron_py.spark.text_input import read_lines, readable_here, splits

pytestmark = [pytest.mark.spark, pytest.mark.integration]

PIECES = [b"a", b"bb", b"\n", b"\r\n", b"\r", b"\xc3\xa9", b"\xe2\x82", b"\xff", b"\xef\xbb\xbf", b"  ", b"\n\n",
          b"\r\r\n", "\u00fc\u20ac".encode()]


def _ours(path, size, min_partitions, block=32 * 1024 * 1024):
    return [[row[0] for row in read_lines(str(path), s, e)] for s, e in splits(size, min_partitions, block)]


def test_lines_and_splits_are_textfiles(spark, tmp_path):
    sc = spark.sparkContext
    rng = random.Random(5)
    for case in range(24):
        data = b"".join(rng.choice(PIECES) for _ in range(rng.randint(0, 400)))
        if case % 5 == 0:
            data = b"\xef\xbb\xbf" + data
        path = tmp_path / f"t{case}.txt"
        path.write_bytes(data)
        for k in (2, 5, 13):
            assert _ours(path, len(data), k) == sc.textFile(str(path), k).glom().collect(), (case, k, data)


def test_a_file_larger_than_a_read_and_than_a_block(spark, tmp_path):
    """Over 32 MiB, the local block size, Hadoop splits by blocks and the last split takes the
    slop; each split is also more than the 4 MiB a worker reads at a time."""
    sc = spark.sparkContext
    rng = random.Random(11)
    ends = [b"\n"] * 20 + [b"\r\n", b"\r"]
    lines = [b"w" * n + rng.choice(ends) for n in range(91)]
    data = b"".join(rng.choice(lines) for _ in range(1_600_000)) + b"tail"
    assert len(data) > 2 * 32 * 1024 * 1024
    path = tmp_path / "big.txt"
    path.write_bytes(data)
    theirs = sc.textFile(str(path)).glom().collect()
    ours = _ours(path, len(data), min(sc.defaultParallelism, 2))
    assert [len(p) for p in ours] == [len(p) for p in theirs]
    assert len(ours) > 2
    assert ours == theirs


def test_a_file_cut_short_while_it_is_read_ends_the_split(tmp_path):
    path = tmp_path / "shrinking.txt"
    path.write_bytes(b"0123456789\n" * 900_000)  # 9.9 MB: more than one 4 MiB read
    rows = read_lines(str(path), 0, path.stat().st_size)
    assert next(rows) == ["0123456789"]  # the first 4 MiB are read
    os.truncate(path, 1000)
    rest = list(rows)  # ends, instead of waiting for bytes that will not come
    assert 0 < len(rest) < 900_000
    assert all(r == ["0123456789"] for r in rest[:-1])
    assert "0123456789".startswith(rest[-1][0])  # the last line read, cut where the 4 MiB ended


def test_what_is_left_to_textfile(tmp_path):
    (tmp_path / "a.txt").write_text("x\n")
    (tmp_path / "a.txt.gz").write_bytes(b"")
    assert readable_here(tmp_path / "a.txt")
    assert not readable_here(tmp_path / "a.txt.gz")
    assert not readable_here(tmp_path)
    assert splits(0, 2) == [(0, 0)]
    assert splits(100, 2) == [(0, 50), (50, 100)]
    assert splits(105, 2, block=50) == [(0, 50), (50, 105)]  # 55 / 50 <= 1.1: one last split
