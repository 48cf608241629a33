"""ZooKeeper over TLS on Kubernetes (heron_py/scheduler/kube_render.py, kube.py): the Secret holds
the CA and the client certificate and key the submitter's config names, the pods' daemons get
--zk-tls with the files where the pod has them (the key copied to mode 0600, as tls_context
wants), and the manifests stay valid; so the credential and the nodes holding the secret, the
TLS key and the package never cross the pod network in clear."""

from __future__ import annotations

import argparse
import base64
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from heron_py.cli.main import main as cli_main
from heron_py.planner.model import PackingPlan, TaskPlacement
from heron_py.scheduler import kube_render as kr
from heron_py.scheduler.base import SchedulerError
from heron_py.scheduler.kube import KubernetesScheduler
from heron_py.state import StateConfig
from heron_py.state import config as statecfg
from tests.unit.scheduler.test_kube_scheduler import NS, Recorder, kube_api, stored_topology

K8S_VERSION = "1.37.0"
ROOT = Path(__file__).resolve().parents[3]
PACKING = PackingPlan(2, (TaskPlacement(1, "spout", 0, 0), TaskPlacement(2, "count", 1, 0)))
MUTUAL = StateConfig(kind="zookeeper", zk_hosts="zk-0.zk:2281", zk_tls=True, zk_ca_file="/home/u/zk-ca.pem",
                     zk_cert_file="/home/u/client.pem", zk_key_file="/home/u/client.key", zk_tls_verify_hostname=False)
CA_ONLY = StateConfig(kind="zookeeper", zk_hosts="zk-0.zk:2281", zk_tls=True, zk_ca_file="/home/u/zk-ca.pem")
FILES = {"zk-ca.pem": b"CA PEM", "zk-cert.pem": b"CERT PEM", "zk-key.pem": b"KEY PEM"}
POD_TLS = ["--zk-tls", "--zk-ca-file", "/etc/heron-py/secret/zk-ca.pem", "--zk-cert-file",
           "/etc/heron-py/secret/zk-cert.pem", "--zk-key-file", f"{kr.HOME}/zk-key.pem", "--no-zk-tls-verify-hostname"]


def _docs(cfg: StateConfig, material: kr.SecretMaterial | None) -> dict[str, dict[str, Any]]:
    kt = kr.KubeTopology("wc", "wc-0123456789ab", PACKING, (kr.Resources(1, 2**30),) * 2, cfg)
    return {d["kind"] + ("/" + d["metadata"]["name"].rsplit("-", 1)[-1] if d["kind"] == "StatefulSet" else ""): d
            for d in kr.render_all(kt, kr.KubeOptions(namespace=NS), material)}


def _container(doc: dict[str, Any]) -> dict[str, Any]:
    c: dict[str, Any] = doc["spec"]["template"]["spec"]["containers"][0]
    return c


def _pod_state(argv: list[str]) -> StateConfig:
    """The state manager a pod's daemon resolves from the arguments it is given."""
    ap = argparse.ArgumentParser()
    statecfg.add_arguments(ap)
    args, _ = ap.parse_known_args(argv)
    return statecfg.resolve(args, env={}, home=Path("/nonexistent"))


def test_the_pods_reach_zookeeper_over_tls_with_the_secrets_files() -> None:
    material = kr.SecretMaterial(b"heron-py:pw\n", b"s" * 32, "tok", None, FILES)
    docs = _docs(MUTUAL, material)
    data = {k: base64.b64decode(v) for k, v in docs["Secret"]["data"].items()}
    assert {k: data[k] for k in FILES} == FILES
    for role in ("tmanager", "executors"):
        c = _container(docs[f"StatefulSet/{role}"])
        script = c["command"][2]
        assert "install -m 600 /etc/heron-py/secret/zk-key.pem " + f"{kr.HOME}/zk-key.pem" in script.splitlines()
        exec_line = script.splitlines()[-1]
        assert " ".join(POD_TLS) in exec_line
        probe = c["readinessProbe"]["exec"]["command"]
        assert probe[-len(POD_TLS):] == POD_TLS
        pod = _pod_state(probe)
        assert (pod.zk_tls, pod.zk_ca_file, pod.zk_cert_file, pod.zk_key_file, pod.zk_tls_verify_hostname) == \
            (True, "/etc/heron-py/secret/zk-ca.pem", "/etc/heron-py/secret/zk-cert.pem", f"{kr.HOME}/zk-key.pem",
             False)
    for doc in docs.values():
        assert kubernetes_validate.validate(doc, K8S_VERSION, strict=True) == "1.37"


def test_a_ca_alone_needs_no_client_certificate_or_key() -> None:
    material = kr.SecretMaterial(b"heron-py:pw\n", b"s" * 32, "tok", None, {"zk-ca.pem": b"CA PEM"})
    docs = _docs(CA_ONLY, material)
    assert set(docs["Secret"]["data"]) == {"zk.auth", "topology.secret", "http.token", "zk-ca.pem"}
    script = _container(docs["StatefulSet/tmanager"])["command"][2]
    assert "zk-key.pem" not in script and "zk-cert.pem" not in script
    assert script.splitlines()[-1].count("--zk-tls --zk-ca-file /etc/heron-py/secret/zk-ca.pem --container") == 1


def test_a_secret_without_a_file_the_config_names_is_refused() -> None:
    with pytest.raises(SchedulerError) as e:
        _docs(MUTUAL, kr.SecretMaterial(b"heron-py:pw\n", b"s" * 32, "tok", None, {"zk-ca.pem": b"CA PEM"}))
    assert str(e.value) == ("kubernetes scheduler: ZooKeeper over TLS: expected the Secret's zk-cert.pem, zk-key.pem "
                            "from the files the state manager's config names, found none")


def test_without_tls_the_pods_get_no_tls_arguments_or_files() -> None:
    docs = _docs(StateConfig(kind="zookeeper", zk_hosts="zk-0.zk:2181"), None)
    assert not any("zk-tls" in a or "zk-ca" in a for a in _container(docs["StatefulSet/tmanager"])["command"])
    assert set(docs["Secret"]["stringData"]) == {"zk.auth", "topology.secret", "http.token"}


def test_launch_puts_the_submitters_files_in_the_secret(tmp_path: Path) -> None:
    files = {"zk_ca_file": tmp_path / "ca.pem", "zk_cert_file": tmp_path / "c.pem", "zk_key_file": tmp_path / "c.key"}
    for path, content in zip(files.values(), FILES.values(), strict=True):
        path.write_bytes(content)
    cfg = StateConfig(kind="zookeeper", zk_hosts="zk-0.zk:2281", zk_tls=True,
                      **{k: str(v) for k, v in files.items()})
    rec = Recorder()
    api = kube_api(rec)
    sched = KubernetesScheduler(stored_topology(tmp_path), tmp_path, state_config=cfg,
                                options=kr.KubeOptions(namespace=NS, image="heron-py:0.1"), api_factory=lambda _: api)
    sched.launch("wc", 3)
    secret = next(doc for method, path, _, doc, _ in rec.calls if method == "POST" and path.endswith("/secrets"))
    assert {k: base64.b64decode(secret["data"][k]) for k in FILES} == FILES
    files["zk_ca_file"].unlink()
    with pytest.raises(SchedulerError) as e:
        sched.launch("wc", 3)
    assert str(e.value) == (f"kubernetes scheduler: --zk-ca-file {files['zk_ca_file']}: expected a file to put in the "
                            f"pods' Secret, found it unreadable (No such file or directory)")


def test_submit_dry_run_renders_zookeeper_over_tls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("HERON_PY_HOME", str(tmp_path))
    for var in ("HERON_PY_STATE_MANAGER", "HERON_PY_ZK", "HERON_PY_ZK_TLS", "HERON_PY_ZK_CA_FILE"):
        monkeypatch.delenv(var, raising=False)
    assert cli_main(["submit", "kubernetes", "--zk", "zk-0.zk:2281/heron-py", "--zk-tls", "--zk-ca-file",
                     "/etc/zk/ca.pem", str(ROOT / "examples" / "quickstart" / "word_count.py"), "--dry-run"]) == 0
    docs = list(yaml.safe_load_all(capsys.readouterr().out))
    secret = next(d for d in docs if d["kind"] == "Secret")
    assert secret["stringData"]["zk-ca.pem"] == "(read at submit from the file the state manager's config names)"
    for doc in docs:
        assert kubernetes_validate.validate(doc, K8S_VERSION, strict=True) == "1.37"
        if doc["kind"] == "StatefulSet":
            probe = _container(doc)["readinessProbe"]["exec"]["command"]
            assert probe[-3:] == ["--zk-tls", "--zk-ca-file", "/etc/heron-py/secret/zk-ca.pem"]
