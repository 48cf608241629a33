"""The Kubernetes scheduler: a topology as a Service, a Secret and two StatefulSets, created,
changed and deleted with the official ``kubernetes`` client (no kubectl).

The manifests come from the pure renderer (``kube_render.py``); this module only talks to
the API server. Each rendered dict becomes the client's model class (``to_model``) before it
is sent, so what is sent is what the round-trip tests check. A dead pod is replaced by its
StatefulSet; ``restart`` deletes pods (the set makes them anew, reading the plan again from
ZooKeeper); ``update`` patches the sets' replicas and requests, then deletes every pod.
"""

from __future__ import annotations

import json
import os
import re
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from heron_py.common.config import ConfigError, StatefulConfig, effectively_once
from heron_py.common.handshake import scrape_token
from heron_py.scheduler import kube_render as kr
from heron_py.scheduler.base import ContainerStatus, Scheduler, SchedulerError
from heron_py.state import StateConfig, StateManager
from heron_py.state.config import zk_auth_path

MODEL = {"Service": "V1Service", "Secret": "V1Secret", "StatefulSet": "V1StatefulSet"}
TIMEOUT_S = 30.0


def to_model(doc: Mapping[str, Any]) -> Any:
    """A rendered manifest as the official client's model (``V1Service``, ...): the client
    decodes it as it decodes the API server's answers."""
    from kubernetes.client import ApiClient

    return ApiClient().deserialize(json.dumps(doc), MODEL[str(doc["kind"])], "application/json")


def from_model(model: Any) -> dict[str, Any]:
    from kubernetes.client import ApiClient

    out: dict[str, Any] = ApiClient().sanitize_for_serialization(model)  # type: ignore[no-untyped-call]
    return out


def _kubeconfig(env: Mapping[str, str]) -> str:
    return env.get("KUBECONFIG") or str(Path.home() / ".kube" / "config")


def api_client(context: str | None, env: Mapping[str, str] | None = None) -> tuple[Any, str]:
    """The official client for ``context`` of the kubeconfig ($KUBECONFIG or ~/.kube/config),
    or the pod's service account inside a cluster; and where it points, for messages."""
    from kubernetes import client, config
    from kubernetes.config.config_exception import ConfigException

    env = os.environ if env is None else env
    path = _kubeconfig(env)
    if not any(Path(p).is_file() for p in path.split(os.pathsep) if p):
        if context is None and env.get("KUBERNETES_SERVICE_HOST"):
            config.load_incluster_config()  # type: ignore[no-untyped-call]  # a topology master relaunching from its pod
            return client.ApiClient(), "the in-cluster API server"
        where = f"$KUBECONFIG={env['KUBECONFIG']}" if env.get("KUBECONFIG") else f"{path} ($KUBECONFIG is not set)"
        raise SchedulerError(f"kubernetes scheduler: no kubeconfig at {where}, and not inside a pod; expected a "
                             f"kubeconfig with a context for the cluster (choose one with --context CTX), found none")
    conf = client.Configuration()
    conf.retries = 0  # an unreachable server is one error at once, not three tries later
    try:
        api = config.new_client_from_config(  # type: ignore[no-untyped-call]
            config_file=path, context=context, persist_config=False,
                                            client_configuration=conf)
    except ConfigException as e:
        raise SchedulerError(f"kubernetes scheduler: kubeconfig {path}: {e}; expected a context "
                             f"{context or '(the current one)'} that names a cluster and a user") from None
    ctx = f" (context {context})" if context else ""
    return api, f"{api.configuration.host}{ctx}"


@dataclass(frozen=True)
class ApiFailure:
    status: int
    reason: str
    message: str


def _failure(e: Exception) -> ApiFailure | None:
    """The API server's Status from an ApiException, or None for a transport failure."""
    status = getattr(e, "status", None)
    if not isinstance(status, int) or status == 0:
        return None
    try:
        body = json.loads(getattr(e, "body", None) or "{}")
    except ValueError:
        body = {}
    return ApiFailure(status, str(body.get("reason") or getattr(e, "reason", "")), str(body.get("message") or ""))


class KubeApi:
    """The calls heron-py makes, each failure one SchedulerError saying what and where."""

    def __init__(self, client: Any, where: str) -> None:
        from kubernetes.client import AppsV1Api, CoreV1Api

        self.core = CoreV1Api(client)
        self.apps = AppsV1Api(client)
        self.where = where

    def call(self, what: str, fn: Callable[..., Any], *args: Any, tolerate: tuple[int, ...] = (), **kw: Any) -> Any:
        """``fn(*args)``; an API answer whose status is in ``tolerate`` is returned as an
        ApiFailure instead of raised."""
        from kubernetes.client.exceptions import ApiException
        from urllib3.exceptions import HTTPError

        try:
            return fn(*args, _request_timeout=TIMEOUT_S, **kw)
        except ApiException as e:
            f = _failure(e)
            if f is None:
                raise SchedulerError(f"kubernetes scheduler: {what}: the API server {self.where} failed: "
                                     f"{str(e.reason).splitlines()[0][:300]}") from None
            if f.status in tolerate:
                return f
            raise SchedulerError(f"kubernetes scheduler: {what} on {self.where}: {f.status} {f.reason}: "
                                 f"{f.message}") from None
        except HTTPError as e:
            # urllib3 wraps the cause twice, with object addresses; its last sentence is the news
            cause = re.sub(r"[)'\"]+$", "", str(getattr(e, "reason", None) or e))
            cause = cause.rsplit("Failed to establish a new connection: ", 1)[-1]
            raise SchedulerError(f"kubernetes scheduler: the API server {self.where} is unreachable ({what}): "
                                 f"{cause}; expected a running cluster this machine can reach") from None

    def check_namespace(self, namespace: str) -> None:
        f = self.call(f"reading namespace {namespace}", self.core.read_namespace, namespace, tolerate=(403, 404))
        # 403: may not read namespaces; the namespaced calls will say what they may not do
        if isinstance(f, ApiFailure) and f.status == 404:
            raise SchedulerError(f"kubernetes scheduler: namespace {namespace!r} does not exist on {self.where}; "
                                 f"expected an existing namespace (--namespace NS), found none named {namespace!r}")

    def create(self, doc: Mapping[str, Any]) -> None:
        kind, meta = str(doc["kind"]), doc["metadata"]
        fns: dict[str, Callable[..., Any]] = {
            "Service": self.core.create_namespaced_service, "Secret": self.core.create_namespaced_secret,
            "StatefulSet": self.apps.create_namespaced_stateful_set}
        fn = fns[kind]
        self.call(f"creating {kind} {meta['namespace']}/{meta['name']}", fn, meta["namespace"], to_model(doc))

    def apply_statefulset(self, doc: Mapping[str, Any]) -> None:
        """Patch a set's replicas and pod template (strategic merge: the container by name), or
        create it when it is not there."""
        meta = doc["metadata"]
        patch = {"spec": {"replicas": doc["spec"]["replicas"], "template": doc["spec"]["template"]}}
        done = self.call(f"patching StatefulSet {meta['namespace']}/{meta['name']}",
                         self.apps.patch_namespaced_stateful_set, meta["name"], meta["namespace"], patch,
                         tolerate=(404,), _content_type="application/strategic-merge-patch+json")
        if isinstance(done, ApiFailure):
            self.create(doc)

    def delete_pod(self, namespace: str, name: str) -> None:
        self.call(f"deleting pod {namespace}/{name}", self.core.delete_namespaced_pod, name, namespace,
                  tolerate=(404,))

    def delete_all(self, namespace: str, selector: str) -> None:
        """Every object with the topology's label; the pods too, in case a set was orphaned."""
        where = f"in {namespace} with label {selector}"
        self.call(f"deleting StatefulSets {where}", self.apps.delete_collection_namespaced_stateful_set, namespace,
                  label_selector=selector, propagation_policy="Background")
        self.call(f"deleting Services {where}", self.core.delete_collection_namespaced_service, namespace,
                  label_selector=selector)
        self.call(f"deleting Secrets {where}", self.core.delete_collection_namespaced_secret, namespace,
                  label_selector=selector)
        self.call(f"deleting pods {where}", self.core.delete_collection_namespaced_pod, namespace,
                  label_selector=selector)

    def pods(self, namespace: str, selector: str) -> list[Any]:
        res = self.call(f"listing pods in {namespace} with label {selector}", self.core.list_namespaced_pod,
                        namespace, label_selector=selector)
        return list(res.items or [])


def connect(context: str | None) -> KubeApi:
    client, where = api_client(context)
    return KubeApi(client, where)


def pod_status(pod: Any) -> str:
    """A pod's phase, lower case, with readiness when it runs (the stream manager registered)."""
    phase = str(pod.status.phase or "unknown").lower() if pod.status else "unknown"
    if phase == "running":
        ready = any(c.type == "Ready" and c.status == "True" for c in (pod.status.conditions or []))
        return "running" if ready else "running (not ready)"
    return phase


class KubernetesScheduler(Scheduler):
    kind = "kubernetes"
    cluster = True

    def __init__(self, state: StateManager, home: Path | None = None, state_config: StateConfig | None = None,
                 options: kr.KubeOptions | None = None,
                 api_factory: Callable[[str | None], KubeApi] = connect) -> None:
        super().__init__(state)
        self.home = home
        self.state_config = state_config or StateConfig()
        self.options = options or kr.KubeOptions()
        self._api_factory = api_factory
        self._api: KubeApi | None = None

    @classmethod
    def check_tools(cls) -> None:
        try:
            import kubernetes  # noqa: F401
        except ImportError:
            raise SchedulerError("kubernetes scheduler: the Python package 'kubernetes' is not installed; expected "
                                 "it beside heron-py (pip install 'heron-py[kubernetes]'), found none") from None

    def api(self) -> KubeApi:
        if self._api is None:
            self._api = self._api_factory(self.options.context)
        return self._api

    def kube_topology(self, name: str, topology_id: str) -> kr.KubeTopology:
        topology = self.state.get_topology(name)
        packing = self.state.get_packing_plan(name)
        if topology is None or packing is None:
            raise SchedulerError(f"kubernetes scheduler: topology '{name}' has no definition or packing plan in "
                                 f"the state manager ({self.state_config.describe()})")
        return kr.KubeTopology(name, topology_id, packing, kr.container_resources(topology, packing),
                               self.state_config)

    def material(self, name: str) -> kr.SecretMaterial:
        secret = self.state.get_secret(name)
        if secret is None:
            raise SchedulerError(f"kubernetes scheduler: topology '{name}' has no secret in the state manager")
        # the credential this process opened ZooKeeper with: the pods must open it the same way
        path = Path(getattr(self.state, "auth_file", None) or zk_auth_path(self.state_config, self.home))
        return kr.SecretMaterial(path.read_bytes(), secret, scrape_token(secret), self.state.get_tls(name),
                                 self.zk_tls_files())

    def zk_tls_files(self) -> dict[str, bytes]:
        """ZooKeeper over TLS: the files this process opened ZooKeeper with (the CA, the client
        certificate and its key), by their key in the pods' Secret: the pods open it the same way."""
        cfg, out = self.state_config, {}
        for opt, field, key in kr.ZK_TLS_FILES:
            path = getattr(cfg, field)
            if cfg.zk_tls and path:
                try:
                    out[key] = Path(path).read_bytes()
                except OSError as e:
                    raise SchedulerError(f"kubernetes scheduler: {opt} {path}: expected a file to put in the pods' "
                                         f"Secret, found it unreadable ({e.strerror or e})") from None
        return out

    def launch(self, name: str, num_containers: int) -> dict[str, Any]:
        o = self.options
        topology = self.state.get_topology(name)
        problem = checkpoint_root_problem(name, topology.config if topology is not None else {})
        if problem is not None:
            raise SchedulerError(problem)  # before any call: submit then removes what it stored
        kr.check_image(o.image)  # before any call: a bad name is the user's to fix, not the cluster's
        topology_id = f"{name}-{uuid.uuid4().hex[:12]}"
        docs = kr.render_all(self.kube_topology(name, topology_id), o, self.material(name))
        api = self.api()
        api.check_namespace(o.namespace)
        try:
            for doc in docs:
                api.create(doc)
        except SchedulerError:
            api.delete_all(o.namespace, kr.selector(name))  # nothing half-made stays behind
            raise
        # the options go with the record: a relaunch or restart finds the same namespace
        info: dict[str, Any] = {"scheduler": self.kind, "topology_id": topology_id,
                                "options": {"namespace": o.namespace, "image": o.image, "context": o.context or ""},
                                "objects": [f"{d['kind']}/{d['metadata']['name']}" for d in docs]}
        self.state.set_scheduler_location(name, info)
        return info

    def packing_changed(self, name: str) -> None:
        """The StatefulSets get the new packing's requests; with their OnDelete policy no pod
        changes now (the running ones keep their requests), and a pod made again later (a
        restart, a lost node) is sized for the tasks it then runs."""
        self._apply_statefulsets(name)

    def _apply_statefulsets(self, name: str) -> kr.KubeTopology:
        info = self.record(name)
        kt = self.kube_topology(name, str(info.get("topology_id", "")))
        api = self.api()
        # replicas and requests follow the (maybe repacked) plan; OnDelete: pods change only when deleted
        api.apply_statefulset(kr.render_statefulset(kt, self.options, kr.ROLE_TMANAGER))
        if kt.packing.num_containers > 1:
            api.apply_statefulset(kr.render_statefulset(kt, self.options, kr.ROLE_EXECUTOR))
        return kt

    def restart(self, name: str, containers: list[int], num_containers: int, grace_s: float = 10.0) -> None:
        self._apply_statefulsets(name)
        api, ns = self.api(), self.options.namespace
        for c in containers:
            if c < num_containers:
                api.delete_pod(ns, kr.pod_name(name, c))

    def kill(self, name: str, grace_s: float = 10.0) -> list[int]:
        self.record(name)
        self.api().delete_all(self.options.namespace, kr.selector(name))
        return []

    def containers(self, name: str) -> list[ContainerStatus]:
        self.record(name)
        packing = self.state.get_packing_plan(name)
        found: dict[int, ContainerStatus] = {}
        for pod in self.api().pods(self.options.namespace, kr.selector(name)):
            k = kr.container_of_pod(name, str(pod.metadata.name))
            if k is not None:
                node = str(pod.spec.node_name or "") if pod.spec else ""
                found[k] = ContainerStatus(k, pod_status(pod), node, str(pod.metadata.name))
        # a container without a pod (being made anew, or unschedulable and not yet created) is "gone"
        n = max([packing.num_containers if packing is not None else 0, *(k + 1 for k in found)])
        return [found.get(k) or ContainerStatus(k, "gone", "", kr.pod_name(name, k)) for k in range(n)]


def checkpoint_root_problem(name: str, config: Mapping[str, Any]) -> str | None:
    """Why an EFFECTIVELY_ONCE topology cannot run on these pods (pure); None when it can, or
    when it is in another mode, or keeps its checkpoints in Redis (heron_py.checkpoint.storage
    redis, or Storm's RedisKeyValueStateProvider). The master completes a checkpoint by reading every task's file
    and the instances restore from files other pods may have written: the root must be one
    folder all pods share. Each pod's heron home is in an emptyDir of its own
    (``kube_render.VOLUME``), lost with the pod, so the default root (``checkpoints/`` in it)
    never is."""
    if not effectively_once(config):
        return None
    try:
        stateful = StatefulConfig.from_config(config)
    except ConfigError as e:
        return f"kubernetes scheduler: topology '{name}': {e}"
    if stateful.storage == "redis":
        return None  # every pod reaches the same Redis server: no shared folder needed
    root = stateful.root
    home = PurePosixPath(kr.VOLUME)
    path = PurePosixPath(root)
    if root and path.is_absolute() and path != home and home not in path.parents:
        return None
    found = "it unset" if not root else (f"'{root}', inside each pod's own {kr.VOLUME}" if path.is_absolute()
                                         else f"'{root}', a relative path")
    return (f"kubernetes scheduler: topology '{name}' is EFFECTIVELY_ONCE, whose checkpoints must be in one "
            f"folder every pod shares (each pod's {kr.VOLUME} is its own emptyDir, lost with the pod); expected "
            f"heron_py.checkpoint.root set to the absolute mount path of a volume shared by every pod, found {found}")


def options_from_record(info: Mapping[str, Any]) -> kr.KubeOptions:
    opts = dict(info.get("options", {}))
    return kr.KubeOptions(namespace=str(opts.get("namespace") or "default"),
                          image=str(opts.get("image") or kr.DEFAULT_IMAGE), context=opts.get("context") or None)
