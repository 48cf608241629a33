"""Which state manager a process uses, and how that choice travels to every daemon.

The choice comes from (highest first) the command line (``--state-manager``, ``--zk``), the
environment (``HERON_PY_STATE_MANAGER``, ``HERON_PY_ZK``), the file
``$HERON_PY_HOME/conf/statemgr.json`` (``{"state_manager": "zookeeper", "zk": "h:2181/root"}``)
and finally the default, localfs. A scheduler hands the resolved choice to executors as
arguments (``to_args``), and executors hand it to their children the same way, so every
process of a topology reads and writes the same store.

ZooKeeper nodes are readable and writable only with heron-py's digest credential, kept in
``$HERON_PY_HOME/zk.auth`` (mode 0600, created on first use) unless ``--zk-auth-file``,
``HERON_PY_ZK_AUTH_FILE`` or ``zk_auth_file`` in statemgr.json names another file; every
process that uses the ensemble must read the same credential (see heron_py.state.zookeeper).

Over the network the digest credential travels in clear unless the client reaches ZooKeeper's
secure port: ``--zk-tls`` (``HERON_PY_ZK_TLS``, ``zk_tls``) turns TLS on, ``--zk-ca-file`` names
the CA that signed the servers' certificates, then the only CA trusted (default: the system's
CAs), ``--zk-cert-file`` and ``--zk-key-file`` a client certificate for servers that ask for one
(mutual TLS), and ``--no-zk-tls-verify-hostname`` stops checking that a server's certificate
names the host in ``--zk`` (the certificate is still checked against the CA). They travel to
every daemon as the credential file does, in ``to_args``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from heron_py.state.base import StateManagerError

ENV_KIND = "HERON_PY_STATE_MANAGER"
ENV_ZK = "HERON_PY_ZK"
ENV_ZK_SESSION = "HERON_PY_ZK_SESSION_TIMEOUT"
ENV_ZK_CONNECT = "HERON_PY_ZK_CONNECT_TIMEOUT"
ENV_ZK_AUTH_FILE = "HERON_PY_ZK_AUTH_FILE"
ENV_ZK_TLS = "HERON_PY_ZK_TLS"
ENV_ZK_CA_FILE = "HERON_PY_ZK_CA_FILE"
ENV_ZK_CERT_FILE = "HERON_PY_ZK_CERT_FILE"
ENV_ZK_KEY_FILE = "HERON_PY_ZK_KEY_FILE"
ENV_ZK_TLS_VERIFY_HOSTNAME = "HERON_PY_ZK_TLS_VERIFY_HOSTNAME"
ZK_AUTH_FILE_NAME = "zk.auth"  # under the heron home when nothing names another file
KINDS = ("localfs", "zookeeper")
DEFAULT_ZK_ROOT = "/heron-py"
# ZooKeeper expires a dead holder's session after this long, so it bounds how quickly a
# standby topology master can take over; servers clamp it to [2, 20] x tickTime.
DEFAULT_SESSION_TIMEOUT_S = 5.0
DEFAULT_CONNECT_TIMEOUT_S = 5.0

_HOSTPORT = re.compile(r"^[A-Za-z0-9.\-\[\]:]+:\d{1,5}$")


@dataclass(frozen=True)
class StateConfig:
    kind: str = "localfs"
    zk_hosts: str = ""  # "host:port[,host:port...]" without the chroot
    zk_root: str = DEFAULT_ZK_ROOT
    session_timeout_s: float = DEFAULT_SESSION_TIMEOUT_S
    connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S
    # the ZooKeeper credential's file when named explicitly; "" is zk.auth under the heron home,
    # which each process finds from its own home (so it is not passed on in to_args)
    zk_auth_file: str = ""
    # TLS to ZooKeeper's secure port; the files are absolute paths, "" when not named
    zk_tls: bool = False
    zk_ca_file: str = ""  # "" is the system's CAs
    zk_cert_file: str = ""  # a client certificate (mutual TLS), with zk_key_file
    zk_key_file: str = ""
    zk_tls_verify_hostname: bool = True

    @property
    def zk(self) -> str:
        """The --zk form: hosts plus the root as chroot."""
        return f"{self.zk_hosts}{self.zk_root}"

    def to_args(self) -> list[str]:
        if self.kind == "localfs":
            return ["--state-manager", "localfs"]
        auth = ["--zk-auth-file", self.zk_auth_file] if self.zk_auth_file else []
        return ["--state-manager", "zookeeper", "--zk", self.zk,
                "--zk-session-timeout", f"{self.session_timeout_s:g}", *self.connect_args(), *auth, *self.tls_args()]

    def connect_args(self) -> list[str]:
        """The connect timeout as arguments, when it is not the default (children wait as long)."""
        if self.connect_timeout_s == DEFAULT_CONNECT_TIMEOUT_S:
            return []
        return ["--zk-connect-timeout", f"{self.connect_timeout_s:g}"]

    def tls_args(self) -> list[str]:
        """The TLS settings as arguments; none when TLS is off (the files cannot be set then)."""
        if not self.zk_tls:
            return []
        files = [("--zk-ca-file", self.zk_ca_file), ("--zk-cert-file", self.zk_cert_file),
                 ("--zk-key-file", self.zk_key_file)]
        return ["--zk-tls", *(w for opt, path in files if path for w in (opt, path)),
                *([] if self.zk_tls_verify_hostname else ["--no-zk-tls-verify-hostname"])]

    def describe(self) -> str:
        if self.kind == "localfs":
            return "localfs"
        return f"zookeeper at {self.zk}" + (" over TLS" if self.zk_tls else "")


def parse_zk(value: str, where: str = "--zk") -> tuple[str, str]:
    """``host:port[,host:port...][/chroot]`` → (hosts, root). The root defaults to /heron-py."""
    hosts, slash, chroot = value.strip().partition("/")
    root = "/" + chroot.strip("/") if slash and chroot.strip("/") else DEFAULT_ZK_ROOT
    parts = [h.strip() for h in hosts.split(",")]
    if not hosts or not all(_HOSTPORT.match(p) and 0 < int(p.rsplit(":", 1)[1]) < 65536 for p in parts):
        raise StateManagerError(f"{where}: expected HOST:PORT[,HOST:PORT...][/chroot], found {value!r}")
    return ",".join(parts), root


def _positive(raw: str, where: str) -> float:
    try:
        v = float(raw)
    except ValueError:
        v = -1.0
    if not v > 0:
        raise StateManagerError(f"{where}: expected a number of seconds > 0, found {raw!r}")
    return v


def _bool(raw: str, where: str) -> bool:
    word = raw.strip().lower()
    if word in ("true", "1", "yes", "on"):
        return True
    if word in ("false", "0", "no", "off"):
        return False
    raise StateManagerError(f"{where}: expected true or false, found {raw!r}")


def add_arguments(ap: argparse.ArgumentParser) -> None:
    g = ap.add_argument_group("state manager")
    g.add_argument("--state-manager", choices=KINDS, default=None,
                   help=f"where topology state lives (default: ${ENV_KIND}, conf/statemgr.json, or localfs)")
    g.add_argument("--zk", default=None, metavar="HOST:PORT[,HOST:PORT...][/chroot]",
                   help=f"ZooKeeper ensemble for --state-manager zookeeper (default: ${ENV_ZK})")
    g.add_argument("--zk-session-timeout", default=None, metavar="SECONDS",
                   help=f"ZooKeeper session timeout (default {DEFAULT_SESSION_TIMEOUT_S:g} s)")
    g.add_argument("--zk-connect-timeout", default=None, metavar="SECONDS",
                   help=f"how long a command or daemon waits to reach ZooKeeper before it fails (default "
                        f"${ENV_ZK_CONNECT}, or {DEFAULT_CONNECT_TIMEOUT_S:g} s)")
    g.add_argument("--zk-auth-file", default=None, metavar="PATH",
                   help=f"ZooKeeper digest credential USER:PASSWORD, mode 0600, created if missing (default: "
                        f"${ENV_ZK_AUTH_FILE}, or $HERON_PY_HOME/{ZK_AUTH_FILE_NAME})")
    g.add_argument("--zk-tls", action=argparse.BooleanOptionalAction, default=None,
                   help=f"reach ZooKeeper's secure client port over TLS (default: ${ENV_ZK_TLS}, or off)")
    g.add_argument("--zk-ca-file", default=None, metavar="PATH",
                   help=f"PEM file of the CA that signed the ZooKeeper servers' certificates (default: "
                        f"${ENV_ZK_CA_FILE}, or the system's CAs)")
    g.add_argument("--zk-cert-file", default=None, metavar="PATH",
                   help=f"PEM client certificate for ZooKeeper servers that require one (default: ${ENV_ZK_CERT_FILE})")
    g.add_argument("--zk-key-file", default=None, metavar="PATH",
                   help=f"PEM private key of --zk-cert-file, unencrypted, mode 0600 (default: ${ENV_ZK_KEY_FILE})")
    g.add_argument("--zk-tls-verify-hostname", action=argparse.BooleanOptionalAction, default=None,
                   help="check that a ZooKeeper server's certificate names the host in --zk "
                        f"(default: ${ENV_ZK_TLS_VERIFY_HOSTNAME}, or on)")


def resolve(args: argparse.Namespace | None = None, env: Mapping[str, str] | None = None,
            home: Path | None = None) -> StateConfig:
    env = os.environ if env is None else env
    conf: dict[str, str] = {}
    conf_file = (home or Path(env.get("HERON_PY_HOME", str(Path.home() / ".heron-py")))) / "conf" / "statemgr.json"
    if conf_file.is_file():
        try:
            loaded = json.loads(conf_file.read_text())
        except ValueError as e:
            raise StateManagerError(f"{conf_file}: expected a JSON object, found invalid JSON ({e})") from e
        if not isinstance(loaded, dict):
            raise StateManagerError(f"{conf_file}: expected a JSON object, found {type(loaded).__name__}")
        conf = {str(k): str(v) for k, v in loaded.items()}

    def pick(arg: str, env_key: str, conf_key: str) -> tuple[str | None, str]:
        v = getattr(args, arg, None) if args is not None else None
        if v is not None:
            return str(v), "--" + arg.replace("_", "-")
        if env.get(env_key):
            return env[env_key], f"${env_key}"
        if conf.get(conf_key):
            return conf[conf_key], f"{conf_file} {conf_key}"
        return None, ""

    kind, kind_where = pick("state_manager", ENV_KIND, "state_manager")
    zk, zk_where = pick("zk", ENV_ZK, "zk")
    session, session_where = pick("zk_session_timeout", ENV_ZK_SESSION, "session_timeout_s")
    connect, connect_where = pick("zk_connect_timeout", ENV_ZK_CONNECT, "connect_timeout_s")
    auth_file, _ = pick("zk_auth_file", ENV_ZK_AUTH_FILE, "zk_auth_file")
    if kind is None:
        kind = "zookeeper" if zk else "localfs"
    if kind not in KINDS:
        raise StateManagerError(f"{kind_where}: expected one of {', '.join(KINDS)}, found {kind!r}")
    if kind == "localfs":
        return StateConfig()
    if not zk:
        raise StateManagerError("--state-manager zookeeper: expected --zk HOST:PORT[,HOST:PORT...][/chroot] "
                                f"(or ${ENV_ZK}), found none")
    hosts, root = parse_zk(zk, zk_where)
    timeout = _positive(session, session_where) if session else DEFAULT_SESSION_TIMEOUT_S
    connect_s = _positive(connect, connect_where) if connect else DEFAULT_CONNECT_TIMEOUT_S
    # absolute: the path is handed to children that may run in another folder
    auth = str(Path(auth_file).expanduser().absolute()) if auth_file else ""
    return StateConfig(kind="zookeeper", zk_hosts=hosts, zk_root=root, session_timeout_s=timeout,
                       connect_timeout_s=connect_s, zk_auth_file=auth, **_tls_settings(pick))


def _tls_settings(pick: Callable[[str, str, str], tuple[str | None, str]]) -> dict[str, Any]:
    """The TLS fields of a ZooKeeper StateConfig from ``pick`` (argument, environment, file)."""
    tls, tls_where = pick("zk_tls", ENV_ZK_TLS, "zk_tls")
    verify, verify_where = pick("zk_tls_verify_hostname", ENV_ZK_TLS_VERIFY_HOSTNAME, "zk_tls_verify_hostname")
    files = {key: pick(key, env_key, key) for key, env_key in
             (("zk_ca_file", ENV_ZK_CA_FILE), ("zk_cert_file", ENV_ZK_CERT_FILE), ("zk_key_file", ENV_ZK_KEY_FILE))}
    on = _bool(tls, tls_where) if tls else False
    if not on:
        # a CA or a certificate without TLS would look secure and send the credential in clear
        for value, where in [*files.values(), (verify, verify_where)]:
            if value:
                raise StateManagerError(f"{where}: expected --zk-tls (or ${ENV_ZK_TLS}=true) with it, "
                                        "found TLS off")
    (cert, cert_where), (key, key_where) = files["zk_cert_file"], files["zk_key_file"]
    if bool(cert) != bool(key):
        given, missing = (cert_where, "--zk-key-file") if cert else (key_where, "--zk-cert-file")
        raise StateManagerError(f"{given}: expected {missing} with it (a client certificate and its key go "
                                "together), found none")
    out: dict[str, Any] = {k: str(Path(v).expanduser().absolute()) if v else "" for k, (v, _) in files.items()}
    return {**out, "zk_tls": on,
            "zk_tls_verify_hostname": _bool(verify, verify_where) if verify else True}


def zk_auth_path(cfg: StateConfig, home: Path | None = None, env: Mapping[str, str] | None = None) -> Path:
    """The file of heron-py's ZooKeeper credential for ``cfg``: the one named, else zk.auth
    under the heron home (on a cluster, a shared home gives every host the same file)."""
    env = os.environ if env is None else env
    named = cfg.zk_auth_file or env.get("HERON_PY_ZK_AUTH_FILE")
    if named:
        return Path(named)
    return (home or Path(env.get("HERON_PY_HOME", str(Path.home() / ".heron-py")))) / ZK_AUTH_FILE_NAME


def daemon_parser(prog: str) -> argparse.ArgumentParser:
    """The arguments every daemon of a container takes from its executor."""
    ap = argparse.ArgumentParser(prog=prog)
    ap.add_argument("--topology", required=True)
    ap.add_argument("--secret-file", type=Path, required=True)
    ap.add_argument("--home", type=Path, default=None)
    ap.add_argument("--host", default="127.0.0.1",
                    help="the address this container's daemons bind and advertise (from the scheduler)")
    ap.add_argument("--tls-file", type=Path, default=None,
                    help="the topology's TLS material (heron.network.tls.enabled), written by the executor")
    add_arguments(ap)
    return ap
