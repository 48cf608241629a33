"""RabbitMQ queue → split → PostgresInsertBolt at least once on real processes, 2 containers, a
real RabbitMQ node and a real PostgreSQL 15: lines published while the topology runs, kill -9 of
a spout task and of a sink task mid-run, and in a second run the PostgreSQL server restarted
mid-run. Every line's words end in the table exactly once after de-duplication by (id, pos) (the
table's primary key; ``writes`` counts the replays); a word the table refuses (a CHECK
constraint) is failed, logged once with its (id, pos), and the rest of its batch is written."""

from __future__ import annotations

import os
import re
import signal
import time
from pathlib import Path

import pytest

from heron_py.testing import run_local
from heron_py.testing.local import kill_local
from tests.conftest import EXAMPLES
from tests.connector_support import task_logs as _logs
from tests.connector_support import task_pid as _pid
from tests.integration.test_rabbitmq_word_count import N, Producer
from tests.postgres_server import PostgresServer, postgres_or_skip
from tests.rabbitmq_server import RabbitMQServer, rabbitmq_or_skip
from tests.support import wait_for

pytestmark = pytest.mark.integration

TOPOLOGY = EXAMPLES / "postgres" / "postgres_word_count.py"
BAD_WORD = "z" * 25  # longer than the table's CHECK (length(word) <= 20)


@pytest.fixture(scope="module")
def rabbit(tmp_path_factory):
    s = rabbitmq_or_skip(tmp_path_factory.mktemp("rabbitmq-pg"))
    yield s
    s.stop()


@pytest.fixture(scope="module")
def pg():
    s = postgres_or_skip()
    yield s
    s.destroy()


class BadLines(Producer):
    """The word count's lines, and every 2000 lines one with a word the table refuses; gated on
    ``resume`` as Producer is."""

    def run(self) -> None:
        batch: list[tuple[str, bytes]] = []
        for i in range(N):
            if i == 2 * N // 3:  # a batch boundary (N is a multiple of 300): nothing held back unpublished
                self.resume.wait(120)
            words = [f"w{i % 97}", f"x{i % 13}", f"y{i}"]
            batch.append((str(i), " ".join(words).encode()))
            self.expected[str(i)] = words
            if i % 2000 == 1000:
                batch.append((f"bad-{i}", f"ok{i} {BAD_WORD} fine{i}".encode()))
                self.malformed.append(f"bad-{i}")
            if i % 100 == 99:
                self._publish(batch)
                batch = []
                time.sleep(self.seconds / (N / 100))


def _rows(pg: PostgresServer, table: str) -> int:
    try:
        return int(pg.execute(f"SELECT count(*) FROM {table}")[0][0])
    except Exception:  # restarting
        return 0


def _start(home: Path, rabbit: RabbitMQServer, pg: PostgresServer, name: str, queue: str, table: str):
    pg.execute(f"CREATE TABLE {table} (id text, pos int, word text NOT NULL CHECK (length(word) <= 20), "
               f"writes int NOT NULL DEFAULT 1, PRIMARY KEY (id, pos))")
    return run_local(TOPOLOGY, ["--amqp", rabbit.url, "--queue", queue, "--postgres", pg.url, "--table", table,
                                "--split-delay-ms", "2"], home=home, name=name, keep_running=True)


def _check(pg: PostgresServer, table: str, producer: BadLines) -> None:
    want = {(mid, pos): w for mid, words in producer.expected.items() for pos, w in enumerate(words)}
    for bad in producer.malformed:  # the refused word's neighbours are written
        i = bad.split("-")[1]
        want[(bad, 0)], want[(bad, 2)] = f"ok{i}", f"fine{i}"
    got = {(r[0], int(r[1])): r[2] for r in pg.execute(f"SELECT id, pos, word FROM {table}")}
    assert got == want


def _settled(pg: PostgresServer, rabbit: RabbitMQServer, table: str, queue: str, producer: BadLines) -> None:
    want = 3 * N + 2 * len(producer.malformed)
    wait_for(lambda: _rows(pg, table) == want, 45, f"all {want} words in the table")
    # only the lines with a refused word stay in the queue (failed and replayed, never acked)
    wait_for(lambda: sum(rabbit.depth(queue)) == len(producer.malformed), 20,
             f"every line acknowledged but the {len(producer.malformed)} with a refused word")
    _check(pg, table, producer)


def _refusals_logged_once(home: Path, name: str, producer: BadLines, replayed_before: int) -> None:
    """Each refused row is logged once per delivery: once, except a line published before
    ``replayed_before`` (a kill -9 may have lost its ack, and the broker delivers it again: at
    least once), which is logged at least once."""
    sink_log = _logs(home, name, "container-*/sink-*.log")
    for bad in producer.malformed:
        line = (f"input {bad}/1 from 'split' (['{BAD_WORD}', '{bad}', 1]): row refused (23514 CheckViolation: "
                f"new row for relation \"")
        if int(bad.split("-")[1]) < replayed_before:
            assert sink_log.count(line) >= 1, line
        else:
            assert sink_log.count(line) == 1, line
    assert [b for b in producer.malformed if int(b.split("-")[1]) >= replayed_before], "no line checked exactly"
    assert re.search(r"violates check constraint \"\w+_word_check\"\); failing it", sink_log)


def test_kill_9_of_the_spout_and_of_the_sink_loses_nothing(heron_home, rabbit, pg):
    run = _start(heron_home, rabbit, pg, "pg_kill", "pglines1", "words1")
    producer = BadLines(rabbit, "pglines1", seconds=4)
    try:
        producer.start()
        wait_for(lambda: _rows(pg, "words1") > 3000, 40, "1000 lines written")
        os.kill(_pid(heron_home, run.name, "spout"), signal.SIGKILL)
        wait_for(lambda: _rows(pg, "words1") > 6000, 40, "2000 lines written")
        os.kill(_pid(heron_home, run.name, "sink"), signal.SIGKILL)
        producer.resume.set()  # the last third of the lines is published only now, after both kills
        producer.join(30)
        _settled(pg, rabbit, "words1", "pglines1", producer)
        executor_log = _logs(heron_home, run.name, "executor-*.log")
        assert re.search(r"spout-\d+ exited with code -9", executor_log)
        assert re.search(r"sink-\d+ exited with code -9", executor_log)
        # replays wrote some words again (the upsert counted them); the primary key kept the table exact
        assert pg.execute("SELECT sum(writes) FROM words1")[0][0] > _rows(pg, "words1")
        # the lines before the last third were published before the kills, which may replay them
        _refusals_logged_once(heron_home, run.name, producer, replayed_before=2 * N // 3)
    finally:
        producer.resume.set()
        kill_local(heron_home, run.name)


def test_postgres_restart_mid_run_resumes(heron_home, rabbit, pg):
    run = _start(heron_home, rabbit, pg, "pg_restart", "pglines2", "words2")
    producer = BadLines(rabbit, "pglines2", seconds=4)
    try:
        producer.start()
        wait_for(lambda: _rows(pg, "words2") > 3000, 40, "1000 lines written")
        pg.stop()
        time.sleep(1.0)  # down long enough for batches to fail
        pg.start()
        producer.resume.set()  # the last third of the lines is published only now, after the restart
        producer.join(30)
        _settled(pg, rabbit, "words2", "pglines2", producer)
        logs = _logs(heron_home, run.name, "container-*/sink-*.log")
        assert re.search(rf"postgresql server postgresql://127.0.0.1:{pg.port}/postgres unreachable \(", logs)
        assert f"postgresql server postgresql://127.0.0.1:{pg.port}/postgres reachable again" in logs
    finally:
        producer.resume.set()
        kill_local(heron_home, run.name)
