"""The Kubernetes manifests of a topology, as plain dicts (pure: no client, no cluster).

Layout (Heron's later Kubernetes layout): a headless Service, a Secret, one StatefulSet for
container 0 (the topology master's container, ``NAME-tmanager``) and one for containers
1..N-1 (``NAME-executors``). A pod is one container of the packing plan; its index is its
StatefulSet ordinal plus the set's first container (``HERON_PY_CONTAINER_OFFSET``), computed
by the pod's shell command from its hostname, which a StatefulSet makes ``SET-ORDINAL``.

Every object carries the topology's labels, so ``kill`` deletes by label selector. The pods
reach the topology package, plan and secret through ZooKeeper, as Slurm's containers do; the
Secret carries the ZooKeeper credential that opens it and, with ``--zk-tls``, the CA and client
certificate files to reach ZooKeeper over TLS (plus the topology secret, its HTTP bearer token
for Prometheus, and the TLS material when TLS is on). The StatefulSets use the
``OnDelete`` update strategy: a pod changes only when heron-py deletes it (restart, update),
never in a rolling update the engine did not ask for.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import math
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from heron_py.api.api_constants import (
    TOPOLOGY_COMPONENT_RAMMAP,
    TOPOLOGY_CONTAINER_CPU_REQUESTED,
    TOPOLOGY_CONTAINER_RAM_PADDING,
    TOPOLOGY_CONTAINER_RAM_REQUESTED,
)
from heron_py.common.container_layout import TOPOLOGY_ID_ENV, TopologyPaths
from heron_py.planner.model import PackingPlan, TopologyDef
from heron_py.scheduler.base import SchedulerError
from heron_py.state import StateConfig

# Heron's key for per-component CPU (api_constants has only the RAM map)
TOPOLOGY_COMPONENT_CPUMAP = "topology.component.cpumap"
TOPOLOGY_CONTAINER_CPU_PADDING = "topology.container.cpu.padding"
# A Python instance is one process: up to one core (Heron's default too), but far less memory
# than a JVM instance (Heron's default is 1 GiB); the padding covers the container's daemons
DEFAULT_INSTANCE_CPU = 1.0
DEFAULT_INSTANCE_RAM = 256 * 1024 * 1024
DEFAULT_CPU_PADDING = 0.5
DEFAULT_RAM_PADDING = 512 * 1024 * 1024

DEFAULT_IMAGE = "heron-py:latest"
METRICS_PORT = 9100
# each pod's emptyDir; kubelet makes it root's (mode 0777), and a heron home must be its user's
# (heron_py.state.localfs.private_home): the home is a folder the pod's user makes in it
VOLUME = "/var/lib/heron-py"
HOME = f"{VOLUME}/home"
SECRET_MOUNT = "/etc/heron-py/secret"
OFFSET_ENV = "HERON_PY_CONTAINER_OFFSET"
LABEL_TOPOLOGY = "heron-py/topology"
LABEL_TOPOLOGY_ID = "heron-py/topology-id"
LABEL_ROLE = "heron-py/role"
ANNOTATION_NAME = "heron-py/topology-name"
ROLE_TMANAGER = "tmanager"
ROLE_EXECUTOR = "executors"
RUN_AS = 1000  # the image's heron user (docker/Dockerfile)


@dataclass(frozen=True)
class KubeOptions:
    namespace: str = "default"
    image: str = DEFAULT_IMAGE
    context: str | None = None  # kubeconfig context; None: the current one
    image_pull_policy: str = "IfNotPresent"


@dataclass(frozen=True)
class Resources:
    cpu: float  # cores
    ram: int  # bytes


@dataclass(frozen=True)
class SecretMaterial:
    """What the Secret holds. ``None`` in a dry run: nothing is generated or read then.
    ``zk_tls``: with ZooKeeper over TLS, the files the state manager's config names, by their
    key in the Secret (``ZK_TLS_FILES``): the CA's certificate, the client certificate and its key."""

    zk_auth: bytes
    topology_secret: bytes
    http_token: str
    tls: bytes | None
    zk_tls: Mapping[str, bytes] = dataclasses.field(default_factory=dict)


# ZooKeeper over TLS (--zk-tls): each file the submitter's config names goes into the Secret under
# its key, and the pods' daemons read it from there, so the credential, the secret and the
# package never cross the pod network in clear. The key must be its reader's alone (mode 0600:
# tls_context refuses another), which a Secret volume file is not: the pod's command copies it
# into the home. Option, the config's field, the Secret's key.
ZK_TLS_FILES = (("--zk-ca-file", "zk_ca_file", "zk-ca.pem"), ("--zk-cert-file", "zk_cert_file", "zk-cert.pem"),
                ("--zk-key-file", "zk_key_file", "zk-key.pem"))
ZK_KEY_IN_HOME = "zk-key.pem"


def zk_tls_keys(cfg: StateConfig) -> list[str]:
    """The Secret's keys of the TLS files ``cfg`` names (none with TLS off)."""
    return [key for _, field, key in ZK_TLS_FILES if cfg.zk_tls and getattr(cfg, field)]


@dataclass(frozen=True)
class KubeTopology:
    """Everything the manifests depend on, from the topology, its packing plan and the state
    manager's configuration."""

    name: str
    topology_id: str  # NAME-HEX12, as on Slurm
    packing: PackingPlan
    resources: tuple[Resources, ...]  # per container
    state_config: StateConfig


# --- names -------------------------------------------------------------------------------

_NAME_MAX = 30  # "NAME-HASH6-executors-9999" and its revision-hash label stay under 63


def kube_name(topology: str) -> str:
    """A DNS-1035 label for the topology's objects: lower case, '-', starting with a letter.
    A name that had to change gets a hash suffix, so two topologies never share objects."""
    base = re.sub(r"[^a-z0-9-]+", "-", topology.lower()).strip("-")
    if not base or not base[0].isalpha():
        base = "t-" + base
    base = base[:_NAME_MAX].rstrip("-")
    if base == topology:
        return base
    return f"{base}-{hashlib.sha256(topology.encode()).hexdigest()[:6]}"


def set_name(topology: str, role: str) -> str:
    return f"{kube_name(topology)}-{role}"


def pod_name(topology: str, container: int) -> str:
    """The pod that runs ``container``: ordinal 0 of the master's set, or k-1 of the other."""
    if container == 0:
        return f"{set_name(topology, ROLE_TMANAGER)}-0"
    return f"{set_name(topology, ROLE_EXECUTOR)}-{container - 1}"


def container_of_pod(topology: str, pod: str) -> int | None:
    for role, offset in ((ROLE_TMANAGER, 0), (ROLE_EXECUTOR, 1)):
        prefix = set_name(topology, role) + "-"
        if pod.startswith(prefix) and pod[len(prefix):].isdigit():
            return int(pod[len(prefix):]) + offset
    return None


def container_index(hostname: str, offset: int) -> int:
    """A pod's container from its hostname (``SET-ORDINAL``); the probe's twin of the shell's
    ``${HOSTNAME##*-}``."""
    ordinal = hostname.rsplit("-", 1)[-1]
    if not ordinal.isdigit():
        raise ValueError(f"pod hostname {hostname!r}: expected SET-ORDINAL (a StatefulSet pod)")
    return int(ordinal) + offset


def labels(topology: str, topology_id: str) -> dict[str, str]:
    return {"app.kubernetes.io/name": "heron-py", "app.kubernetes.io/managed-by": "heron-py",
            LABEL_TOPOLOGY: kube_name(topology),
            LABEL_TOPOLOGY_ID: f"{kube_name(topology)}-{topology_id.rsplit('-', 1)[-1]}"[:63]}


def selector(topology: str) -> str:
    """The label selector of every object of the topology."""
    return f"{LABEL_TOPOLOGY}={kube_name(topology)}"


# --- image references (the Docker distribution reference grammar) ----------------------------

_PATH = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_DOMAIN_PART = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_DOMAIN = rf"{_DOMAIN_PART}(?:\.{_DOMAIN_PART})*"
_IMAGE = re.compile(rf"^(?:{_DOMAIN}(?::[0-9]+)?/)?{_PATH}(?:/{_PATH})*(?::[\w][\w.-]{{0,127}})?"
                    r"(?:@[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,})?$")


def check_image(image: str) -> None:
    if len(image) > 255 or not _IMAGE.match(image):
        raise SchedulerError(f"submit kubernetes: --image {image!r} is not a valid image reference; expected "
                             f"[REGISTRY[:PORT]/]NAME[:TAG][@DIGEST] with a lower-case NAME "
                             f"(e.g. registry.example.com/heron-py:0.1.0), found {image!r}")


# --- resources ---------------------------------------------------------------------------------

def _component_map(config: Mapping[str, Any], key: str, what: str) -> dict[str, float]:
    """Heron's ``COMPONENT:VALUE,COMPONENT:VALUE`` maps (topology.component.rammap/cpumap)."""
    raw = config.get(key)
    if raw is None or raw == "":
        return {}
    out: dict[str, float] = {}
    for item in str(raw).split(","):
        comp, sep, value = item.strip().rpartition(":")
        try:
            v = float(value)
        except ValueError:
            v = -1.0
        if not sep or not comp or not v > 0:
            raise SchedulerError(f"config {key}: expected COMPONENT:{what}[,COMPONENT:{what}...] with {what} a "
                                 f"number > 0, found {raw!r}")
        out[comp] = v
    return out


def _positive(config: Mapping[str, Any], key: str, default: float | None) -> float | None:
    raw = config.get(key)
    if raw is None or raw == "":
        return default
    try:
        v = float(raw)
    except (TypeError, ValueError):
        v = -1.0
    if not v > 0:
        raise SchedulerError(f"config {key}: expected a number > 0, found {raw!r}")
    return v


def container_resources(topology: TopologyDef, packing: PackingPlan) -> tuple[Resources, ...]:
    """Each container's request, with Heron's keys: ``topology.container.cpu``/``ram`` when
    set, else the sum over its tasks of the component's ``topology.component.cpumap``/
    ``rammap`` entry (or the default per instance) plus the daemons' padding."""
    config = topology.config
    ram_map = _component_map(config, TOPOLOGY_COMPONENT_RAMMAP, "BYTES")
    cpu_map = _component_map(config, TOPOLOGY_COMPONENT_CPUMAP, "CORES")
    fixed_cpu = _positive(config, TOPOLOGY_CONTAINER_CPU_REQUESTED, None)
    fixed_ram = _positive(config, TOPOLOGY_CONTAINER_RAM_REQUESTED, None)
    cpu_pad = _positive(config, TOPOLOGY_CONTAINER_CPU_PADDING, DEFAULT_CPU_PADDING) or 0.0
    ram_pad = _positive(config, TOPOLOGY_CONTAINER_RAM_PADDING, DEFAULT_RAM_PADDING) or 0.0
    out = []
    for k in range(packing.num_containers):
        tasks = packing.tasks_in(k)
        cpu = fixed_cpu or cpu_pad + sum(cpu_map.get(t.component, DEFAULT_INSTANCE_CPU) for t in tasks)
        ram = fixed_ram or ram_pad + sum(ram_map.get(t.component, DEFAULT_INSTANCE_RAM) for t in tasks)
        out.append(Resources(cpu, int(ram)))
    return tuple(out)


def quantities(res: Resources) -> dict[str, Any]:
    """Requests in Kubernetes quantities; a memory limit equal to the request (a container
    over it is OOM-killed and restarted by its StatefulSet, not left to starve its node), and
    no CPU limit (throttling would stall the stream manager's heartbeats)."""
    cpu = f"{max(1, math.ceil(res.cpu * 1000))}m"
    memory = f"{max(1, math.ceil(res.ram / 2**20))}Mi"
    return {"requests": {"cpu": cpu, "memory": memory}, "limits": {"memory": memory}}


def _largest(resources: Sequence[Resources]) -> Resources:
    # one pod template for containers 1..N-1: each pod asks for what the largest one needs
    return Resources(max(r.cpu for r in resources), max(r.ram for r in resources))


# --- manifests -------------------------------------------------------------------------------

def _meta(kt: KubeTopology, options: KubeOptions, name: str) -> dict[str, Any]:
    return {"name": name, "namespace": options.namespace, "labels": labels(kt.name, kt.topology_id),
            "annotations": {ANNOTATION_NAME: kt.name}}


def state_args(cfg: StateConfig) -> list[str]:
    """The state manager's arguments inside a pod: the submitter's ZooKeeper, and the
    credential and TLS files where the pod has them (never the submitter's own file paths)."""
    return ["--state-manager", "zookeeper", "--zk", cfg.zk, "--zk-session-timeout", f"{cfg.session_timeout_s:g}",
            *cfg.connect_args(), "--zk-auth-file", f"{HOME}/zk.auth", *_zk_tls_args(cfg)]


def _zk_tls_args(cfg: StateConfig) -> list[str]:
    if not cfg.zk_tls:
        return []
    out = ["--zk-tls"]
    for opt, field, key in ZK_TLS_FILES:
        if getattr(cfg, field):
            out += [opt, f"{HOME}/{ZK_KEY_IN_HOME}" if key == ZK_KEY_IN_HOME else f"{SECRET_MOUNT}/{key}"]
    return out + ([] if cfg.zk_tls_verify_hostname else ["--no-zk-tls-verify-hostname"])


def pod_command(kt: KubeTopology) -> list[str]:
    """The pod's shell command: its container index from the hostname, then the executor."""
    layout = TopologyPaths(Path(HOME), kt.name).layout("$container")  # the shell's variable, below
    argv = ["python", "-m", "heron_py.scheduler.executor", "--topology", kt.name, "--home", HOME,
            *state_args(kt.state_config)]
    script = "\n".join([
        "set -eu",
        "# a StatefulSet pod is named SET-ORDINAL; the set's first container is the offset",
        "ordinal=\"${HOSTNAME##*-}\"",
        f"container=$((ordinal + ${OFFSET_ENV}))",
        f"mkdir -p \"{layout.folder}\"",
        "# the ZooKeeper client wants its credential mode 0600 and ours: a Secret volume file is neither",
        f"install -m 600 {SECRET_MOUNT}/zk.auth {HOME}/zk.auth",
        *([f"install -m 600 {SECRET_MOUNT}/{ZK_KEY_IN_HOME} {HOME}/{ZK_KEY_IN_HOME}"]
          if ZK_KEY_IN_HOME in zk_tls_keys(kt.state_config) else []),
        "# the metrics manager takes its predecessor's Prometheus port when free: here the fixed one",
        "# the scrape annotations name (a fresh pod has its own network, so it is free)",
        f"echo '{{\"http_port\": {METRICS_PORT}}}' > \"{layout.metricsmgr}\"",
        "echo \"heron-py container $container of " + kt.name + " in pod $HOSTNAME ($POD_IP)\"",
        "exec " + " ".join(shlex.quote(a) for a in argv) + " --container \"$container\" --host \"$POD_IP\"",
    ])
    return ["/bin/sh", "-c", script]


def probe_command(kt: KubeTopology) -> list[str]:
    """Ready once this container's stream manager is registered (in the master's physical
    plan, at this pod's address and its stream manager's port): heron_py.scheduler.kube_probe."""
    return ["python", "-m", "heron_py.scheduler.kube_probe", "--topology", kt.name, "--home", HOME,
            *state_args(kt.state_config)]


def render_service(kt: KubeTopology, options: KubeOptions) -> dict[str, Any]:
    """Headless: the StatefulSets' governing service, giving each pod a stable DNS name. Not-
    ready pods are published too, since peers must meet before the clique is ready."""
    return {"apiVersion": "v1", "kind": "Service", "metadata": _meta(kt, options, kube_name(kt.name)),
            "spec": {"clusterIP": "None", "publishNotReadyAddresses": True,
                     "selector": {LABEL_TOPOLOGY: kube_name(kt.name)},
                     "ports": [{"name": "metrics", "port": METRICS_PORT, "targetPort": METRICS_PORT,
                                "protocol": "TCP"}]}}


def render_secret(kt: KubeTopology, options: KubeOptions, material: SecretMaterial | None) -> dict[str, Any]:
    doc: dict[str, Any] = {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                           "metadata": _meta(kt, options, kube_name(kt.name))}
    tls_keys = zk_tls_keys(kt.state_config)
    if material is None:
        # a dry run generates and reads nothing: the values are made at submit
        doc["stringData"] = {"zk.auth": "(the ZooKeeper credential, read at submit)",
                             "topology.secret": "(generated at submit)", "http.token": "(derived at submit)",
                             **{key: "(read at submit from the file the state manager's config names)"
                                for key in tls_keys}}
        return doc
    data = {"zk.auth": material.zk_auth, "topology.secret": material.topology_secret,
            "http.token": material.http_token.encode()}
    if material.tls is not None:
        data["tls.json"] = material.tls
    missing = [key for key in tls_keys if key not in material.zk_tls]
    if missing:
        raise SchedulerError(f"kubernetes scheduler: ZooKeeper over TLS: expected the Secret's {', '.join(missing)} "
                             f"from the files the state manager's config names, found none")
    data.update({key: material.zk_tls[key] for key in tls_keys})
    doc["data"] = {k: base64.b64encode(v).decode() for k, v in data.items()}
    return doc


def _pod_spec(kt: KubeTopology, options: KubeOptions, offset: int, res: Resources) -> dict[str, Any]:
    env: list[dict[str, Any]] = [
        {"name": OFFSET_ENV, "value": str(offset)},
        {"name": TOPOLOGY_ID_ENV, "value": kt.topology_id},
        {"name": "HERON_PY_HOME", "value": HOME},
        {"name": "PYTHONUNBUFFERED", "value": "1"},
        {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
    ]
    container = {
        "name": "executor", "image": options.image, "imagePullPolicy": options.image_pull_policy,
        "command": pod_command(kt), "env": env,
        "ports": [{"name": "metrics", "containerPort": METRICS_PORT, "protocol": "TCP"}],
        "resources": quantities(res),
        "readinessProbe": {"exec": {"command": probe_command(kt)}, "initialDelaySeconds": 5,
                           "periodSeconds": 10, "timeoutSeconds": 8, "failureThreshold": 3},
        "volumeMounts": [{"name": "secret", "mountPath": SECRET_MOUNT, "readOnly": True},
                         {"name": "home", "mountPath": VOLUME}],
    }
    return {
        "containers": [container],
        # the executor stops its children within 5 s of SIGTERM
        "terminationGracePeriodSeconds": 15,
        "enableServiceLinks": False,
        "securityContext": {"runAsUser": RUN_AS, "runAsGroup": RUN_AS, "fsGroup": RUN_AS, "runAsNonRoot": True},
        "volumes": [{"name": "secret", "secret": {"secretName": kube_name(kt.name), "defaultMode": 0o440}},
                    {"name": "home", "emptyDir": {}}],
    }


def render_statefulset(kt: KubeTopology, options: KubeOptions, role: str) -> dict[str, Any]:
    """The master's set (container 0, one replica) or the executors' (containers 1..N-1)."""
    offset, replicas = (0, 1) if role == ROLE_TMANAGER else (1, kt.packing.num_containers - 1)
    res = kt.resources[0] if role == ROLE_TMANAGER else _largest(kt.resources[1:] or kt.resources[:1])
    pod_labels = {**labels(kt.name, kt.topology_id), LABEL_ROLE: role}
    meta = _meta(kt, options, set_name(kt.name, role))
    meta["labels"] = pod_labels
    return {
        "apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": meta,
        "spec": {
            "serviceName": kube_name(kt.name),
            "replicas": replicas,
            # all containers start together: the clique forms in any order
            "podManagementPolicy": "Parallel",
            "updateStrategy": {"type": "OnDelete"},
            "selector": {"matchLabels": {LABEL_TOPOLOGY: kube_name(kt.name), LABEL_ROLE: role}},
            "template": {
                "metadata": {"labels": pod_labels, "annotations": {
                    ANNOTATION_NAME: kt.name, "prometheus.io/scrape": "true",
                    "prometheus.io/port": str(METRICS_PORT), "prometheus.io/path": "/metrics"}},
                "spec": _pod_spec(kt, options, offset, res),
            },
        },
    }


def render_all(kt: KubeTopology, options: KubeOptions, material: SecretMaterial | None) -> list[dict[str, Any]]:
    """Every object of the topology, in creation order."""
    check_image(options.image)
    docs = [render_service(kt, options), render_secret(kt, options, material),
            render_statefulset(kt, options, ROLE_TMANAGER)]
    if kt.packing.num_containers > 1:
        docs.append(render_statefulset(kt, options, ROLE_EXECUTOR))
    return docs


def to_yaml(docs: Sequence[Mapping[str, Any]]) -> str:
    """One YAML document per object (what ``submit --dry-run`` prints)."""
    import yaml

    class Dumper(yaml.SafeDumper):
        def ignore_aliases(self, data: Any) -> bool:
            return True  # no &id001 anchors: the manifests read as written

    def text(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
        # the pod's shell script as a block, line for line
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|" if "\n" in value else None)

    Dumper.add_representer(str, text)
    return "".join("---\n" + yaml.dump(dict(d), Dumper=Dumper, sort_keys=False) for d in docs)
