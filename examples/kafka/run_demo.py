"""Kafka word count demo: starts Tansu itself, produces 20,000 records, runs the topology."""

import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from heron_py.testing import run_local  # noqa: E402
from heron_py.testing.local import kill_local  # noqa: E402
from tests.kafka_broker import TansuBroker  # noqa: E402

home = Path(tempfile.mkdtemp(prefix="kafka_demo"))
broker = TansuBroker(home)
try:
    broker.create_topic("words", 3)
    broker.produce("words", [(None, f"the quick brown fox {i}".encode()) for i in range(20_000)])
    run = run_local(REPO / "tests" / "kafka" / "kafka_word_count.py",
                    ["--bootstrap", broker.bootstrap, "--topic", "words", "--group", "demo",
                     "--out", str(home / "out")],
                    home=home, name="kafka_demo", keep_running=True)
    try:
        for _ in range(60):
            committed = broker.committed("demo", "words")
            print("committed:", committed, "total", sum(max(v, 0) for v in committed.values()))
            if sum(max(v, 0) for v in committed.values()) >= 20_000:
                break
            time.sleep(1)
    finally:
        kill_local(home, run.name)
finally:
    broker.stop()
print(f"logs under {home}")
