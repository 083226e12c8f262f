# Copyright: gpufleet contributors
# Apache License 2.0
"""The Kubernetes API as the gpufleet action modules need it: a thin wrapper over the official ``kubernetes``
client that speaks plain dicts (what the pure functions in nodes.py, drain.py and gangs.py take), so those
functions are tested with no cluster and no client library. The wrapper is the only code here that does I/O.

Annotations gpufleet keeps on objects (the per-node ledger a rerun resumes from) are named below.
"""
from __future__ import annotations

import datetime
import json
import os
from typing import Any, Dict, List, Optional, Tuple

from ansible_collections.gpufleet.upgrade.plugins.module_utils.errors import GpufleetError

PREFIX = "gpufleet.io/"
ANN_TARGET = PREFIX + "upgrade-target"            # the version this node is being taken to
ANN_PHASE = PREFIX + "upgrade-phase"              # cordoned | drained | upgraded | validated | done | failed
ANN_REASON = PREFIX + "upgrade-reason"            # why a node failed (the gate and its measured value)
ANN_UPDATED = PREFIX + "upgrade-updated"          # when the phase last changed (RFC 3339)
ANN_UNSCHED_BEFORE = PREFIX + "unschedulable-before"  # "true"/"false": what uncordon returns the node to
ANN_CYCLE = PREFIX + "upgrade-cycle"              # the version the node's upgrade cycle ends at (skip-level)
ANN_CYCLE_DRAINS = PREFIX + "cycle-drains"        # the targets gpufleet drained the node for in that cycle
ANN_CHECKPOINT_REQ = PREFIX + "checkpoint-requested"  # on a JobSet: token of a checkpoint-and-yield request
ANN_CHECKPOINT_DONE = PREFIX + "checkpoint-completed"  # the job's answer: the same token
ANN_LAST_CHECKPOINT = PREFIX + "last-checkpoint-time"  # the job's last checkpoint (RFC 3339)
ANN_STOPPED_BY = PREFIX + "stopped-by"            # on a Workload/JobSet: the run that stopped this gang
ANN_STOPPED_NODES = PREFIX + "stopped-nodes"      # on a Workload/JobSet: the nodes being maintained when stopped

JOBSET = ("jobset.x-k8s.io", "v1alpha2", "jobsets")
WORKLOAD = ("kueue.x-k8s.io", "v1beta2", "workloads")
JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
KUEUE_JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"  # on a Workload Kueue made: the UID of the job (JobSet) it admits

try:  # the connection options and their K8S_AUTH_* variables are kubernetes.core's own (a galaxy.yml dependency)
    from ansible_collections.kubernetes.core.plugins.module_utils.args_common import AUTH_ARG_SPEC
    from ansible_collections.kubernetes.core.plugins.module_utils.k8s import client as k8s_client
except ImportError:  # pragma: no cover - reported when a module connects
    AUTH_ARG_SPEC, k8s_client = {}, None

KUBE_ARGSPEC: Dict[str, Dict[str, Any]] = dict(AUTH_ARG_SPEC)

NO_CREDENTIALS = ("no cluster credentials: set the module's kubeconfig (K8S_AUTH_KUBECONFIG), or host with api_key "
                  "or client_cert/client_key (K8S_AUTH_HOST, K8S_AUTH_API_KEY, ...), or provide $KUBECONFIG or "
                  "~/.kube/config. "
                  "gpufleet never falls back to the in-cluster service account: in an AWX job pod that is the cluster "
                  "running AWX, not the cell")


def default_kubeconfig(environ: Dict[str, str], home: str) -> str:
    """Where the kubernetes client looks when no kubeconfig is named: $KUBECONFIG (a ':'-separated list, merged),
    else ~/.kube/config - the file kubernetes.core falls back to after its in-cluster attempt."""
    return environ.get("KUBECONFIG") or os.path.join(home, ".kube", "config")


def auth_source(auth: Dict[str, Any], default_kubeconfig: str) -> Dict[str, Any]:
    """The connection kubernetes.core would use for ``auth`` (module options, else K8S_AUTH_* variables, as its
    ``_create_auth_spec`` reads them) - except that with nothing given it takes ``default_kubeconfig`` (see
    :func:`default_kubeconfig`) when one of its files exists and refuses otherwise, where kubernetes.core would try
    the in-cluster service account first."""
    def given(*names: str) -> bool:
        return all(auth.get(n) for n in names)

    if (given("username", "password", "host") or given("api_key", "host") or given("cert_file", "key_file", "host")
            or given("kubeconfig") or given("context")):
        return dict(auth)
    if any(os.path.isfile(os.path.expanduser(p)) for p in default_kubeconfig.split(os.pathsep) if p):
        return dict(auth, kubeconfig=default_kubeconfig)
    raise KubeError(NO_CREDENTIALS)


class KubeError(GpufleetError):
    """The API server refused or could not be reached."""


def api_error(exc: Any) -> Tuple[int, str]:
    """(HTTP status, the apiserver's message) of a client ApiException."""
    status = int(getattr(exc, "status", 0) or 0)
    message = str(getattr(exc, "reason", "") or "")
    body = getattr(exc, "body", None)
    if body:
        try:
            message = json.loads(body).get("message") or message
        except (ValueError, AttributeError):
            message = str(body)[:500]
    return status, message


class Kube:
    """A connection to one cluster. Every method returns plain dicts."""

    def __init__(self, auth: Dict[str, Any], headers: Optional[Dict[str, Any]] = None) -> None:
        """``auth``: kubernetes.core's auth spec (client names: kubeconfig, context, host, api_key, verify_ssl,
        ssl_ca_cert, cert_file, key_file, ...), already resolved by :func:`auth_source`."""
        try:
            from kubernetes import client
        except ImportError as exc:  # pragma: no cover - the module reports missing_required_lib first
            raise KubeError("the Python library 'kubernetes' is missing on the controller: pip install kubernetes "
                            "(pip install -r requirements.txt from the collection)") from exc
        if k8s_client is None:
            raise KubeError("the collection kubernetes.core is missing: ansible-galaxy collection install "
                            "kubernetes.core (gpufleet connects to clusters exactly as its modules do)")
        where = auth.get("host") or auth.get("kubeconfig") or "(kubeconfig)"
        try:
            self.client = client.ApiClient(k8s_client._create_configuration(dict(auth)))
        except Exception as exc:
            raise KubeError("cannot connect with %s: %s; check kubeconfig/context or host and credentials "
                            "(K8S_AUTH_*)" % (where if isinstance(where, str) else "(kubeconfig data)", exc)) from exc
        for name, value in (headers or {}).items():
            self.client.set_default_header(name, value)
        self.core = client.CoreV1Api(self.client)
        self.policy = client.PolicyV1Api(self.client)
        self.custom = client.CustomObjectsApi(self.client)
        from kubernetes.client.rest import ApiException
        self.ApiException = ApiException
        self._dynamic: Any = None

    def _plain(self, obj: Any) -> Any:
        return self.client.sanitize_for_serialization(obj)

    def _call(self, what: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except self.ApiException as exc:
            status, message = api_error(exc)
            raise KubeError("%s: HTTP %d %s" % (what, status, message), status=status) from exc
        except Exception as exc:  # urllib3 errors: connection refused, TLS
            raise KubeError("%s: %s (is the apiserver reachable with this kubeconfig?)" % (what, exc)) from exc

    # the cluster's identity
    @property
    def server(self) -> str:
        return str(self.client.configuration.host)

    def namespace_uid(self, name: str) -> str:
        return str(self._plain(self._call("read Namespace %s" % name, self.core.read_namespace, name))
                   ["metadata"]["uid"])

    # nodes
    def get_node(self, name: str) -> Dict[str, Any]:
        return self._plain(self._call("read Node %s" % name, self.core.read_node, name))

    def find_node(self, name: str) -> Optional[Dict[str, Any]]:
        """The Node, or None when there is no such Node."""
        try:
            return self.get_node(name)
        except KubeError as exc:
            if exc.details.get("status") == 404:
                return None
            raise

    def list_nodes(self, timeout: Optional[float] = None) -> List[Dict[str, Any]]:
        return [self._plain(n) for n in self._call("list Nodes", self.core.list_node, _request_timeout=timeout).items]

    def metrics_text(self, timeout: Optional[float] = None) -> str:
        """The apiserver's own /metrics (Prometheus text); needs ``get`` on the non-resource URL /metrics."""
        return self._call("GET %s/metrics" % self.server, self._raw_get, "/metrics", timeout).decode("utf-8", "replace")

    SOAK_PROBE = ("kube-public", "gpufleet-soak-probe")

    def soak_probe(self, count: int, timeout: Optional[float] = None) -> None:
        """The control-plane soak's own requests, ``count`` of each verb class, that change nothing: GET of a
        ConfigMap that does not exist (404), LIST with limit 1, and a server-side dry-run create (admission and
        validation run, nothing is stored). Needs get, list and create on ConfigMaps in kube-public."""
        namespace, name = self.SOAK_PROBE
        for _round in range(count):
            try:
                self.core.read_namespaced_config_map(name, namespace, _request_timeout=timeout)
            except self.ApiException as exc:
                if exc.status != 404:
                    status, message = api_error(exc)
                    raise KubeError("GET %s ConfigMap %s/%s: HTTP %d %s" % (
                        self.server, namespace, name, status, message), status=status) from exc
            except Exception as exc:
                raise KubeError("GET %s ConfigMap %s/%s: %s" % (self.server, namespace, name, exc)) from exc
            self._call("LIST %s ConfigMaps in %s" % (self.server, namespace), self.core.list_namespaced_config_map,
                       namespace, limit=1, _request_timeout=timeout)
            self._call("dry-run create %s ConfigMap %s/%s" % (self.server, namespace, name),
                       self.core.create_namespaced_config_map, namespace, {"metadata": {"name": name}},
                       dry_run="All", _request_timeout=timeout)

    def raw_text(self, path: str, timeout: Optional[float] = None) -> str:
        """GET a non-resource path of this apiserver (/readyz, /version, /metrics) as text; an answer that is not
        2xx is a KubeError with its status and body."""
        return self._call("GET %s%s" % (self.server, path), self._raw_get, path, timeout).decode("utf-8", "replace")

    def _raw_get(self, path: str, timeout: Optional[float]) -> bytes:
        """GET a path no generated API method covers, with the connection's credentials. kubernetes 37
        (openapi-generator 7) split the old ``call_api`` into ``param_serialize`` and ``call_api(method, url)``;
        both shapes are handled (an execution environment may hold either)."""
        api = self.client
        if hasattr(api, "param_serialize"):
            method, url, headers, body, post = api.param_serialize("GET", path, auth_settings=["BearerToken"])
            response = api.call_api(method, url, headers, body, post, _request_timeout=timeout)
            response.read()
            if not 200 <= response.status <= 299:
                raise self.ApiException(http_resp=response)
            return bytes(response.data)
        old = api.call_api(path, "GET", auth_settings=["BearerToken"], _preload_content=False,
                           _return_http_data_only=True, _request_timeout=timeout)
        return bytes(old.data)

    def node_configz(self, name: str, timeout: Optional[float] = 30) -> str:
        """The node's kubelet's ``/configz`` answer (text) through the apiserver's node proxy - the apiserver
        reaches the kubelet at the address and port its Node reports, with its own kubelet client credentials.
        Needs ``get`` on ``nodes/proxy``."""
        try:
            response = self._call("GET /api/v1/nodes/%s/proxy/configz" % name,
                                  self.core.connect_get_node_proxy_with_path, name, "configz",
                                  _preload_content=False, _request_timeout=timeout)
        except KubeError as exc:
            status = exc.details.get("status")
            hint = ("the pipeline's identity needs get on nodes/proxy" if status == 403 else
                    "no such Node, or the kubelet does not serve /configz" if status == 404 else
                    "the apiserver did not answer" if not status else
                    "the apiserver could not reach the node's kubelet: is the kubelet running, and does the Node "
                    "report its address and port?")
            raise KubeError("the kubelet of %s did not answer /configz through the apiserver (%s): %s" % (
                name, hint, exc), status=status) from exc
        body = response.read() if callable(getattr(response, "read", None)) else response.data
        return (body or getattr(response, "data", b"") or b"").decode("utf-8", "replace")

    def patch_node(self, name: str, body: Dict[str, Any]) -> Dict[str, Any]:
        return self._plain(self._call("patch Node %s" % name, self.core.patch_node, name, body))

    # pods and PDBs
    def pods_on_node(self, node: str) -> List[Dict[str, Any]]:
        out = self._call("list pods on %s" % node, self.core.list_pod_for_all_namespaces,
                         field_selector="spec.nodeName=%s" % node)
        return [self._plain(p) for p in out.items]

    def pdbs(self, namespace: str) -> List[Dict[str, Any]]:
        out = self._call("list PodDisruptionBudgets in %s" % namespace,
                         self.policy.list_namespaced_pod_disruption_budget, namespace)
        return [self._plain(p) for p in out.items]

    def evict(self, namespace: str, name: str, grace: Optional[int]) -> Tuple[int, str]:
        """Ask the eviction API; (201, '') when accepted, else (status, message). 404: already gone."""
        from kubernetes import client
        body = client.V1Eviction(metadata=client.V1ObjectMeta(name=name, namespace=namespace),
                                 delete_options=None if grace is None else client.V1DeleteOptions(
                                     grace_period_seconds=grace))
        try:
            self.core.create_namespaced_pod_eviction(name, namespace, body)
        except self.ApiException as exc:
            return api_error(exc)
        return 201, ""

    def delete_pod(self, namespace: str, name: str, grace: Optional[int]) -> Tuple[int, str]:
        try:
            self.core.delete_namespaced_pod(name, namespace, grace_period_seconds=grace)
        except self.ApiException as exc:
            return api_error(exc)
        return 200, ""

    def pod_exists(self, namespace: str, name: str, uid: str) -> bool:
        try:
            pod = self.core.read_namespaced_pod(name, namespace)
        except self.ApiException as exc:
            if exc.status == 404:
                return False
            raise
        meta = pod.metadata
        return meta is not None and meta.uid == uid

    # custom resources (JobSet, Kueue Workload)
    def workload_images(self) -> List[Dict[str, Any]]:
        """Every namespace's DaemonSets, Deployments and StatefulSets, reduced to kind, namespace, name and the pod
        template's container images: nothing else of the templates (their environment may hold secrets)."""
        from kubernetes import client
        apps = client.AppsV1Api(self.client)
        out: List[Dict[str, Any]] = []
        for kind, fn in (("DaemonSet", apps.list_daemon_set_for_all_namespaces),
                         ("Deployment", apps.list_deployment_for_all_namespaces),
                         ("StatefulSet", apps.list_stateful_set_for_all_namespaces)):
            for obj in self._call("list %ss" % kind, fn).items:
                pod = obj.spec.template.spec
                images = [{"image": c.image} for c in list(pod.init_containers or []) + list(pod.containers or [])]
                meta = {"namespace": obj.metadata.namespace, "name": obj.metadata.name}
                out.append({"kind": kind, "metadata": meta, "spec": {"template": {"spec": {"containers": images}}}})
        return out

    # what the security checks read (plain dicts; Secrets reduced to metadata and type)
    def server_version(self, timeout: Optional[float] = None) -> str:
        from kubernetes import client
        return str(self._call("read the apiserver version at %s" % self.server, client.VersionApi(self.client).get_code,
                              _request_timeout=timeout).git_version)

    def namespaces(self) -> List[Dict[str, Any]]:
        return [self._plain(n) for n in self._call("list Namespaces", self.core.list_namespace).items]

    def rbac(self) -> Tuple[List[Dict[str, Any]], ...]:
        """(ClusterRoles, ClusterRoleBindings, Roles, RoleBindings) - the last two of every namespace."""
        from kubernetes import client
        rbac = client.RbacAuthorizationV1Api(self.client)
        return tuple([self._plain(r) for r in self._call("list %s" % what, fn).items] for what, fn in (
            ("ClusterRoles", rbac.list_cluster_role), ("ClusterRoleBindings", rbac.list_cluster_role_binding),
            ("Roles", rbac.list_role_for_all_namespaces),
            ("RoleBindings", rbac.list_role_binding_for_all_namespaces)))

    def secrets_of_type(self, secret_type: str) -> List[Dict[str, Any]]:
        """Secrets of one type: namespace, name, uid, labels and the service-account annotation only - their data
        (and annotations such as kubectl's last-applied-configuration, which can hold it) never leave this method."""
        out = self._call("list Secrets of type %s" % secret_type, self.core.list_secret_for_all_namespaces,
                         field_selector="type=%s" % secret_type)
        keep = "kubernetes.io/service-account.name"

        def reduced(meta: Any) -> Dict[str, Any]:
            notes = meta.annotations or {}
            return {"namespace": meta.namespace, "name": meta.name, "uid": meta.uid, "labels": dict(meta.labels or {}),
                    "annotations": {keep: notes[keep]} if keep in notes else {}}
        return [{"type": s.type, "metadata": reduced(s.metadata)} for s in out.items]

    def helm_release_secrets(self) -> List[Dict[str, Any]]:
        """Every Helm 3 release Secret (label owner=helm, any status), data included: their manifests are what a
        mapping rewrites. Callers keep the data out of every result."""
        out = self._call("list Helm release Secrets", self.core.list_secret_for_all_namespaces,
                         field_selector="type=helm.sh/release.v1", label_selector="owner=helm")
        return [self._plain(s) for s in out.items]

    def upgrade_blocker_objects(self) -> Dict[str, List[Dict[str, Any]]]:
        """What the cluster checks judge (module_utils/cluster_checks): every validating and mutating webhook
        configuration, CustomResourceDefinition, EndpointSlice and PodDisruptionBudget."""
        from kubernetes import client
        admission = client.AdmissionregistrationV1Api(self.client)
        discovery = client.DiscoveryV1Api(self.client)
        crds = client.ApiextensionsV1Api(self.client)

        def items(what: str, fn: Any) -> List[Dict[str, Any]]:
            return [self._plain(o) for o in self._call("list %s" % what, fn).items]
        hooks = (items("ValidatingWebhookConfigurations", admission.list_validating_webhook_configuration)
                 + items("MutatingWebhookConfigurations", admission.list_mutating_webhook_configuration))
        return {"webhook_configurations": hooks,
                "crds": items("CustomResourceDefinitions", crds.list_custom_resource_definition),
                "endpointslices": items("EndpointSlices", discovery.list_endpoint_slice_for_all_namespaces),
                "pdbs": items("PodDisruptionBudgets", self.policy.list_pod_disruption_budget_for_all_namespaces)}

    def patch_secret(self, namespace: str, name: str, body: Dict[str, Any]) -> None:
        self._call("patch Secret %s/%s" % (namespace, name), self.core.patch_namespaced_secret, name, namespace, body)

    def create_secret(self, body: Dict[str, Any]) -> None:
        meta = body["metadata"]
        self._call("create Secret %s/%s" % (meta["namespace"], meta["name"]), self.core.create_namespaced_secret,
                   meta["namespace"], body)

    def network_policies(self) -> List[Dict[str, Any]]:
        from kubernetes import client
        net = client.NetworkingV1Api(self.client)
        return [self._plain(p) for p in self._call("list NetworkPolicies",
                                                   net.list_network_policy_for_all_namespaces).items]

    def read_config_map(self, namespace: str, name: str) -> Optional[Dict[str, Any]]:
        """The ConfigMap, or None when there is none."""
        try:
            return self._plain(self._call("read ConfigMap %s/%s" % (namespace, name),
                                          self.core.read_namespaced_config_map, name, namespace))
        except KubeError as exc:
            if exc.details.get("status") == 404:
                return None
            raise

    def put_config_map(self, namespace: str, name: str, data: Dict[str, str], labels: Dict[str, str]) -> None:
        """Create the ConfigMap, or replace its data and labels."""
        body = {"metadata": {"name": name, "namespace": namespace, "labels": labels}, "data": data}
        if self.read_config_map(namespace, name) is None:
            self._call("create ConfigMap %s/%s" % (namespace, name), self.core.create_namespaced_config_map,
                       namespace, body)
        else:
            self._call("replace ConfigMap %s/%s" % (namespace, name), self.core.replace_namespaced_config_map,
                       name, namespace, body)

    def dry_run_pod(self, namespace: str, body: Dict[str, Any]) -> Tuple[int, str]:
        """Create a pod as a server-side dry run (admission runs, nothing is stored): (201, '') when admitted,
        else (status, message); a connection failure is status 0."""
        try:
            self.core.create_namespaced_pod(namespace, body, dry_run="All")
        except self.ApiException as exc:
            return api_error(exc)
        except Exception as exc:  # urllib3 errors: the probe could not be made
            return 0, str(exc)
        return 201, ""

    def patch_namespace(self, name: str, body: Dict[str, Any]) -> Dict[str, Any]:
        return self._plain(self._call("patch Namespace %s" % name, self.core.patch_namespace, name, body))

    def list_custom(self, gvr: Tuple[str, str, str], namespace: Optional[str] = None,
                    label_selector: str = "") -> List[Dict[str, Any]]:
        """The objects of ``gvr``; none when the API is not served (its CRD is not installed)."""
        return self.list_custom_served(gvr, namespace, label_selector) or []

    def list_custom_served(self, gvr: Tuple[str, str, str], namespace: Optional[str] = None,
                           label_selector: str = "") -> Optional[List[Dict[str, Any]]]:
        """The objects of ``gvr``, None when the API is not served (404: its CRD is gone), so a reading can tell
        "no such objects" from "the API is gone"."""
        group, version, plural = gvr
        try:
            if namespace:
                out = self.custom.list_namespaced_custom_object(group, version, namespace, plural,
                                                                label_selector=label_selector)
            else:
                out = self.custom.list_cluster_custom_object(group, version, plural, label_selector=label_selector)
        except self.ApiException as exc:
            if exc.status == 404:  # the CRD is not installed: not served
                return None
            status, message = api_error(exc)
            raise KubeError("list %s.%s: HTTP %d %s" % (plural, group, status, message)) from exc
        return list(out.get("items", [])) if isinstance(out, dict) else []

    def get_custom(self, gvr: Tuple[str, str, str], namespace: str, name: str) -> Dict[str, Any]:
        group, version, plural = gvr
        return dict(self._call("read %s %s/%s" % (plural, namespace, name),
                               self.custom.get_namespaced_custom_object, group, version, namespace, plural, name))

    def patch_custom(self, gvr: Tuple[str, str, str], namespace: str, name: str,
                     body: Dict[str, Any]) -> Dict[str, Any]:
        group, version, plural = gvr
        return dict(self._call("patch %s %s/%s" % (plural, namespace, name),
                               self.custom.patch_namespaced_custom_object, group, version, namespace, plural, name,
                               body))

    # generic objects through the dynamic client (kinds gpufleet creates: canary workloads)
    def _resource(self, api_version: str, kind: str) -> Any:
        if self._dynamic is None:
            from kubernetes import dynamic
            self._dynamic = self._call("discover the API", dynamic.DynamicClient, self.client)
        from kubernetes.dynamic.exceptions import ResourceNotFoundError
        try:
            return self._dynamic.resources.get(api_version=api_version, kind=kind)
        except ResourceNotFoundError as exc:
            raise KubeError("%s %s is not served by this cluster (is its CRD installed?)" % (
                api_version, kind)) from exc

    def get_object(self, api_version: str, kind: str, namespace: str, name: str) -> Optional[Dict[str, Any]]:
        """The object, or None when there is none."""
        res = self._resource(api_version, kind)
        try:
            return dict(self._call("read %s %s/%s" % (kind, namespace, name), res.get, name=name,
                                   namespace=namespace).to_dict())
        except KubeError as exc:
            if exc.details.get("status") == 404:
                return None
            raise

    def create_object(self, body: Dict[str, Any], dry_run: bool = False) -> Dict[str, Any]:
        """Create the object; with ``dry_run`` as a server-side dry run (validation, admission, RBAC; nothing is
        stored)."""
        meta = body["metadata"]
        res = self._resource(body["apiVersion"], body["kind"])
        extra = {"dry_run": "All"} if dry_run else {}
        return dict(self._call("%screate %s %s/%s" % ("dry-run " if dry_run else "", body["kind"],
                                                      meta.get("namespace"), meta["name"]),
                               res.create, body=body, namespace=meta.get("namespace"), **extra).to_dict())

    def delete_object(self, api_version: str, kind: str, namespace: str, name: str) -> bool:
        """Delete the object and, in the background, what it owns; False when it was already gone."""
        res = self._resource(api_version, kind)
        try:
            self._call("delete %s %s/%s" % (kind, namespace, name), res.delete, name=name, namespace=namespace,
                       body={"propagationPolicy": "Background"})
        except KubeError as exc:
            if exc.details.get("status") == 404:
                return False
            raise
        return True

    def list_pods(self, namespace: str, selector: str) -> List[Dict[str, Any]]:
        return [self._plain(p) for p in self._call("list pods %s in %s" % (selector, namespace),
                                                   self.core.list_namespaced_pod, namespace,
                                                   label_selector=selector).items]

    def ensure_namespace(self, name: str, labels: Dict[str, str]) -> bool:
        """Create the namespace when it is missing (True); an existing one is left as it is."""
        try:
            self._call("read Namespace %s" % name, self.core.read_namespace, name)
            return False
        except KubeError as exc:
            if exc.details.get("status") != 404:
                raise
        self._call("create Namespace %s" % name, self.core.create_namespace,
                   {"metadata": {"name": name, "labels": labels}})
        return True


def connect(module: Any, host: Optional[str] = None) -> Kube:
    """A Kube for a module's connection options and the K8S_AUTH_* variables, read as kubernetes.core reads them
    (same options, same precedence), without its fall-back to the in-cluster service account. ``host``: one
    apiserver of the cell instead of the kubeconfig's server (same credentials)."""
    if k8s_client is None:
        raise KubeError("the collection kubernetes.core is missing: ansible-galaxy collection install kubernetes.core")
    auth = auth_source(k8s_client._create_auth_spec(module),
                       default_kubeconfig(dict(os.environ), os.path.expanduser("~")))
    if host:
        auth = dict(auth, host=host)
    return Kube(auth, k8s_client._create_headers(module))


def judge_identity(cell: str, expected: Optional[str], uid: str, server: str) -> str:
    """The API server must be the cell's: its kube-system Namespace UID (set when the cluster was created, never
    reused) must equal the one recorded in the inventory (``gpufleet_cluster_uid``). Missing is a refusal too, and
    says what to record."""
    if not expected:
        raise KubeError("gpufleet_cluster_uid: not recorded for cell %s. The API server %s has kube-system UID %s; "
                        "if that is the cell's cluster, record it in the cell's inventory (gpufleet_cluster_uid: %s) "
                        "and run again. Nothing was changed." % (cell, server, uid, uid), uid=uid, server=server)
    if expected != uid:
        raise KubeError("the API server %s is not cell %s's: its kube-system UID is %s, the inventory records %s "
                        "(gpufleet_cluster_uid). Check the kubeconfig/context or K8S_AUTH_* settings of this run - "
                        "they point at another cluster. Nothing was changed." % (server, cell, uid, expected),
                        uid=uid, server=server)
    return uid


def now_rfc3339() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
