"""The Kubernetes scheduler's API calls, made by the official client down to its HTTP
transport. There is no cluster here: the client's urllib3 pool is replaced by a recorder
that answers as the API server does (201 with the object on create, the Status document
with reason NotFound for a missing name), so the requests checked are the exact method, path,
query, content type and body the client would send to a real server. Errors are asserted
verbatim."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import kubernetes_validate
import pytest
import urllib3
from kubernetes.client import ApiClient, Configuration

from heron_py.cli.main import main as cli_main
from heron_py.planner.model import ComponentDef, ComponentKind, PackingPlan, PickledRef, TaskPlacement, TopologyDef
from heron_py.scheduler import kube_render as kr
from heron_py.scheduler.base import SchedulerError
from heron_py.scheduler.kube import KubeApi, KubernetesScheduler, api_client
from heron_py.state.localfs import LocalFsStateManager

SERVER = "https://k8s.test:6443"
NS = "streams"
BASE = kr.kube_name("wc")


def not_found(kind: str, name: str) -> dict[str, Any]:
    # the API server's answer for a missing object, as it sends it
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": f'{kind} "{name}" not found', "reason": "NotFound",
            "details": {"name": name, "kind": kind}, "code": 404}


class Recorder:
    """A urllib3 pool in the client's place: records each request, answers like the server."""

    def __init__(self, namespaces: tuple[str, ...] = (NS,)) -> None:
        self.calls: list[tuple[str, str, dict[str, list[str]], Any, str]] = []
        self.objects: dict[str, dict[str, Any]] = {}
        self.namespaces = namespaces
        self.pods: list[dict[str, Any]] = []
        self.fail_create: str | None = None

    def request(self, method: str, url: str, body: Any = None, headers: Any = None, **_: Any) -> Any:
        u = urlsplit(url)
        doc = json.loads(body) if body else None
        self.calls.append((method, u.path, parse_qs(u.query), doc, (headers or {}).get("Content-Type", "")))
        status, answer = self.answer(method, u.path, doc)
        return urllib3.HTTPResponse(body=json.dumps(answer).encode(), status=status,
                                    headers={"Content-Type": "application/json"}, preload_content=True)

    def answer(self, method: str, path: str, doc: Any) -> tuple[int, dict[str, Any]]:
        parts = path.strip("/").split("/")
        if method == "GET" and parts[:3] == ["api", "v1", "namespaces"] and len(parts) == 4:
            if parts[3] in self.namespaces:
                return 200, {"kind": "Namespace", "apiVersion": "v1", "metadata": {"name": parts[3]}}
            return 404, not_found("namespaces", parts[3])
        if method == "POST":
            if self.fail_create and path.endswith(self.fail_create):
                return 409, {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "AlreadyExists",
                             "message": f'{self.fail_create} "{doc["metadata"]["name"]}" already exists', "code": 409}
            self.objects[f"{path}/{doc['metadata']['name']}"] = doc
            return 201, doc
        if method == "PATCH":
            if path not in self.objects:
                return 404, not_found(parts[-2], parts[-1])
            return 200, self.objects[path]
        if method == "DELETE" and parts[-2] == "pods":
            # deleting one pod answers with the pod, now terminating (a collection: a Status)
            return 200, {"kind": "Pod", "apiVersion": "v1", "metadata": {"name": parts[-1]}}
        if method == "GET" and parts[-1] == "pods":
            return 200, {"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": self.pods}
        return 200, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success"}


def kube_api(rec: Recorder) -> KubeApi:
    conf = Configuration(host=SERVER)
    client = ApiClient(conf)
    client.rest_client.pool_manager = rec
    return KubeApi(client, SERVER)


def stored_topology(home: Path) -> LocalFsStateManager:
    state = LocalFsStateManager(home)
    comps = (ComponentDef("spout", ComponentKind.SPOUT, PickledRef(b""), "m:S", 1, (), ()),
             ComponentDef("count", ComponentKind.BOLT, PickledRef(b""), "m:C", 2, (), ()))
    state.set_secret("wc", b"k" * 32)  # as submit stores them: the document is signed under it
    state.set_topology(TopologyDef("wc", comps, {}))
    state.set_packing_plan("wc", PackingPlan(3, (TaskPlacement(1, "spout", 0, 0), TaskPlacement(2, "count", 0, 1),
                                                 TaskPlacement(3, "count", 1, 2))))
    (home / "zk.auth").write_text("heron-py:pw\n")
    return state


@pytest.fixture
def setup(tmp_path: Path) -> tuple[Recorder, KubernetesScheduler]:
    rec = Recorder()
    api = kube_api(rec)
    sched = KubernetesScheduler(stored_topology(tmp_path), tmp_path,
                                options=kr.KubeOptions(namespace=NS, image="heron-py:0.1"), api_factory=lambda _: api)
    return rec, sched


def test_launch_creates_the_objects_in_order(setup: tuple[Recorder, KubernetesScheduler]) -> None:
    rec, sched = setup
    info = sched.launch("wc", 3)
    assert [(m, p) for m, p, *_ in rec.calls] == [
        ("GET", f"/api/v1/namespaces/{NS}"),
        ("POST", f"/api/v1/namespaces/{NS}/services"),
        ("POST", f"/api/v1/namespaces/{NS}/secrets"),
        ("POST", f"/apis/apps/v1/namespaces/{NS}/statefulsets"),
        ("POST", f"/apis/apps/v1/namespaces/{NS}/statefulsets")]
    for _, _, _, body, _ in rec.calls[1:]:
        # what went over the wire is a valid object of Kubernetes 1.37
        kubernetes_validate.validate(body, "1.37.0", strict=True)
        assert body["metadata"]["labels"][kr.LABEL_TOPOLOGY_ID] == f"{BASE}-{info['topology_id'][-12:]}"
    sets = [b for _, p, _, b, _ in rec.calls if p.endswith("statefulsets")]
    assert [s["spec"]["replicas"] for s in sets] == [1, 2]
    assert info["scheduler"] == "kubernetes" and info["options"]["namespace"] == NS
    assert sched.state.get_scheduler_location("wc") == info


def test_a_failed_create_deletes_what_was_made(setup: tuple[Recorder, KubernetesScheduler]) -> None:
    rec, sched = setup
    rec.fail_create = "secrets"
    with pytest.raises(SchedulerError) as e:
        sched.launch("wc", 3)
    assert str(e.value) == (f"kubernetes scheduler: creating Secret {NS}/{BASE} on {SERVER}: 409 AlreadyExists: "
                            f'secrets "{BASE}" already exists')
    deletes = [(p, q["labelSelector"]) for m, p, q, *_ in rec.calls if m == "DELETE"]
    sel = [f"{kr.LABEL_TOPOLOGY}={BASE}"]
    assert deletes == [(f"/apis/apps/v1/namespaces/{NS}/statefulsets", sel), (f"/api/v1/namespaces/{NS}/services", sel),
                       (f"/api/v1/namespaces/{NS}/secrets", sel), (f"/api/v1/namespaces/{NS}/pods", sel)]


def test_missing_namespace_is_one_verbatim_error(tmp_path: Path) -> None:
    rec = Recorder(namespaces=())
    api = kube_api(rec)
    sched = KubernetesScheduler(stored_topology(tmp_path), tmp_path, options=kr.KubeOptions(namespace="nope"),
                                api_factory=lambda _: api)
    with pytest.raises(SchedulerError) as e:
        sched.launch("wc", 3)
    assert str(e.value) == (f"kubernetes scheduler: namespace 'nope' does not exist on {SERVER}; expected an "
                            f"existing namespace (--namespace NS), found none named 'nope'")
    assert [m for m, *_ in rec.calls] == ["GET"]  # nothing created


def test_restart_patches_the_sets_and_deletes_one_pod(setup: tuple[Recorder, KubernetesScheduler]) -> None:
    rec, sched = setup
    sched.launch("wc", 3)
    rec.calls.clear()
    sched.restart("wc", [2], 3)
    patches = [(p, ct, b["spec"]["replicas"]) for m, p, _, b, ct in rec.calls if m == "PATCH"]
    assert patches == [(f"/apis/apps/v1/namespaces/{NS}/statefulsets/{BASE}-tmanager",
                        "application/strategic-merge-patch+json", 1),
                       (f"/apis/apps/v1/namespaces/{NS}/statefulsets/{BASE}-executors",
                        "application/strategic-merge-patch+json", 2)]
    assert [p for m, p, *_ in rec.calls if m == "DELETE"] == [f"/api/v1/namespaces/{NS}/pods/{BASE}-executors-1"]


def test_update_creates_a_set_that_is_missing(setup: tuple[Recorder, KubernetesScheduler]) -> None:
    rec, sched = setup
    sched.launch("wc", 3)
    del rec.objects[f"/apis/apps/v1/namespaces/{NS}/statefulsets/{BASE}-executors"]
    rec.calls.clear()
    sched.restart("wc", [0, 1, 2], 3)
    assert [(m, p.rsplit("/", 1)[-1]) for m, p, *_ in rec.calls] == [
        ("PATCH", f"{BASE}-tmanager"), ("PATCH", f"{BASE}-executors"), ("POST", "statefulsets"),
        ("DELETE", f"{BASE}-tmanager-0"), ("DELETE", f"{BASE}-executors-0"), ("DELETE", f"{BASE}-executors-1")]


def test_kill_deletes_by_label(setup: tuple[Recorder, KubernetesScheduler]) -> None:
    rec, sched = setup
    sched.launch("wc", 3)
    rec.calls.clear()
    assert sched.kill("wc") == []
    assert {q["labelSelector"][0] for m, _, q, *_ in rec.calls if m == "DELETE"} == {f"{kr.LABEL_TOPOLOGY}={BASE}"}
    assert len(rec.calls) == 4


def test_containers_from_pods(setup: tuple[Recorder, KubernetesScheduler]) -> None:
    rec, sched = setup
    sched.launch("wc", 3)

    def pod(name: str, phase: str, ready: str, node: str) -> dict[str, Any]:
        return {"metadata": {"name": name}, "spec": {"nodeName": node, "containers": [{"name": "executor"}]},
                "status": {"phase": phase, "conditions": [{"type": "Ready", "status": ready}]}}

    rec.pods = [pod(f"{BASE}-tmanager-0", "Running", "True", "n1"), pod(f"{BASE}-executors-1", "Pending", "False", "")]
    got = [(c.container, c.state, c.where, c.handle) for c in sched.containers("wc")]
    assert got == [(0, "running", "n1", f"{BASE}-tmanager-0"), (1, "gone", "", f"{BASE}-executors-0"),
                   (2, "pending", "", f"{BASE}-executors-1")]
    assert rec.calls[-1][2]["labelSelector"] == [f"{kr.LABEL_TOPOLOGY}={BASE}"]


def test_no_kubeconfig_is_one_verbatim_error(tmp_path: Path) -> None:
    with pytest.raises(SchedulerError) as e:
        api_client(None, {"KUBECONFIG": str(tmp_path / "none")})
    assert str(e.value) == (f"kubernetes scheduler: no kubeconfig at $KUBECONFIG={tmp_path / 'none'}, and not inside "
                            f"a pod; expected a kubeconfig with a context for the cluster (choose one with --context "
                            f"CTX), found none")


def test_unreachable_api_server_is_one_verbatim_error(tmp_path: Path) -> None:
    # a real connection attempt by the real client to a port where nothing listens
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    cfg = tmp_path / "kubeconfig"
    cfg.write_text(f"""apiVersion: v1
kind: Config
clusters: [{{name: c, cluster: {{server: "https://127.0.0.1:{port}", insecure-skip-tls-verify: true}}}}]
users: [{{name: u, user: {{token: abc}}}}]
contexts: [{{name: ctx, context: {{cluster: c, user: u}}}}]
current-context: ctx
""")
    client, where = api_client(None, {"KUBECONFIG": str(cfg)})
    with pytest.raises(SchedulerError) as e:
        KubeApi(client, where).check_namespace("streams")
    assert str(e.value) == (f"kubernetes scheduler: the API server https://127.0.0.1:{port} is unreachable (reading "
                            f"namespace streams): [Errno 111] Connection refused; expected a running cluster this "
                            f"machine can reach")


def test_localfs_state_is_refused_verbatim(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("HERON_PY_HOME", str(tmp_path))
    for var in ("HERON_PY_STATE_MANAGER", "HERON_PY_ZK"):
        monkeypatch.delenv(var, raising=False)
    topo = tmp_path / "t.py"
    topo.write_text("raise SystemExit('must not run')\n")
    assert cli_main(["submit", "kubernetes", str(topo)]) == 1
    assert capsys.readouterr().err == (
        "heron-py: error: submit kubernetes: the localfs state manager keeps the topology's state on this machine "
        "only, where the kubernetes nodes cannot read it; expected --state-manager zookeeper --zk HOST:PORT\n")


def test_invalid_image_stops_submit_before_the_file_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("HERON_PY_HOME", str(tmp_path))
    topo = tmp_path / "t.py"
    topo.write_text("raise SystemExit('must not run')\n")
    assert cli_main(["submit", "kubernetes", "--zk", "127.0.0.1:1", "--image", "Heron:1", str(topo)]) == 1
    assert capsys.readouterr().err == (
        "heron-py: error: submit kubernetes: --image 'Heron:1' is not a valid image reference; expected "
        "[REGISTRY[:PORT]/]NAME[:TAG][@DIGEST] with a lower-case NAME (e.g. registry.example.com/heron-py:0.1.0), "
        "found 'Heron:1'\n")

