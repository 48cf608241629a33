"""The ZooKeeper TLS settings: where they come from, how they travel to children, and their
errors (one line each); the client context's file errors, before any connection."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from heron_py.state import StateManagerError
from heron_py.state import config as statecfg
from heron_py.state.config import StateConfig
from heron_py.state.zookeeper import tls_context
from tests.zkserver import make_pki


def _parse(*words: str) -> argparse.Namespace:
    ap = argparse.ArgumentParser()
    statecfg.add_arguments(ap)
    return ap.parse_args(list(words))


def test_from_command_line_environment_and_file(tmp_path: Path) -> None:
    cmd = statecfg.resolve(_parse("--zk", "h:1/r", "--zk-tls", "--zk-ca-file", "ca.pem",
                                  "--no-zk-tls-verify-hostname"), {}, home=tmp_path)
    assert (cmd.zk_tls, cmd.zk_ca_file, cmd.zk_tls_verify_hostname) == (True, str(Path("ca.pem").absolute()), False)
    env = statecfg.resolve(None, {"HERON_PY_ZK": "h:1", "HERON_PY_ZK_TLS": "yes", "HERON_PY_ZK_CERT_FILE": "/c",
                                  "HERON_PY_ZK_KEY_FILE": "/k"}, home=tmp_path)
    assert (env.zk_tls, env.zk_ca_file, env.zk_cert_file, env.zk_key_file) == (True, "", "/c", "/k")
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "statemgr.json").write_text(json.dumps({"zk": "h:1", "zk_tls": True, "zk_ca_file": "/ca"}))
    conf = statecfg.resolve(None, {}, home=tmp_path)
    assert (conf.zk_tls, conf.zk_ca_file, conf.zk_tls_verify_hostname) == (True, "/ca", True)


def test_command_line_off_beats_the_file(tmp_path: Path) -> None:
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "statemgr.json").write_text(json.dumps({"zk": "h:1", "zk_tls": "true"}))
    assert statecfg.resolve(_parse("--no-zk-tls"), {}, home=tmp_path).zk_tls is False


def test_settings_travel_to_children(tmp_path: Path) -> None:
    off = StateConfig(kind="zookeeper", zk_hosts="h:1", zk_root="/r")
    assert off.to_args() == ["--state-manager", "zookeeper", "--zk", "h:1/r", "--zk-session-timeout", "5"]
    on = StateConfig(kind="zookeeper", zk_hosts="h:1", zk_root="/r", zk_tls=True, zk_ca_file="/ca",
                     zk_cert_file="/c", zk_key_file="/k", zk_tls_verify_hostname=False)
    assert on.to_args()[-8:] == ["--zk-tls", "--zk-ca-file", "/ca", "--zk-cert-file", "/c", "--zk-key-file", "/k",
                                 "--no-zk-tls-verify-hostname"]
    # a child resolves the same config from them, whatever its own environment says
    child = statecfg.resolve(_parse(*on.to_args()), {"HERON_PY_ZK_TLS": "false"}, home=tmp_path)
    assert child == on


@pytest.mark.parametrize(("args", "env", "error"), [
    (["--zk-ca-file", "/ca"], {}, "--zk-ca-file: expected --zk-tls (or $HERON_PY_ZK_TLS=true) with it, found TLS off"),
    ([], {"HERON_PY_ZK_TLS": "maybe"}, "$HERON_PY_ZK_TLS: expected true or false, found 'maybe'"),
    (["--zk-tls", "--zk-cert-file", "/c"], {},
     "--zk-cert-file: expected --zk-key-file with it (a client certificate and its key go together), found none"),
    (["--zk-tls"], {"HERON_PY_ZK_KEY_FILE": "/k"},
     "$HERON_PY_ZK_KEY_FILE: expected --zk-cert-file with it (a client certificate and its key go together), "
     "found none"),
])
def test_errors(tmp_path: Path, args: list[str], env: dict[str, str], error: str) -> None:
    with pytest.raises(StateManagerError) as e:
        statecfg.resolve(_parse("--zk", "h:1", *args), env, home=tmp_path)
    assert str(e.value) == error


def test_context_file_errors(tmp_path: Path) -> None:
    pki = make_pki(tmp_path / "pki")
    base = StateConfig(kind="zookeeper", zk_hosts="h:1", zk_root="/r", zk_tls=True)
    where = "state manager zookeeper at h:1/r over TLS"
    ctx = tls_context(StateConfig(**{**base.__dict__, "zk_ca_file": str(pki.ca), "zk_cert_file": str(pki.client_cert),
                                     "zk_key_file": str(pki.client_key)}))
    assert ctx.check_hostname and ctx.get_ca_certs()
    missing = tmp_path / "nope.pem"
    with pytest.raises(StateManagerError) as e:
        tls_context(StateConfig(**{**base.__dict__, "zk_ca_file": str(missing)}))
    assert str(e.value) == f"--zk-ca-file {missing}: cannot read it: No such file or directory ({where})"
    junk = tmp_path / "junk.pem"
    junk.write_text("not a certificate\n")
    with pytest.raises(StateManagerError) as e:
        tls_context(StateConfig(**{**base.__dict__, "zk_ca_file": str(junk)}))
    assert str(e.value) == (f"--zk-ca-file {junk}: expected a PEM file of CA certificates, found a file OpenSSL "
                            f"refuses (NO_CERTIFICATE_OR_CRL_FOUND; {where})")
    pki.client_key.chmod(0o644)
    with pytest.raises(StateManagerError) as e:
        tls_context(StateConfig(**{**base.__dict__, "zk_cert_file": str(pki.client_cert),
                                   "zk_key_file": str(pki.client_key)}))
    assert str(e.value) == (f"--zk-key-file {pki.client_key}: expected mode 0600 (readable by its owner only), "
                            f"found 0644; run chmod 600 {pki.client_key}")
