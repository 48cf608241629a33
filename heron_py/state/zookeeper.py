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
installation must read the same file (a shared home does it on a cluster).

Trust: a node is heron-py's when its ACL is exactly that entry. ZooKeeper keeps no creator, so
the ACL is what can be checked, and it is enough: only a client with ADMIN on a node can change
its ACL, and only holders of the credential (the password, or its digest, which ZooKeeper shows
only to clients with ADMIN on a node that names it) can give a node that ACL. A start refuses
a root or a layout node with any other ACL (``_ensure_ours``: another user may have made it
first, open to itself, and would then replace secrets and packages at will); the children of
nodes that pass can be made by the credential only. A node below them that is not heron-py's
(made while a node above was open) is refused before its value is read or a value is written
to it (``_read``, ``_set``); the one exception is the watch on the master's location, whose
callback runs on kazoo's thread and must not block: a location someone else wrote leads only to
a peer that fails the topology's handshake. Nothing is ever re-ACLed: the nodes of a heron-py before ACLs were
open to anyone, so what they hold may be anyone's; they are refused like a stranger's, and the
refusal says how to clear them.

TLS: with ``cfg.zk_tls`` the client reaches the servers' secure port (ZooKeeper's
secureClientPort) and the credential and the data travel encrypted. The servers' certificates
are checked against the CA file alone when one is given (``tls_context``; kazoo's own context
would add the system's CAs, so kazoo connects through ``_TlsHandler``). Files that cannot be
loaded are one error before any connection; a handshake the servers refuse or whose
certificate does not verify is diagnosed when no session came (``tls_handshake_error``), since
kazoo only logs it and retries.

Nodes above the root that do not exist yet are created with ``parent_acl``: anyone may list
them, only the credential may create in them (CREATE for anyone would let anyone take a root's
name there first). Existing ones are left as they are: an operator who wants roots of several
users or teams side by side (``/heron-py/team-a``, ``/heron-py/team-b``, each with its own
credential) creates their parent with an ACL that lets each credential create in it.

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
from kazoo.handlers.threading import KazooTimeoutError, SequentialThreadingHandler
from kazoo.protocol.states import ZnodeStat
from kazoo.retry import KazooRetry
from kazoo.security import ACL, Permissions, make_acl, make_digest_acl

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
# anyone's part of the ACL of a node above the root that heron-py has to create (the /a and /a/b
# of a root /a/b/heron-py): listing it; the rest is the credential's (``parent_acl``)
WORLD_READ = make_acl("world", "anyone", read=True)
# ZooKeeper's letters for permissions, in zkCli.sh's order
_PERM_LETTERS = ((Permissions.CREATE, "c"), (Permissions.DELETE, "d"), (Permissions.READ, "r"),
                 (Permissions.WRITE, "w"), (Permissions.ADMIN, "a"))
# what a refusal of a node that is not heron-py's says heron-py will not do, and the fix: a root
# or layout node holds no value, so an operator may also give it the right ACL; a node that
# holds a value may hold anyone's, so it goes
_AT_START = "use it: delete it (or fix its ACL with setAcl) and start again"
_AT_READ = "use what it holds: delete it and submit the topology again"
_AT_WRITE = "write to it: delete it and try again"


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
    """The client TLS context ``cfg`` asks for, which every connection to the servers uses: the
    certificate checked against the CA file alone when one is given, else against the system's
    CAs (a CA file names the one CA that signs the ensemble's certificates: with the system's CAs
    beside it, any certificate a public CA signed would pass, for any host when the host-name
    check is off), the host name when asked. A file that cannot be loaded is one clear error
    here and not a retry loop inside kazoo."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = cfg.zk_tls_verify_hostname
    ctx.verify_mode = ssl.CERT_REQUIRED
    if cfg.zk_ca_file:
        _load(cfg, "--zk-ca-file", cfg.zk_ca_file, "a PEM file of CA certificates",
              lambda: ctx.load_verify_locations(cfg.zk_ca_file))
    else:
        ctx.load_default_certs(ssl.Purpose.SERVER_AUTH)
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


class _TlsHandler(SequentialThreadingHandler):  # type: ignore[misc]
    """kazoo's threading handler, connecting with heron-py's TLS context: kazoo makes a context of
    its own for each connection, which always trusts the system's CAs besides the CA file."""

    def __init__(self, ctx: ssl.SSLContext) -> None:
        super().__init__()
        self._ctx = ctx

    def create_connection(self, address: tuple[str, int], hostname: str | None = None,
                          timeout: float | None = None, **_kazoo_tls: Any) -> ssl.SSLSocket:
        # kazoo's own TLS connect (kazoo.handlers.utils.create_tcp_connection), with our context;
        # the files kazoo passes (_kazoo_tls) are in it already
        family = socket.getaddrinfo(address[0], address[1], 0, socket.SOCK_STREAM)[0][0]
        sock = self._ctx.wrap_socket(socket.socket(family), server_hostname=hostname)
        try:
            sock.settimeout(timeout)
            sock.connect(address)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except BaseException:
            sock.close()
            raise
        return sock


class ZkStateManager(StateManager):
    LAYOUT = ("topologies", "packingplans", "pplans", "tmanagers", "executionstate", "schedulers",
              "locks", "packages", "secrets", "tls", "masterepochs", "checkpointrecords", "checkpointkeys")

    def __init__(self, cfg: StateConfig, home: Path | None = None) -> None:
        self.cfg = cfg
        self.root = cfg.zk_root.rstrip("/") or "/"
        self._listeners: list[SessionListener] = []
        self._closed = False
        self._lock = threading.Lock()
        self.auth_file = zk_auth_path(cfg, home)
        user, password = load_credential(self.auth_file)
        self.acl = [make_digest_acl(user, password, all=True)]
        self.parent_acl = [WORLD_READ, *self.acl]
        self._tls = tls_context(cfg) if cfg.zk_tls else None
        tls: dict[str, Any] = {}
        if self._tls is not None:
            tls = {"use_ssl": True, "handler": _TlsHandler(self._tls)}
        self._zk = KazooClient(
            hosts=cfg.zk_hosts, timeout=cfg.session_timeout_s,
            # reconnect forever: a daemon outlives any ZooKeeper outage
            connection_retry=KazooRetry(max_tries=-1, delay=0.2, max_delay=1.0),
            # kazoo sends the credential again on every reconnect; every node it creates
            # (create, makepath) gets the default ACL
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
            if self.root != "/":  # ZooKeeper's own node, never heron-py's
                self._ensure_ours(self.root)
            for kind in self.LAYOUT:
                self._ensure_ours(f"{self.root}/{kind}")
        except StateManagerError:
            self.close()  # no kazoo thread left behind retrying
            raise

    def _ensure_parents(self) -> None:
        """Creates the nodes above the root that are missing, with ``parent_acl``; existing ones
        are someone else's to set (and need no right of ours but to create in the last one)."""
        names = [n for n in self.root.split("/") if n][:-1]
        for i in range(len(names)):
            path = "/" + "/".join(names[:i + 1])
            if self._do(self._zk.exists, path) is None:
                self._create(path, self.parent_acl)

    def _ensure_ours(self, path: str) -> None:
        """Creates ``path`` with heron-py's ACL, or refuses it when it exists with another ACL."""
        try:
            acl, _ = self._do(self._zk.get_acls, path)
        except NoNodeError:
            if self._create(path, self.acl):
                return
            acl, _ = self._do(self._zk.get_acls, path)  # another process made it meanwhile
        self._check_ours(path, acl, _AT_START)

    def _create(self, path: str, acl: list[ACL]) -> bool:
        """Creates the empty node ``path``: True, or False when it exists."""
        try:
            self._do(self._zk.create, path, b"", acl=acl)
            return True
        except NodeExistsError:
            return False
        except StateManagerError as e:
            if not isinstance(e.__cause__, NoAuthError):
                raise
            parent = path.rsplit("/", 1)[0] or "/"
            what = (f"the root {path}" if path == self.root else
                    f"{path}, on the way to the root {self.root}" if self.root.startswith(path + "/") else path)
            raise StateManagerError(
                f"ZooKeeper at {self.cfg.zk_hosts}: cannot create {what}: its parent {parent} does not let "
                f"heron-py's credential in {self.auth_file} create nodes (NoAuthError); let that credential "
                f"create in {parent} (setAcl), or choose another root") from None

    def _check_ours(self, path: str, acl: list[ACL], how: str) -> None:
        """Refuses ``path`` unless its ACL is exactly heron-py's: any right for any other
        identity (world, ip, another digest, sasl, x509) lets someone else change what it holds,
        or what is made below it."""
        if list(acl) == self.acl:
            return
        raise StateManagerError(
            f"ZooKeeper at {self.cfg.zk_hosts}: node {path} has ACL [{self._acl_text(acl)}], expected only "
            f"heron-py's credential ({self._acl_text(self.acl)}, the credential in {self.auth_file}); someone "
            f"else created it or changed its ACL, so heron-py will not {how}")

    def _acl_text(self, acl: list[ACL]) -> str:
        """``acl`` as zkCli.sh writes it (scheme:id:cdrwa), the digest of heron-py's own
        credential elided: the error goes to logs, and with the digest anyone who may create
        somewhere heron-py reads could give a node heron-py's ACL."""
        mine = self.acl[0].id
        out = []
        for entry in acl:
            ident = entry.id.id
            if entry.id == mine:
                ident = ident.split(":", 1)[0] + ":..."
            perms = "".join(letter for bit, letter in _PERM_LETTERS if entry.perms & bit)
            out.append(f"{entry.id.scheme}:{ident}:{perms}")
        return ", ".join(out)

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
        # the parts go below the header: one someone else made is refused before they are written
        try:
            acl, _ = self._do(self._zk.get_acls, path)
            self._check_ours(path, acl, _AT_WRITE)
        except NoNodeError:
            pass
        parts = [data[i:i + CHUNK] for i in range(0, len(data), CHUNK)]
        for i, part in enumerate(parts):
            self._set(f"{path}/part-{i:05d}", part)
        self._set(path, _MAGIC + str(len(parts)).encode())
        # parts beyond the new count belong to an older, longer value
        for child in self._children(path):
            if child.startswith("part-") and int(child[5:]) >= len(parts):
                self._delete_path(f"{path}/{child}")

    def _set(self, path: str, data: bytes) -> None:
        """Writes ``path``, made (with its parents) when missing. An existing node whose ACL is
        not heron-py's is refused first: whoever else may read it would read the value. Its
        ACL cannot change before the write (only the credential has ADMIN on it), and the node
        cannot be replaced (its parent is heron-py's: checked at start, or by _put)."""
        while True:
            try:
                acl, _ = self._do(self._zk.get_acls, path)
            except NoNodeError:
                try:
                    self._do(self._zk.create, path, data, makepath=True)
                    return
                except NodeExistsError:
                    continue  # another process made it meanwhile: check it
            self._check_ours(path, acl, _AT_WRITE)
            try:
                self._do(self._zk.set, path, data)
                return
            except NoNodeError:
                continue  # deleted meanwhile: made anew

    def _read(self, path: str) -> tuple[bytes, ZnodeStat]:
        """``path``'s value and stat, refused unless its ACL is heron-py's (NoNodeError when the
        node is missing). ZooKeeper gives the ACL and the value in two calls: the ACL comes
        first (once it is heron-py's alone, only the credential can change the node), and the same
        creation zxid in both stats says they are one node, not one deleted and made again."""
        while True:
            acl, acl_stat = self._do(self._zk.get_acls, path)
            self._check_ours(path, acl, _AT_READ)
            data, stat = self._do(self._zk.get, path)
            if stat.czxid == acl_stat.czxid:
                return bytes(data), stat

    def _get(self, kind: str, name: str) -> bytes | None:
        path = self._node(kind, name)
        try:
            data, _ = self._read(path)
            if data.startswith(_MAGIC):
                n = int(data[len(_MAGIC):])
                return b"".join(self._read(f"{path}/part-{i:05d}")[0] for i in range(n))
            return data
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
                data, stat = self._read(path)
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
            data, stat = self._read(path)
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
