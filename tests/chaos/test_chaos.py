"""The chaos run's 30-second version (tests/chaos/chaos_run.py is the script users run, 120 s
by default): seeded kill -9 of any process of an at-least-once word count on 2 containers
with ZooKeeper state, one ZooKeeper restart; nothing acked is lost, every id is acked once,
nothing is left after kill. The seed, the kills with their recovery times and the totals are
printed (pytest -s)."""

import itertools
import time

import pytest

from tests.chaos.chaos_run import KINDS, chaos, check_output, ok, schedule

pytestmark = pytest.mark.integration

SEED = 18


def test_the_schedule_is_a_function_of_the_seed_with_one_zookeeper_restart():
    a, b = schedule(SEED, 30.0), schedule(SEED, 30.0)
    assert a == b and a != schedule(SEED + 1, 30.0)
    assert [f.kind for f in a].count("zookeeper") == 1
    assert all(f.kind in (*KINDS, "zookeeper") for f in a)
    gaps = [y.at - x.at for x, y in itertools.pairwise(a)]
    assert all(3.0 <= g <= 6.0 for g in gaps) and a[-1].at < 30.0


def test_the_check_finds_a_lost_word_and_a_double_ack(tmp_path):
    def plain(sid):
        return "a b"

    (tmp_path / "acks-1.log").write_text("0\n1\n1\n")
    (tmp_path / "count-3.txt").write_text("0 0 a\n0 1 b\n1 0 a\n0 0 a\n")
    t = check_output(tmp_path, 2, plain)
    assert (t.acked_ids, t.words_written, t.words_unique) == (2, 4, 3)
    assert t.problems == ["ids acked more than once: 1", "1 words counted fewer times than the plain count, e.g. ['b']",
                          "counts after de-duplication by (sentence id, position) differ from the plain count"]


def test_chaos_30_seconds(heron_home, zk, capsys):
    server, _ = zk

    def restart():
        server.stop()
        time.sleep(1.0)
        server.start()

    with capsys.disabled():
        print()
        kills, totals, left = chaos(heron_home, SEED, 30.0, rate=60.0, zk_restart=restart)
    assert not totals.problems, totals.problems
    assert not left, left
    assert all(k.recovery_s is not None for k in kills), kills
    assert ok(kills, totals, left)
