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

from heron_py.state.base import StateManager, StateManagerError

ENV_KIND = "HERON_PY_STATE_MANAGER"
ENV_ZK = "HERON_PY_ZK"
ENV_ZK_SESSION = "HERON_PY_ZK_SESSION_TIMEOUT"
ENV_ZK_AUTH_FILE = "HERON_PY_ZK_AUTH_FILE"
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

    @property
    def zk(self) -> str:
        """The --zk form: hosts plus the root as chroot."""
        return f"{self.zk_hosts}{self.zk_root}"

    def to_args(self) -> list[str]:
        if self.kind == "localfs":
            return ["--state-manager", "localfs"]
        auth = ["--zk-auth-file", self.zk_auth_file] if self.zk_auth_file else []
        return ["--state-manager", "zookeeper", "--zk", self.zk,
                "--zk-session-timeout", f"{self.session_timeout_s:g}", *auth]

    def describe(self) -> str:
        return "localfs" if self.kind == "localfs" else f"zookeeper at {self.zk}"


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


def add_arguments(ap: argparse.ArgumentParser) -> None:
    g = ap.add_argument_group("state manager")
    g.add_argument("--state-manager", choices=KINDS, default=None,
                   help=f"where topology state lives (default: ${ENV_KIND}, conf/statemgr.json, or localfs)")
    g.add_argument("--zk", default=None, metavar="HOST:PORT[,HOST:PORT...][/chroot]",
                   help=f"ZooKeeper ensemble for --state-manager zookeeper (default: ${ENV_ZK})")
    g.add_argument("--zk-session-timeout", default=None, metavar="SECONDS",
                   help=f"ZooKeeper session timeout (default {DEFAULT_SESSION_TIMEOUT_S:g} s)")
    g.add_argument("--zk-auth-file", default=None, metavar="PATH",
                   help=f"ZooKeeper digest credential USER:PASSWORD, mode 0600, created if missing (default: "
                        f"${ENV_ZK_AUTH_FILE}, or $HERON_PY_HOME/{ZK_AUTH_FILE_NAME})")


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
    # absolute: the path is handed to children that may run in another folder
    auth = str(Path(auth_file).expanduser().absolute()) if auth_file else ""
    return StateConfig(kind="zookeeper", zk_hosts=hosts, zk_root=root, session_timeout_s=timeout,
                       zk_auth_file=auth)


def zk_auth_path(cfg: StateConfig, home: Path | None = None, env: Mapping[str, str] | None = None) -> Path:
    """The file of heron-py's ZooKeeper credential for ``cfg``: the one named, else zk.auth
    under the heron home (on a cluster, a shared home gives every host the same file)."""
    env = os.environ if env is None else env
    named = cfg.zk_auth_file or env.get("HERON_PY_ZK_AUTH_FILE")
    if named:
        return Path(named)
    return (home or Path(env.get("HERON_PY_HOME", str(Path.home() / ".heron-py")))) / ZK_AUTH_FILE_NAME


def open_state(cfg: StateConfig, home: Path | None = None) -> StateManager:
    if cfg.kind == "zookeeper":
        from heron_py.state.zookeeper import ZkStateManager

        return ZkStateManager(cfg, home)
    from heron_py.state.localfs import LocalFsStateManager

    return LocalFsStateManager(home)


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


def run_with_state(args: argparse.Namespace, log: Any, make: Callable[[StateManager], Any]) -> int:
    """A daemon's main: opens the state manager the arguments choose (an unreachable store is
    one logged error and exit code 2), runs the daemon ``make(state)`` builds, closes the store."""
    from heron_py.common.daemon import run_daemon

    try:
        state = open_state(resolve(args, home=args.home), args.home)
    except StateManagerError as e:
        log.error("%s", e)
        return 2
    try:
        code: int = run_daemon(make(state), log)
        return code
    finally:
        state.close()
