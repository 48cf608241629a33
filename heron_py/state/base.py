"""The StateManager interface, shared by localfs and (later) ZooKeeper.

Layout follows Heron's: topologies/, packingplans/, pplans/, tmanagers/, executionstate/,
schedulers/, plus packages/ (the topology package), secrets/ and tls/ (the topology's TLS
material, ``heron_py.common.tls.TlsMaterial.to_bytes``), checkpointkeys/ (the key that signs a
topology name's checkpoints) and checkpointrecords/. Values are JSON documents except packages
(zip bytes), secrets and checkpoint keys (raw bytes); secrets, tls and checkpoint keys are private
(mode 0600).
"""

from __future__ import annotations

import abc
import os
import socket
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from heron_py.planner.model import PackingPlan, PhysicalPlan, TopologyDef


class StateManagerError(Exception):
    """The state store cannot be used (unreachable, misconfigured); the message says why."""


# what a session listener hears: "connected" (also after a reconnect), "suspended" (the
# connection dropped, the session may survive), "lost" (the session expired: ephemeral
# nodes are gone)
SessionListener = Callable[[str], None]
LocationWatcher = Callable[["TManagerLocation | None"], None]


@dataclass(frozen=True)
class TManagerLocation:
    host: str
    port: int
    pid: int
    http_port: int = 0
    # who holds the location: "<host>:<pid>" for localfs, the session id for ZooKeeper
    owner: str = ""
    # "https" when the topology's TLS is on: the HTTP API then serves the topology's certificate
    http_scheme: str = "http"

    def to_dict(self) -> dict[str, Any]:
        return {"host": self.host, "port": self.port, "pid": self.pid, "http_port": self.http_port,
                "owner": self.owner, "http_scheme": self.http_scheme}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TManagerLocation:
        scheme = "https" if d.get("http_scheme") == "https" else "http"
        return cls(d["host"], int(d["port"]), int(d["pid"]), int(d.get("http_port", 0)), str(d.get("owner", "")),
                   scheme)


def local_owner(pid: int | None = None) -> str:
    """The owner a master on this host claims its location with, "<host>:<pid>" (what localfs
    checks for a live holder; a ZooKeeper store puts its session id in its place). Here, beside
    the location, so the master names itself without reaching into a store's backend."""
    return f"{socket.gethostname()}:{os.getpid() if pid is None else pid}"


# where an older heron-py kept topology NAME's checkpoint key: secrets/NAME.ckpt
_OLD_KEY_SUFFIX = ".ckpt"


class StateManager(abc.ABC):
    # raw documents; implementations store bytes at (kind, topology)
    @abc.abstractmethod
    def _put(self, kind: str, name: str, data: bytes, *, private: bool = False) -> None: ...

    @abc.abstractmethod
    def _get(self, kind: str, name: str) -> bytes | None: ...

    @abc.abstractmethod
    def _delete(self, kind: str, name: str) -> None: ...

    @abc.abstractmethod
    def _list(self, kind: str) -> list[str]: ...

    KINDS = ("topologies", "packingplans", "pplans", "tmanagers", "executionstate", "schedulers",
             "packages", "secrets", "tls", "masterepochs", "checkpointrecords", "checkpointkeys")
    # outlive a kill, as the checkpoints they describe and sign do (a topology submitted again
    # under its name resumes from them)
    KEPT_AT_KILL = ("checkpointrecords", "checkpointkeys")

    def _put_json(self, kind: str, name: str, doc: Any) -> None:
        import json

        self._put(kind, name, json.dumps(doc, sort_keys=True).encode())

    def _get_json(self, kind: str, name: str) -> Any:
        import json

        raw = self._get(kind, name)
        return None if raw is None else json.loads(raw)

    def set_topology(self, topology: TopologyDef, secret: bytes | None = None) -> None:
        """Stores the topology document signed under the topology secret (``secret``, or the one
        stored for it): it carries the user's pickled objects, which daemons unpickle."""
        from heron_py.common.signing import sign_document

        secret = secret if secret is not None else self.get_secret(topology.name)
        doc = topology.to_dict()
        self._put_json("topologies", topology.name, sign_document(doc, secret) if secret else doc)

    def get_topology(self, name: str, secret: bytes | None = None) -> TopologyDef | None:
        """The stored topology, only once its signature matches the topology secret: ``secret``
        (what a daemon holds in its container) or else the one stored for it, so every reader
        checks it, the CLI's too (a CLI that read a changed document and stored it again would
        sign it anew). A document changed in the state store is refused with StateManagerError,
        never used; so is a signed one with no secret to check it. An unsigned document with no
        secret anywhere (a store written without one) is read as it is: nothing signed it."""
        d = self._get_json("topologies", name)
        if d is None:
            return None
        secret = secret if secret is not None else self.get_secret(name)
        if secret is not None:
            from heron_py.common.signing import document_problem

            problem = document_problem(d, secret)
            if problem is not None:
                raise StateManagerError(
                    f"topology '{name}': refusing the stored topology document: expected an HMAC-SHA256 "
                    f"signature under the topology secret, found {problem} (it was changed in the state store "
                    f"after submit, or stored by a heron-py that did not sign it; resubmit the topology)")
        elif "__signature__" in d:
            raise StateManagerError(
                f"topology '{name}': refusing the stored topology document: expected the topology secret in the "
                f"state store to check its signature, found none (the secret was removed after submit; kill and "
                f"resubmit the topology)")
        return TopologyDef.from_dict({k: v for k, v in d.items() if k != "__signature__"})

    def has_topology(self, name: str) -> bool:
        """Whether a topology document is stored under ``name``, without reading it: an existence
        check needs no signature, and a kill must work on a document that would be refused."""
        return self._get("topologies", name) is not None

    def set_packing_plan(self, name: str, plan: PackingPlan) -> None:
        self._put_json("packingplans", name, plan.to_dict())

    def get_packing_plan(self, name: str) -> PackingPlan | None:
        d = self._get_json("packingplans", name)
        return None if d is None else PackingPlan.from_dict(d)

    def set_physical_plan(self, name: str, plan: PhysicalPlan) -> None:
        self._put_json("pplans", name, plan.to_dict())

    def get_physical_plan(self, name: str) -> PhysicalPlan | None:
        d = self._get_json("pplans", name)
        return None if d is None else PhysicalPlan.from_dict(d)

    def set_tmanager_location(self, name: str, loc: TManagerLocation) -> None:
        self._put_json("tmanagers", name, loc.to_dict())

    def get_tmanager_location(self, name: str) -> TManagerLocation | None:
        d = self._get_json("tmanagers", name)
        return None if d is None else TManagerLocation.from_dict(d)

    # --- the topology master's ephemeral location ---
    @abc.abstractmethod
    def acquire_tmanager(self, name: str, loc: TManagerLocation) -> TManagerLocation | None:
        """Claims the topology master's location for ``loc``. Returns None when this process now
        holds it (it already did, or nobody did), else the live holder. The claim ends with this
        process (localfs) or its ZooKeeper session (zookeeper)."""

    @abc.abstractmethod
    def watch_tmanager_location(self, name: str, callback: LocationWatcher) -> Callable[[], None]:
        """Calls ``callback(location or None)`` now and on every change, from a background
        thread: the callback must not block (hand work to a loop with call_soon_threadsafe).
        Returns a function that stops the watch."""

    def release_tmanager(self, name: str) -> None:
        """Gives the location up if this process holds it (a master that steps down or stops)."""

    def forget_tmanager(self, name: str, host: str, pid: int) -> bool:
        """Removes the location when it still names the master ``pid`` at ``host``, which has
        exited without releasing it (its executor calls this); True when it did. A location
        another master claimed meanwhile names another process and is kept."""
        loc = self.get_tmanager_location(name)
        if loc is None or loc.host != host or loc.pid != pid:
            return False
        self._delete("tmanagers", name)
        return True

    def add_session_listener(self, listener: SessionListener) -> None:
        """``listener`` hears session state changes (see SessionListener), from a background
        thread. Local state has no sessions, so the default never calls it."""

    def close(self) -> None:
        """Releases connections; idempotent."""

    def set_execution_state(self, name: str, state: dict[str, Any]) -> None:
        self._put_json("executionstate", name, state)

    def get_execution_state(self, name: str) -> dict[str, Any] | None:
        d = self._get_json("executionstate", name)
        return None if d is None else dict(d)

    def set_scheduler_location(self, name: str, info: dict[str, Any]) -> None:
        self._put_json("schedulers", name, info)

    def get_scheduler_location(self, name: str) -> dict[str, Any] | None:
        d = self._get_json("schedulers", name)
        return None if d is None else dict(d)

    def set_package(self, name: str, data: bytes) -> None:
        self._put("packages", name, data)

    def get_package(self, name: str) -> bytes | None:
        return self._get("packages", name)

    def set_secret(self, name: str, secret: bytes) -> None:
        if name.endswith(_OLD_KEY_SUFFIX):
            # secrets/NAME.ckpt may still hold topology NAME's checkpoint key, kept there by an
            # older heron-py: moved to its own kind before this secret takes the node
            self.get_checkpoint_key(name[:-len(_OLD_KEY_SUFFIX)])
        self._put("secrets", name, secret, private=True)

    def get_secret(self, name: str) -> bytes | None:
        return self._get("secrets", name)

    # the key that signs a topology's checkpoint files: checkpoints outlive a kill (a topology
    # submitted again under its name resumes from them), so their key does too, unlike the
    # topology secret a new submit makes anew; kept as privately as the secret, in a kind of its
    # own (checkpointkeys/NAME) that no topology name reaches: ``NAME.ckpt`` under secrets/ is
    # the secret of a topology named ``NAME.ckpt``, whose submit would replace NAME's key and
    # whose kill would delete it
    def checkpoint_key(self, name: str) -> bytes:
        """The topology name's checkpoint key, made at its first submit (submit calls this)."""
        key = self.get_checkpoint_key(name)
        if key is None:
            import secrets

            key = secrets.token_bytes(32)
            self._put("checkpointkeys", name, key, private=True)
        return key

    def get_checkpoint_key(self, name: str) -> bytes | None:
        key = self._get("checkpointkeys", name)
        return key if key is not None else self._move_old_checkpoint_key(name)

    def _move_old_checkpoint_key(self, name: str) -> bytes | None:
        """A key an older heron-py kept at secrets/NAME.ckpt, moved to checkpointkeys/NAME the
        first time it is read (written there, then deleted at the old place), so a running
        topology's checkpoints stay readable. Not while a topology named NAME.ckpt exists: the
        node is then that topology's secret."""
        old = f"{name}{_OLD_KEY_SUFFIX}"
        key = self._get("secrets", old)
        if key is None or self._get("topologies", old) is not None:
            return None
        self._put("checkpointkeys", name, key, private=True)
        self._delete("secrets", old)
        return key

    # the TLS material (a CA certificate, the certificate and its key) holds a private key:
    # stored as privately as the secret, in a kind of its own (``NAME.tls`` under secrets/
    # would be the secret of a topology named ``NAME.tls``)
    def set_tls(self, name: str, material: bytes) -> None:
        self._put("tls", name, material, private=True)

    def get_tls(self, name: str) -> bytes | None:
        return self._get("tls", name)

    def set_checkpoint_record(self, name: str, record: dict[str, Any]) -> None:
        """Effectively once: what the master knows durably of the topology's checkpoints (the
        newest one completed, the operator's last choice), so that a storage that cannot show
        them (an unmounted folder, a flushed Redis) is never taken for "no checkpoint yet", and
        a master taking over keeps the operator's decision (topology_master/checkpoints.py)."""
        self._put_json("checkpointrecords", name, record)

    def get_checkpoint_record(self, name: str) -> dict[str, Any] | None:
        d = self._get_json("checkpointrecords", name)
        return dict(d) if isinstance(d, dict) else None

    def master_epoch(self, name: str) -> int:
        """The topology's current master epoch, not incremented (0 before the first master): a
        master whose epoch is below it has been replaced."""
        raw = self._get("masterepochs", name)
        return int(raw or b"0")

    @abc.abstractmethod
    def next_master_epoch(self, name: str) -> int:
        """Atomically increments and returns the topology's master epoch (1 for the first
        master). Each master that becomes active takes one, and its plan versions start above
        every version an earlier master could have pushed, whether or not that master's plan
        reached the state manager (``plan_book.epoch_base``)."""

    def list_topologies(self) -> list[str]:
        return sorted(self._list("topologies"))

    def delete_topology(self, name: str) -> None:
        for kind in self.KINDS:
            if kind not in self.KEPT_AT_KILL:
                self._delete(kind, name)
