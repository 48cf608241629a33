"""The Kubernetes manifests, rendered purely from a packing plan and config: their content,
the OpenAPI schema of Kubernetes 1.37 (kubernetes-validate, offline, strict), and a round
trip through the official client's model classes."""

from __future__ import annotations

import base64
from typing import Any

import kubernetes_validate
import pytest
import yaml

from heron_py.api.api_constants import TOPOLOGY_COMPONENT_RAMMAP, TOPOLOGY_CONTAINER_CPU_REQUESTED
from heron_py.planner.model import PackingPlan, TaskPlacement
from heron_py.scheduler import kube_render as kr
from heron_py.scheduler.base import SchedulerError
from heron_py.scheduler.kube import from_model, to_model
from heron_py.state import StateConfig

K8S_VERSION = "1.37.0"  # pinned: kubernetes-validate==1.37.* in pyproject.toml
ZK = StateConfig(kind="zookeeper", zk_hosts="zk-0.zk:2181,zk-1.zk:2181", zk_root="/heron-py")
PACKING = PackingPlan(3, (TaskPlacement(1, "spout", 0, 0), TaskPlacement(2, "split", 0, 1),
                          TaskPlacement(3, "count", 0, 2), TaskPlacement(4, "count", 1, 0)))
MATERIAL = kr.SecretMaterial(b"heron-py:pw\n", b"s" * 32, "tok", b'{"ca": "x"}')


def topo(n_resources: tuple[kr.Resources, ...] | None = None, name: str = "word_count",
         packing: PackingPlan = PACKING) -> kr.KubeTopology:
    res = n_resources or tuple(kr.Resources(1.5 + k, (700 + k) * 2**20) for k in range(packing.num_containers))
    return kr.KubeTopology(name, f"{name}-0123456789ab", packing, res, ZK)


def docs(material: kr.SecretMaterial | None = MATERIAL, **kw: Any) -> list[dict[str, Any]]:
    return kr.render_all(topo(**kw), kr.KubeOptions(namespace="streams", image="reg.example:5000/heron-py:0.1"),
                         material)


def by_name(rendered: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {f"{d['kind']}/{d['metadata']['name']}": d for d in rendered}


def test_objects_and_labels() -> None:
    d = by_name(docs())
    base = kr.kube_name("word_count")
    assert sorted(d) == sorted([f"Service/{base}", f"Secret/{base}", f"StatefulSet/{base}-tmanager",
                                f"StatefulSet/{base}-executors"])
    for doc in d.values():
        assert doc["metadata"]["namespace"] == "streams"
        assert doc["metadata"]["labels"][kr.LABEL_TOPOLOGY] == base
        assert doc["metadata"]["labels"][kr.LABEL_TOPOLOGY_ID] == f"{base}-0123456789ab"
        assert doc["metadata"]["annotations"][kr.ANNOTATION_NAME] == "word_count"
    assert d[f"Service/{base}"]["spec"]["clusterIP"] == "None"


def test_one_container_has_no_executor_set() -> None:
    one = PackingPlan(1, (TaskPlacement(1, "spout", 0, 0),))
    kinds = [x["kind"] for x in docs(packing=one)]
    assert kinds == ["Service", "Secret", "StatefulSet"]


def test_statefulsets_replicas_offsets_and_requests() -> None:
    d = by_name(docs())
    base = kr.kube_name("word_count")
    tm, ex = d[f"StatefulSet/{base}-tmanager"], d[f"StatefulSet/{base}-executors"]
    assert tm["spec"]["replicas"] == 1 and ex["spec"]["replicas"] == 2
    assert tm["spec"]["updateStrategy"] == {"type": "OnDelete"}

    def env(s: dict[str, Any]) -> dict[str, Any]:
        c = s["spec"]["template"]["spec"]["containers"][0]
        return {e["name"]: e.get("value", e.get("valueFrom")) for e in c["env"]}

    assert env(tm)[kr.OFFSET_ENV] == "0" and env(ex)[kr.OFFSET_ENV] == "1"
    assert env(tm)["HERON_PY_TOPOLOGY_ID"] == "word_count-0123456789ab"
    assert env(tm)["POD_IP"] == {"fieldRef": {"fieldPath": "status.podIP"}}
    # container 0 gets its own request; the executors' template the largest of 1..N-1
    tm_res = tm["spec"]["template"]["spec"]["containers"][0]["resources"]
    ex_res = ex["spec"]["template"]["spec"]["containers"][0]["resources"]
    assert tm_res == {"requests": {"cpu": "1500m", "memory": "700Mi"}, "limits": {"memory": "700Mi"}}
    assert ex_res == {"requests": {"cpu": "3500m", "memory": "702Mi"}, "limits": {"memory": "702Mi"}}


def test_prometheus_annotations_and_readiness_probe() -> None:
    for s in [x for x in docs() if x["kind"] == "StatefulSet"]:
        tmpl = s["spec"]["template"]
        assert tmpl["metadata"]["annotations"]["prometheus.io/scrape"] == "true"
        assert tmpl["metadata"]["annotations"]["prometheus.io/port"] == str(kr.METRICS_PORT)
        c = tmpl["spec"]["containers"][0]
        assert c["ports"] == [{"name": "metrics", "containerPort": kr.METRICS_PORT, "protocol": "TCP"}]
        probe = c["readinessProbe"]["exec"]["command"]
        assert probe[:3] == ["python", "-m", "heron_py.scheduler.kube_probe"]
        assert "--zk" in probe and probe[probe.index("--zk") + 1] == "zk-0.zk:2181,zk-1.zk:2181/heron-py"


def test_pod_command_derives_container_from_ordinal() -> None:
    script = kr.pod_command(topo())[2]
    assert 'ordinal="${HOSTNAME##*-}"' in script
    assert "container=$((ordinal + $HERON_PY_CONTAINER_OFFSET))" in script
    assert "--container \"$container\" --host \"$POD_IP\"" in script
    assert "--zk-auth-file /var/lib/heron-py/home/zk.auth" in script
    # the home is made by the pod's user inside the emptyDir, which is root's
    assert 'mkdir -p "/var/lib/heron-py/home/topologies/' in script
    assert kr.container_index("wc-executors-3", 1) == 4 and kr.container_index("wc-tmanager-0", 0) == 0
    with pytest.raises(ValueError):
        kr.container_index("laptop", 0)


def test_pod_names_map_both_ways() -> None:
    for k in range(5):
        assert kr.container_of_pod("word_count", kr.pod_name("word_count", k)) == k
    assert kr.container_of_pod("word_count", "other-0") is None


def test_secret_holds_credential_secret_token_and_tls() -> None:
    s = next(x for x in docs() if x["kind"] == "Secret")
    data = {k: base64.b64decode(v) for k, v in s["data"].items()}
    assert data == {"zk.auth": b"heron-py:pw\n", "topology.secret": b"s" * 32, "http.token": b"tok",
                    "tls.json": b'{"ca": "x"}'}
    dry = next(x for x in docs(material=None) if x["kind"] == "Secret")
    assert "data" not in dry and set(dry["stringData"]) == {"zk.auth", "topology.secret", "http.token"}


def test_kube_names_are_dns_labels_and_distinct() -> None:
    assert kr.kube_name("wc") == "wc"
    assert kr.kube_name("word_count") != kr.kube_name("word-count")
    long = kr.kube_name("A" * 100)
    assert len(kr.set_name("A" * 100, kr.ROLE_EXECUTOR) + "-9999") < 63 and long[0].isalpha()
    assert kr.kube_name("1st").startswith("t-1st")


def test_resources_from_heron_keys() -> None:
    from heron_py.planner.model import ComponentDef, ComponentKind, TopologyDef

    comps = (ComponentDef("spout", ComponentKind.SPOUT, b"", "m:S", 1, (), ()),
             ComponentDef("count", ComponentKind.BOLT, b"", "m:C", 2, (), ()))
    t = TopologyDef("t", comps, {TOPOLOGY_COMPONENT_RAMMAP: "count:104857600",
                                 kr.TOPOLOGY_COMPONENT_CPUMAP: "spout:0.25"})
    packing = PackingPlan(2, (TaskPlacement(1, "spout", 0, 0), TaskPlacement(2, "count", 0, 1),
                              TaskPlacement(3, "count", 1, 0)))
    res = kr.container_resources(t, packing)
    assert res[0] == kr.Resources(0.5 + 0.25 + 1.0, 512 * 2**20 + 256 * 2**20 + 100 * 2**20)
    assert res[1] == kr.Resources(0.5 + 1.0, 512 * 2**20 + 100 * 2**20)
    fixed = TopologyDef("t", comps, {TOPOLOGY_CONTAINER_CPU_REQUESTED: 2.0, "topology.container.ram": 2**30})
    assert kr.container_resources(fixed, packing) == (kr.Resources(2.0, 2**30),) * 2
    bad = TopologyDef("t", comps, {TOPOLOGY_COMPONENT_RAMMAP: "count:lots"})
    with pytest.raises(SchedulerError) as e:
        kr.container_resources(bad, packing)
    assert str(e.value) == ("config topology.component.rammap: expected COMPONENT:BYTES[,COMPONENT:BYTES...] with "
                            "BYTES a number > 0, found 'count:lots'")


@pytest.mark.parametrize("image", ["heron-py", "heron-py:0.1.0", "reg.example.com:5000/team/heron-py:v1",
                                   "localhost/heron-py@sha256:" + "a" * 64, "ghcr.io/o/heron_py-spark:1.2-rc.1"])
def test_valid_images(image: str) -> None:
    kr.check_image(image)


@pytest.mark.parametrize("image", ["Heron-Py:1", "heron-py:", "heron py", "-heron", "reg/:tag",
                                   "heron-py:" + "x" * 129])
def test_invalid_image_is_one_verbatim_error(image: str) -> None:
    with pytest.raises(SchedulerError) as e:
        kr.check_image(image)
    assert str(e.value) == (f"submit kubernetes: --image {image!r} is not a valid image reference; expected "
                            f"[REGISTRY[:PORT]/]NAME[:TAG][@DIGEST] with a lower-case NAME "
                            f"(e.g. registry.example.com/heron-py:0.1.0), found {image!r}")


@pytest.mark.parametrize("material", [MATERIAL, None])
def test_manifests_validate_against_the_openapi_schema(material: kr.SecretMaterial | None) -> None:
    for doc in docs(material=material):
        assert kubernetes_validate.validate(doc, K8S_VERSION, strict=True) == "1.37"


def test_schema_check_can_fail() -> None:
    # the check above is a real one: a misspelt field and a wrong type are refused
    doc = next(x for x in docs() if x["kind"] == "StatefulSet")
    doc["spec"]["replicaz"] = 2
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(doc, K8S_VERSION, strict=True)
    doc = next(x for x in docs() if x["kind"] == "StatefulSet")
    doc["spec"]["replicas"] = "two"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(doc, K8S_VERSION, strict=True)


def test_manifests_round_trip_through_the_client_models() -> None:
    from kubernetes.client import V1Secret, V1Service, V1StatefulSet

    types = {"Service": V1Service, "Secret": V1Secret, "StatefulSet": V1StatefulSet}
    for doc in docs():
        model = to_model(doc)
        assert isinstance(model, types[doc["kind"]])
        assert from_model(model) == doc


def test_dry_run_yaml_is_one_document_per_object() -> None:
    rendered = docs(material=None)
    text = kr.to_yaml(rendered)
    assert "&id" not in text
    assert list(yaml.safe_load_all(text)) == rendered
