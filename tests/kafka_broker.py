"""A real Kafka-protocol broker for tests: Tansu (scripts/tansu.sh installs it) on a free
loopback port, in-memory storage. Tests talk to it with confluent-kafka, the client the
connectors use; nothing is mocked. ``broker_or_skip`` skips with the reason when the binary
or the client is missing."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent


def tansu_binary() -> str | None:
    local = REPO / ".venv" / "bin" / "tansu"
    if local.exists():
        return str(local)
    beside = Path(sys.executable).parent / "tansu"
    return str(beside) if beside.exists() else shutil.which("tansu")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class TansuBroker:
    """One Tansu process; ``bootstrap`` is its address; ``stop``/``start`` restart it on the
    same port (in-memory storage loses the log; a postgres:// engine would keep it)."""

    def __init__(self, folder: Path, storage: str = "memory://tansu/") -> None:
        binary = tansu_binary()
        if binary is None:
            raise RuntimeError("tansu is not installed: run scripts/tansu.sh")
        self.binary = binary
        self.port = _free_port()
        self.bootstrap = f"127.0.0.1:{self.port}"
        self.storage = storage
        self.log_path = folder / f"tansu-{self.port}.log"
        self._proc: subprocess.Popen[bytes] | None = None
        self.start()

    def start(self) -> None:
        url = f"tcp://127.0.0.1:{self.port}"
        log = self.log_path.open("ab")
        self._proc = subprocess.Popen([self.binary, "broker", "--listener-url", url, "--advertised-listener-url", url,
                                       "--storage-engine", self.storage], stdout=log, stderr=subprocess.STDOUT,
                                      env={**os.environ, "RUST_LOG": os.environ.get("RUST_LOG", "warn")})
        log.close()
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                return
            except OSError:
                if self._proc.poll() is not None:
                    code = self._proc.returncode
                    raise RuntimeError(f"tansu exited with {code}: {self.log_path.read_text()}") from None
                time.sleep(0.05)
        raise RuntimeError(f"tansu did not listen on {self.bootstrap} within 20 s")

    @property
    def pid(self) -> int:
        assert self._proc is not None, "the broker is not running"
        return self._proc.pid

    def freeze(self) -> None:
        """SIGSTOP: the broker stops answering while its connections stay open (no FIN, no
        RST), as a hung or partitioned broker looks to its clients; the in-memory log is kept."""
        from tests.server_faults import stop_process

        stop_process(self.pid)

    def thaw(self) -> None:
        os.kill(self.pid, signal.SIGCONT)

    def stop(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            os.kill(self._proc.pid, signal.SIGCONT)  # a frozen broker must be able to end
            self._proc.terminate()
            try:
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        self._proc = None

    # --- helpers on the real client ---------------------------------------------------------
    def admin(self) -> Any:
        from confluent_kafka.admin import AdminClient
        return AdminClient({"bootstrap.servers": self.bootstrap})

    def create_topic(self, topic: str, partitions: int, exist_ok: bool = False) -> None:
        """``exist_ok``: a topic a client's metadata request made already (Tansu creates a
        topic a producer asks for) is kept."""
        from confluent_kafka import KafkaError, KafkaException
        from confluent_kafka.admin import NewTopic  # type: ignore[attr-defined]
        admin = self.admin()  # kept alive until the futures resolve
        for f in admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)]).values():
            try:
                f.result(timeout=30)
            except KafkaException as e:
                if not (exist_ok and e.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS):
                    raise

    def add_partitions(self, topic: str, total: int) -> None:
        from confluent_kafka.admin import NewPartitions  # type: ignore[attr-defined]
        admin = self.admin()
        for f in admin.create_partitions([NewPartitions(topic, total)]).values():
            f.result(timeout=30)

    def produce(self, topic: str, records: list[tuple[bytes | None, bytes]], partition: int | None = None) -> None:
        from confluent_kafka import Producer
        p = Producer({"bootstrap.servers": self.bootstrap, "linger.ms": 5, "enable.idempotence": False})
        for i, (k, v) in enumerate(records):
            kw: dict[str, Any] = {} if partition is None else {"partition": partition}
            p.produce(topic, value=v, key=k, **kw)
            if i % 10000 == 0:
                p.poll(0)
        assert p.flush(60) == 0, "records left unsent after 60 s"

    def end_offsets(self, topic: str) -> dict[int, int]:
        from confluent_kafka import Consumer, TopicPartition
        c = Consumer({"bootstrap.servers": self.bootstrap, "group.id": "_probe", "enable.auto.commit": False})
        try:
            parts = c.list_topics(topic, timeout=10).topics[topic].partitions
            return {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in sorted(parts)}
        finally:
            c.close()

    def committed(self, group: str, topic: str) -> dict[int, int]:
        from confluent_kafka import Consumer, TopicPartition
        c = Consumer({"bootstrap.servers": self.bootstrap, "group.id": group, "enable.auto.commit": False})
        try:
            parts = c.list_topics(topic, timeout=10).topics[topic].partitions
            got = c.committed([TopicPartition(topic, p) for p in sorted(parts)], timeout=10)
            return {tp.partition: tp.offset for tp in got}
        finally:
            c.close()


class OutputReader:
    """Reads a topic from the beginning with the real client: ``got`` maps each key to the
    values seen with it, ``records`` counts records (copies included); ``poll`` returns how
    many keys were seen."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        from confluent_kafka import Consumer
        self.c = Consumer({"bootstrap.servers": bootstrap, "group.id": "_reader", "enable.auto.commit": False,
                           "auto.offset.reset": "earliest"})
        self.topic = topic
        self.got: dict[str, set[str]] = {}
        self.records = 0

    def poll(self) -> int:
        from confluent_kafka import TopicPartition
        if not self.c.assignment():
            md = self.c.list_topics(self.topic, timeout=10).topics[self.topic]
            self.c.assign([TopicPartition(self.topic, p, -2) for p in md.partitions])
        for m in self.c.consume(1000, 0.2):
            if m.error() is None:
                self.records += 1
                self.got.setdefault((m.key() or b"").decode(), set()).add((m.value() or b"").decode())
        return len(self.got)


def broker_or_skip(folder: Path) -> TansuBroker:
    import pytest

    try:
        import confluent_kafka  # noqa: F401
    except ImportError:
        pytest.skip("confluent-kafka is not installed: pip install 'heron-py[kafka]'")
    if tansu_binary() is None:
        pytest.skip("the tansu broker is not installed: run scripts/tansu.sh")
    return TansuBroker(folder)
