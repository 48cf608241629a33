"""State in ZooKeeper, through kazoo, with Heron's layout under a root (default /heron-py):

    <root>/topologies/<name>      <root>/packingplans/<name>   <root>/pplans/<name>
    <root>/tmanagers/<name>       (ephemeral: the live topology master's host and ports)
    <root>/executionstate/<name>  <root>/schedulers/<name>     <root>/locks/<name>
    <root>/packages/<name>        <root>/secrets/<name>        <root>/tls/<name>

A znode holds at most about 1 MB (the server's jute.maxbuffer), and a topology package can be
larger, so a large value is split into children ``part-NNNNN`` under its node, whose own value
is a header naming the part count. Readers see either the old or the new header; parts are
written before the header that names them.

Access: every node heron-py creates carries one ACL entry, all rights for the digest
credential ``heron-py:<password>`` in the credential file (``config.zk_auth_file``, created
with mode 0600 on first use), and no world entry: the nodes hold the topology secret, the
package every container runs and the pids ``kill`` signals. Every heron-py process of an
installation must read the same file (a shared home does it on a cluster). Nodes made by a
heron-py before ACLs are open to anyone; the first start of this version gives them the
ACL (see ``_secure_older_nodes``), after which processes of the older version cannot use them.

TLS: with ``cfg.zk_tls`` the client reaches the servers' secure port (ZooKeeper's
secureClientPort) and the credential and the data travel encrypted. Files that cannot be loaded
are one error before any connection (``tls_context``); a handshake the servers refuse or whose
certificate does not verify is diagnosed when no session came (``tls_handshake_error``), since
kazoo only logs it and retries.

ACLs are only ever set on nodes under the root: the layout's nodes and the subtree
``_secure_older_nodes`` walks, whose top is the root. With a root of "/" the walk would reach
other software's nodes, so a root of "/" never re-ACLs anything. Nodes above the root that do
not exist yet are created with ``PARENT_ACL``, never with the credential's ACL, and existing
ones are left as they are: each user or team can have its own root and credential beside the
others (``/heron-py/team-a``, ``/heron-py/team-b``).

Threads: kazoo calls listeners and watches on its own thread. They must not block, and this
module's callers are told so (see StateManager); daemons pass everything to their loop.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import secrets
import socket
import ssl
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import BadVersionError, KazooException, NoAuthError, NodeExistsError, NoNodeError
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.protocol.states import ZnodeStat
from kazoo.retry import KazooRetry
from kazoo.security import OPEN_ACL_UNSAFE, make_acl, make_digest_acl

from heron_py.state.base import LocationWatcher, SessionListener, StateManager, StateManagerError, TManagerLocation
from heron_py.state.config import StateConfig, zk_auth_path

CHUNK = 512 * 1024
_MAGIC = b"\x00heron-py-parts:"
# how long one state operation may keep retrying through a lost connection before it fails
RETRY_DEADLINE_S = 30.0

_log = logging.getLogger("heron_py.state.zookeeper")
# kazoo logs every failed connect attempt; a CLI without logging set-up must not print them
# (its one error message says it all), while daemons' root handlers still get them
_log.addHandler(logging.NullHandler())

AUTH_USER = "heron-py"
# the ACL of a node above the root that heron-py has to create (the /heron-py of a root
# /heron-py/team-a): anyone may list it and create in it, so that another team's heron-py, with
# its own credential, can make its root beside this one; nobody may change or delete it
PARENT_ACL = [make_acl("world", "anyone", read=True, create=True)]


def load_credential(path: Path) -> tuple[str, str]:
    """heron-py's ZooKeeper digest credential (user, password) from ``path``, which is created
    with a random password (mode 0600) when it does not exist yet."""
    try:
        return _read_credential(path)
    except FileNotFoundError:
        _create_credential(path)
    return _read_credential(path)


def _read_credential(path: Path) -> tuple[str, str]:
    try:
        with open(path, "rb") as f:
            mode = os.fstat(f.fileno()).st_mode & 0o777
            raw = f.read(4096)
    except FileNotFoundError:
        raise
    except OSError as e:
        raise StateManagerError(f"{path}: cannot read the ZooKeeper credential file: {e.strerror or e}") from e
    # as ssh does with keys: a credential others can read is no credential
    if mode & 0o077:
        raise StateManagerError(f"{path}: expected the ZooKeeper credential file to have mode 0600 (readable "
                                f"by its owner only), found {mode:04o}; run chmod 600 {path}")
    lines = raw.decode("utf-8", "replace").split()
    user, sep, password = lines[0].partition(":") if len(lines) == 1 else ("", "", "")
    if not (user and sep and password):
        # the content is a secret: the error describes it, never shows it
        found = f"{len(lines)} words" if len(lines) != 1 else "a word without USER: before the password"
        raise StateManagerError(f"{path}: expected one line USER:PASSWORD (heron-py's ZooKeeper digest "
                                f"credential), found {found}")
    return user, password


def _create_credential(path: Path) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")  # mode 0600
        try:
            with os.fdopen(fd, "w") as f:
                f.write(f"{AUTH_USER}:{secrets.token_urlsafe(32)}\n")
                f.flush()
                os.fsync(f.fileno())
            # a link, not a rename: when processes on several hosts start at once, the first
            # file stays and everyone reads it, complete
            try:
                os.link(tmp, path)
            except FileExistsError:
                pass
        finally:
            os.unlink(tmp)
    except OSError as e:
        raise StateManagerError(f"{path}: cannot create the ZooKeeper credential file: {e.strerror or e}") from e


def _tls_where(cfg: StateConfig) -> str:
    return f"state manager {cfg.describe()}"


def tls_context(cfg: StateConfig) -> ssl.SSLContext:
    """The client TLS context ``cfg`` asks for, made as kazoo makes its own (the system's CAs plus
    the CA file, the certificate checked, the host name when asked), so that a file that cannot be
    loaded is one clear error here and not a retry loop inside kazoo."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.load_default_certs(ssl.Purpose.SERVER_AUTH)
    ctx.check_hostname = cfg.zk_tls_verify_hostname
    ctx.verify_mode = ssl.CERT_REQUIRED
    if cfg.zk_ca_file:
        _load(cfg, "--zk-ca-file", cfg.zk_ca_file, "a PEM file of CA certificates",
              lambda: ctx.load_verify_locations(cfg.zk_ca_file))
    if cfg.zk_cert_file:
        _check_key_mode(cfg)
        _load(cfg, "--zk-cert-file", cfg.zk_cert_file, "a PEM certificate whose key is in --zk-key-file "
              f"{cfg.zk_key_file}", lambda: ctx.load_cert_chain(cfg.zk_cert_file, cfg.zk_key_file))
    return ctx


def _load(cfg: StateConfig, opt: str, path: str, expected: str, load: Callable[[], None]) -> None:
    try:
        load()
    except ssl.SSLError as e:
        raise StateManagerError(f"{opt} {path}: expected {expected}, found a file OpenSSL refuses "
                                f"({e.reason or e}; {_tls_where(cfg)})") from None
    except OSError as e:
        raise StateManagerError(f"{opt} {path}: cannot read it: {e.strerror or e} ({_tls_where(cfg)})") from None


def _check_key_mode(cfg: StateConfig) -> None:
    # as for the credential file: a private key others can read is no longer private
    try:
        mode = os.stat(cfg.zk_key_file).st_mode & 0o777
    except OSError as e:
        raise StateManagerError(f"--zk-key-file {cfg.zk_key_file}: cannot read it: {e.strerror or e} "
                                f"({_tls_where(cfg)})") from None
    if mode & 0o077:
        raise StateManagerError(f"--zk-key-file {cfg.zk_key_file}: expected mode 0600 (readable by its owner "
                                f"only), found {mode:04o}; run chmod 600 {cfg.zk_key_file}")


def _ssl_reason(e: ssl.SSLError, cfg: StateConfig) -> str:
    """An SSL error in words without OpenSSL's source line (which differs between builds), with
    what was expected: a server certificate our CA signed, or a client certificate the server takes."""
    if isinstance(e, ssl.SSLCertVerificationError):
        ca = cfg.zk_ca_file or "the system's CAs"
        return (f"certificate verify failed: {e.verify_message} (expected a server certificate signed by a CA "
                f"in {ca}" + (" naming the host in --zk" if cfg.zk_tls_verify_hostname else "") + ")")
    mine = f"the one in --zk-cert-file {cfg.zk_cert_file}" if cfg.zk_cert_file else "none (no --zk-cert-file)"
    return (f"the server refused it ({e.reason or e.strerror or e}): expected a client certificate its trust "
            f"store accepts, found {mine}")


def tls_handshake_error(cfg: StateConfig, ctx: ssl.SSLContext) -> str | None:
    """Why a TLS session with the servers of ``cfg`` fails, or None when a server accepts it (or
    none answers at all: then TLS is not the trouble). After the handshake one read waits briefly:
    with TLS 1.3 a server that wants a client certificate refuses it only then."""
    timeout = cfg.connect_timeout_s
    for part in cfg.zk_hosts.split(","):
        host, _, port = part.rpartition(":")
        host = host.strip("[]")
        try:
            with socket.create_connection((host, int(port)), timeout=timeout) as raw, \
                    ctx.wrap_socket(raw, server_hostname=host) as tls:
                tls.settimeout(min(timeout, 1.0))
                try:
                    tls.recv(1)
                except TimeoutError:
                    pass  # the server waits for ZooKeeper's first request: TLS is fine
        except ssl.SSLError as e:
            return f"{part}: {_ssl_reason(e, cfg)}"
        except OSError:
            continue
    return None


class ZkStateManager(StateManager):
    LAYOUT = ("topologies", "packingplans", "pplans", "tmanagers", "executionstate", "schedulers",
              "locks", "packages", "secrets", "tls", "masterepochs")

    def __init__(self, cfg: StateConfig, home: Path | None = None) -> None:
        self.cfg = cfg
        self.root = cfg.zk_root.rstrip("/") or "/"
        self._listeners: list[SessionListener] = []
        self._closed = False
        self._lock = threading.Lock()
        self.auth_file = zk_auth_path(cfg, home)
        user, password = load_credential(self.auth_file)
        self.acl = [make_digest_acl(user, password, all=True)]
        self._tls = tls_context(cfg) if cfg.zk_tls else None
        tls: dict[str, Any] = {}
        if cfg.zk_tls:
            tls = {"use_ssl": True, "ca": cfg.zk_ca_file or None, "certfile": cfg.zk_cert_file or None,
                   "keyfile": cfg.zk_key_file or None, "verify_certs": True,
                   "check_hostname": cfg.zk_tls_verify_hostname}
        self._zk = KazooClient(
            hosts=cfg.zk_hosts, timeout=cfg.session_timeout_s,
            # reconnect forever: a daemon outlives any ZooKeeper outage
            connection_retry=KazooRetry(max_tries=-1, delay=0.2, max_delay=1.0),
            # kazoo sends the credential again on every reconnect; every node it creates
            # (create, ensure_path, makepath) gets the default ACL
            auth_data=[("digest", f"{user}:{password}")], default_acl=self.acl,
            logger=_log, **tls)
        self._zk.add_listener(self._on_state)
        try:
            self._zk.start(timeout=cfg.connect_timeout_s)
        except KazooTimeoutError:
            self._zk.stop()
            self._zk.close()
            why = tls_handshake_error(cfg, self._tls) if self._tls else None
            if why:
                raise StateManagerError(f"ZooKeeper at {cfg.zk_hosts}: TLS handshake failed: {why}; "
                                        f"{_tls_where(cfg)}") from None
            raise StateManagerError(
                f"ZooKeeper at {cfg.zk_hosts} is not reachable: no session within the connect timeout of "
                f"{cfg.connect_timeout_s:g} s (is the server running? state manager {cfg.describe()})") from None
        self._retry = KazooRetry(max_tries=-1, delay=0.1, max_delay=1.0, deadline=RETRY_DEADLINE_S,
                                 ignore_expire=True)
        try:
            self._ensure_parents()
            for kind in self.LAYOUT:
                self._do(self._zk.ensure_path, f"{self.root}/{kind}")
            self._secure_older_nodes()
        except StateManagerError:
            self.close()  # no kazoo thread left behind retrying
            raise

    def _ensure_parents(self) -> None:
        """Creates the nodes above the root that are missing, with PARENT_ACL (ensure_path would
        give them heron-py's ACL and keep every other credential out of them)."""
        names = [n for n in self.root.split("/") if n][:-1]
        for i in range(len(names)):
            path = "/" + "/".join(names[:i + 1])
            try:
                self._do(self._zk.create, path, b"", acl=PARENT_ACL)
            except NodeExistsError:
                pass

    def _secure_older_nodes(self) -> None:
        """Gives nodes a heron-py before ACLs created (open to anyone) heron-py's ACL. The root
        goes last and serves as the marker: while it is still open, a start secures the whole
        tree, so a pass cut short is finished by the next start. A root whose ACL an operator
        changed (anything but the open one) is left as it is."""
        if self.root == "/":
            return  # the whole ensemble, other software's nodes too: never heron-py's to re-ACL
        acl, _ = self._do(self._zk.get_acls, self.root)
        if list(acl) != list(OPEN_ACL_UNSAFE):
            return
        _log.warning("ZooKeeper at %s: nodes under %s are open to anyone (made by a heron-py before ACLs); "
                     "restricting them to the credential in %s", self.cfg.zk_hosts, self.root, self.auth_file)
        for path in self._subtree(self.root):
            self._do(self._zk.set_acls, path, self.acl)

    def _subtree(self, path: str) -> list[str]:
        """``path`` and the nodes below it, children before their parent."""
        out: list[str] = []
        for child in self._children(path):
            if path == "/" and child == "zookeeper":
                continue  # ZooKeeper's own (quotas, config)
            out += self._subtree(f"{path.rstrip('/')}/{child}")
        return [*out, path]

    # --- sessions ---
    @property
    def session_id(self) -> str:
        sid = self._zk.client_id
        return f"{sid[0]:#x}" if sid else ""

    def _on_state(self, state: str) -> None:
        # called on kazoo's thread: never block here
        name = {KazooState.LOST: "lost", KazooState.SUSPENDED: "suspended",
                KazooState.CONNECTED: "connected"}.get(state, str(state).lower())
        _log.info("ZooKeeper session %s", name)
        for listener in list(self._listeners):
            try:
                listener(name)
            except Exception:  # a listener's bug must not kill kazoo's thread
                _log.exception("session listener failed")

    def add_session_listener(self, listener: SessionListener) -> None:
        self._listeners.append(listener)

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        try:
            self._zk.stop()
        finally:
            self._zk.close()

    # --- raw documents ---
    def _do(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        try:
            return self._retry(fn, *args, **kwargs)
        except (NoNodeError, NodeExistsError, BadVersionError):
            raise  # answers, not failures: callers handle them
        except NoAuthError as e:
            raise StateManagerError(
                f"ZooKeeper at {self.cfg.zk_hosts}: {getattr(fn, '__name__', fn)} {args[0] if args else ''} "
                f"refused (NoAuthError): expected the node's ACL to admit heron-py's credential in "
                f"{self.auth_file}, found an ACL that does not (the node was made with another credential: "
                f"every heron-py process and host must read the same credential file)") from e
        except (KazooException, KazooTimeoutError) as e:
            raise StateManagerError(f"ZooKeeper at {self.cfg.zk_hosts}: {getattr(fn, '__name__', fn)} "
                                    f"{args[0] if args else ''} failed: {type(e).__name__} {e}") from e

    def _node(self, kind: str, name: str) -> str:
        if kind not in self.LAYOUT:
            raise ValueError(f"unknown state kind {kind!r}; expected one of {self.LAYOUT}")
        if not name or "/" in name or name.startswith("."):
            raise ValueError(f"bad topology name {name!r} for state {kind}")
        return f"{self.root}/{kind}/{name}"

    def _put(self, kind: str, name: str, data: bytes, *, private: bool = False) -> None:
        # private (secrets, tls): every node is readable only with heron-py's credential
        path = self._node(kind, name)
        if len(data) <= CHUNK and not data.startswith(_MAGIC):
            self._set(path, data)
            return
        parts = [data[i:i + CHUNK] for i in range(0, len(data), CHUNK)]
        for i, part in enumerate(parts):
            self._set(f"{path}/part-{i:05d}", part)
        self._set(path, _MAGIC + str(len(parts)).encode())
        # parts beyond the new count belong to an older, longer value
        for child in self._children(path):
            if child.startswith("part-") and int(child[5:]) >= len(parts):
                self._delete_path(f"{path}/{child}")

    def _set(self, path: str, data: bytes) -> None:
        try:
            self._do(self._zk.set, path, data)
        except NoNodeError:
            try:
                self._do(self._zk.create, path, data, makepath=True)
            except NodeExistsError:
                self._do(self._zk.set, path, data)

    def _get(self, kind: str, name: str) -> bytes | None:
        path = self._node(kind, name)
        try:
            data, _ = self._do(self._zk.get, path)
            if data.startswith(_MAGIC):
                n = int(data[len(_MAGIC):])
                return b"".join(self._do(self._zk.get, f"{path}/part-{i:05d}")[0] for i in range(n))
            return bytes(data)
        except NoNodeError:
            return None

    def _children(self, path: str) -> list[str]:
        try:
            return list(self._do(self._zk.get_children, path))
        except NoNodeError:
            return []

    def _delete_path(self, path: str) -> None:
        try:
            self._do(self._zk.delete, path, recursive=True)
        except NoNodeError:
            pass

    def _delete(self, kind: str, name: str) -> None:
        self._delete_path(self._node(kind, name))

    def _list(self, kind: str) -> list[str]:
        return [c for c in self._children(f"{self.root}/{kind}") if not c.startswith(".")]

    def delete_topology(self, name: str) -> None:
        super().delete_topology(name)
        self._delete("locks", name)

    def next_master_epoch(self, name: str) -> int:
        """A compare-and-set on the counter node's ZooKeeper version: two masters that race
        get different epochs, and a retry after a lost reply only skips a number."""
        path = self._node("masterepochs", name)
        while True:
            try:
                data, stat = self._do(self._zk.get, path)
            except NoNodeError:
                try:
                    self._do(self._zk.create, path, b"1", makepath=True)
                    return 1
                except NodeExistsError:
                    continue  # another master created it first: read it again
            epoch = int(data or b"0") + 1
            try:
                self._do(self._zk.set, path, str(epoch).encode(), version=stat.version)
                return epoch
            except BadVersionError:
                continue  # another master took one meanwhile

    # --- the topology master's ephemeral node ---
    def acquire_tmanager(self, name: str, loc: TManagerLocation) -> TManagerLocation | None:
        path = self._node("tmanagers", name)
        mine = dataclasses.replace(loc, owner=self.session_id)  # the session owns it; the rest as given
        raw = json.dumps(mine.to_dict(), sort_keys=True).encode()
        try:
            self._do(self._zk.create, path, raw, ephemeral=True, makepath=True)
            return None
        except NodeExistsError:
            pass
        try:
            data, stat = self._do(self._zk.get, path)
        except NoNodeError:
            # it vanished between our create and get: try once more, the caller retries later
            return self.acquire_tmanager(name, loc) if self._zk.connected else mine
        holder = TManagerLocation.from_dict(json.loads(data))
        if stat.ephemeralOwner == self._zk.client_id[0]:
            if data != raw:
                self._do(self._zk.set, path, raw)  # our own node: refresh the ports
            return None
        return holder

    def release_tmanager(self, name: str) -> None:
        path = self._node("tmanagers", name)
        try:
            _, stat = self._do(self._zk.get, path)
            if stat.ephemeralOwner == self._zk.client_id[0]:
                self._do(self._zk.delete, path)
        except NoNodeError:
            pass

    def watch_tmanager_location(self, name: str, callback: LocationWatcher) -> Callable[[], None]:
        path = self._node("tmanagers", name)
        stopped = threading.Event()

        def on_change(data: bytes | None, stat: ZnodeStat | None) -> bool:
            if stopped.is_set():
                return False  # tells kazoo to drop the watch
            loc = None
            if data:
                try:
                    loc = TManagerLocation.from_dict(json.loads(data))
                except (ValueError, KeyError, TypeError):
                    _log.error("%s: expected a topology master location (JSON with host, port, pid), "
                               "found %r; ignoring it", path, data[:200])
            callback(loc)
            return True

        self._zk.DataWatch(path, on_change)
        return stopped.set
