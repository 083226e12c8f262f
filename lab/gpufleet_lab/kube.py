"""Kubernetes objects of the lab: Node objects for the hosts, the Kueue and JobSet CRDs."""
from __future__ import annotations

import glob
import os
import pathlib
import subprocess
import time
from typing import Any, Dict, List, Optional

import yaml
from kubernetes import client, config, dynamic
from kubernetes.client.rest import ApiException

from gpufleet_lab.config import LabConfig
from gpufleet_lab.procs import LabError

KUEUE_VERSION = "v0.17.0"
JOBSET_VERSION = "v0.11.1"  # the JobSet release Kueue v0.17.0 builds against


def tolerate(status: int, call: Any, *args: Any, **kwargs: Any) -> Any:
    """Run an API call that may answer ``status`` harmlessly (409: already exists, 404: already gone)."""
    try:
        return call(*args, **kwargs)
    except ApiException as exc:
        if exc.status != status:
            raise
        return None


def api(cfg: LabConfig, user: str = "admin") -> client.ApiClient:
    return config.new_client_from_config(str(cfg.run / "kubeconfigs" / (user + ".conf")))


def cluster_uid(cfg: LabConfig) -> str:
    """The kube-system Namespace UID: the identity the lab's inventory records for its cell."""
    return str(client.CoreV1Api(api(cfg)).read_namespace("kube-system").metadata.uid)


def node_object(cfg: LabConfig, host: str, kubelet: str) -> Dict[str, Any]:
    cp = host in cfg.control_plane
    labels = {"kubernetes.io/hostname": host, "kubernetes.io/os": "linux", "type": "kwok",
              "gpufleet.io/lab": "true"}
    capacity = {"cpu": "32", "memory": "256Gi", "pods": "110"}
    taints = []
    if cp:
        labels["node-role.kubernetes.io/control-plane"] = ""
        labels["gpufleet.io/pool"] = "control-plane"
        taints = [{"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}]
    else:
        rack_set = cfg.rack_set_of(host)
        labels.update({"gpufleet.io/pool": "h100-train", "gpufleet.io/rack-set": rack_set,
                       "gpufleet.io/rail-group": "rail-%d" % (sorted(cfg.rack_sets).index(rack_set) + 1),
                       "nvidia.com/gpu.product": cfg.gpu_product, "nvidia.com/gpu.count": str(cfg.gpus_per_node)})
        capacity = {"cpu": "224", "memory": "2Ti", "pods": "110", "nvidia.com/gpu": str(cfg.gpus_per_node)}
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": host, "labels": labels,
                         "annotations": {"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"}},
            "spec": {"taints": taints},
            "status": {"capacity": capacity, "allocatable": dict(capacity), **node_endpoint(cfg, host),
                       "nodeInfo": {"kubeletVersion": kubelet, "kubeProxyVersion": kubelet,
                                    "containerRuntimeVersion": "containerd://1.7.27",
                                    "kernelVersion": "6.8.0-85-generic", "osImage": "Debian GNU/Linux 12 (bookworm)",
                                    "operatingSystem": "linux", "architecture": "amd64",
                                    "bootID": "lab-%s" % host, "machineID": "lab-%s" % host,
                                    "systemUUID": "lab-%s" % host}}}


def ensure_kubeadm_rbac(cfg: LabConfig) -> None:
    """What `kubeadm init` binds for the apiserver's client certificate to kubelets (pki.KUBELET_CLIENT): the group
    kubeadm:cluster-admins to cluster-admin, as in kubeadm's own code (plugins/module_utils/data_rbac.py)."""
    rbac = client.RbacAuthorizationV1Api(api(cfg))
    tolerate(409, rbac.create_cluster_role_binding, {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": "kubeadm:cluster-admins"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "kubeadm:cluster-admins"}]})


def node_endpoint(cfg: LabConfig, host: str) -> Dict[str, Any]:
    """Where the host's kubelet answers, as a kubelet reports it in its Node's status: its address on the lab's
    bridge (network.py) and its port."""
    return {"addresses": [{"type": "InternalIP", "address": cfg.node_address(host)},
                          {"type": "Hostname", "address": host}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": cfg.ports["kubelet"]}}}


def ensure_nodes(cfg: LabConfig, kubelets: Dict[str, str]) -> None:
    core = client.CoreV1Api(api(cfg))
    for host in cfg.hosts:
        made = tolerate(409, core.create_node, node_object(cfg, host, kubelets[host]))
        if made is None:  # a Node made before the lab's bridge (or moved): its kubelet's address again
            want = node_endpoint(cfg, host)
            have = core.api_client.sanitize_for_serialization(core.read_node_status(host).status)
            if have.get("addresses") != want["addresses"] or have.get("daemonEndpoints") != want["daemonEndpoints"]:
                core.patch_node_status(host, {"status": want})


def wait_nodes_ready(cfg: LabConfig, timeout: float = 120) -> None:
    core = client.CoreV1Api(api(cfg))
    deadline = time.time() + timeout
    pending: List[str] = list(cfg.hosts)
    while time.time() < deadline:
        pending = []
        for node in core.list_node(label_selector="gpufleet.io/lab=true").items:
            ready = any(c.type == "Ready" and c.status == "True" for c in (node.status.conditions or []))
            if not ready:
                pending.append(node.metadata.name)
        if not pending:
            return
        time.sleep(1)
    raise LabError("nodes not Ready after %ds: %s (is KWOK running? see its log)" % (timeout, ", ".join(pending)))


def set_kubelet_version(cfg: LabConfig, host: str, version: str) -> None:
    core = client.CoreV1Api(api(cfg, "lab-controller"))
    core.patch_node_status(host, {"status": {"nodeInfo": {"kubeletVersion": version, "kubeProxyVersion": version}}})


def set_allocatable_gpus(cfg: LabConfig, host: str, gpus: int) -> None:
    core = client.CoreV1Api(api(cfg, "lab-controller"))
    node = core.read_node(host)
    if (node.status.allocatable or {}).get("nvidia.com/gpu") == str(gpus):
        return
    core.patch_node_status(host, {"status": {"allocatable": {"nvidia.com/gpu": str(gpus)},
                                             "capacity": {"nvidia.com/gpu": str(gpus)}}})


def crd_files(cfg: LabConfig) -> List[pathlib.Path]:
    """Kueue and JobSet CRD manifests from their Go modules (downloaded once into the lab's module cache)."""
    env = dict(os.environ, GOTOOLCHAIN="local", GOMODCACHE=str(cfg.cache / "gomod"), GOFLAGS="-mod=mod")
    files: List[pathlib.Path] = []
    for module, version, sub in (("sigs.k8s.io/kueue", KUEUE_VERSION, "config/components/crd/bases"),
                                 ("sigs.k8s.io/jobset", JOBSET_VERSION, "config/components/crd/bases")):
        moddir = cfg.cache / "gomod" / ("%s@%s" % (module, version))
        if not moddir.is_dir():
            proc = subprocess.run(["go", "mod", "download", "%s@%s" % (module, version)], env=env, cwd="/",
                                  capture_output=True, text=True, check=False)
            if proc.returncode != 0:
                raise LabError("go mod download %s@%s failed: %s" % (module, version, proc.stderr.strip()))
        files += [pathlib.Path(p) for p in sorted(glob.glob(str(moddir / sub / "*.yaml")))]
    return files


def ensure_crds(cfg: LabConfig) -> int:
    dyn = dynamic.DynamicClient(api(cfg))
    crds = dyn.resources.get(api_version="apiextensions.k8s.io/v1", kind="CustomResourceDefinition")
    count = 0
    for path in crd_files(cfg):
        for doc in yaml.safe_load_all(path.read_text()):
            if not doc or doc.get("kind") != "CustomResourceDefinition":
                continue
            # Kueue's conversion webhook needs its controller; the lab serves the storage version only.
            doc["spec"].pop("conversion", None)
            tolerate(409, crds.create, body=doc)
            count += 1
    deadline = time.time() + 60
    while time.time() < deadline:
        established = [c for c in crds.get().items if any(
            cond.type == "Established" and cond.status == "True" for cond in (c.status.conditions or []))]
        if len(established) >= count:
            return count
        time.sleep(0.5)
    raise LabError("CRDs not Established within 60 s")


def ensure_training(cfg: LabConfig) -> None:
    """Namespace `training` with the lab's training gang (a JobSet and its Kueue Workload)."""
    from gpufleet_lab import training
    tolerate(409, client.CoreV1Api(api(cfg)).create_namespace, {"metadata": {"name": training.NS}})
    dyn = dynamic.DynamicClient(api(cfg))
    uid = ""
    for obj in training.sample_objects(cfg.gpus_per_node):
        res = dyn.resources.get(api_version=obj["apiVersion"], kind=obj["kind"])
        if obj["kind"] == "Workload" and uid:  # as Kueue labels the Workload it makes for a job: the job's UID
            obj["metadata"]["labels"]["kueue.x-k8s.io/job-uid"] = uid
        tolerate(409, res.create, body=obj, namespace=training.NS)
        if obj["kind"] == "JobSet":
            uid = res.get(name=obj["metadata"]["name"], namespace=training.NS).metadata.uid


# The addons the lab makes itself, as objects: what a real cell's preflight reads to detect addons (the workloads'
# images). CoreDNS and kube-proxy are kubeadm's own (kubeadm.init_addons). The controllers are pinned to the
# control-plane nodes (in the lab their pods are KWOK's and the lab controller does Kueue's and JobSet's work;
# pinned there they do not join the GPU nodes' drains, which the wave tests count).


POLICY_CONTROLLER_IMAGE = "ghcr.io/sigstore/policy-controller/policy-controller:v0.10.0"


def addon_objects(cfg: LabConfig) -> List[Dict[str, Any]]:
    on_control_plane = {"nodeSelector": {"node-role.kubernetes.io/control-plane": ""},
                        "tolerations": [{"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}]}

    def workload(kind: str, namespace: str, name: str, image: str, replicas: int = 1,
                 pod: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
        labels = {"app.kubernetes.io/name": name, "gpufleet.io/lab-addon": "true"}
        spec: Dict[str, Any] = {"selector": {"matchLabels": labels}, "template": {
            "metadata": {"labels": labels},
            "spec": dict(pod or on_control_plane, containers=[{"name": name, "image": image}])}}
        if kind == "Deployment":
            spec["replicas"] = replicas
        return {"apiVersion": "apps/v1", "kind": kind, "metadata": {"name": name, "namespace": namespace,
                                                                    "labels": labels}, "spec": spec}
    return [  # CoreDNS and kube-proxy are kubeadm's own (kubeadm.init_addons)
        workload("Deployment", "kueue-system", "kueue-controller-manager",
                 "registry.k8s.io/kueue/kueue:%s" % KUEUE_VERSION),
        workload("Deployment", "jobset-system", "jobset-controller-manager",
                 "registry.k8s.io/jobset/jobset:%s" % JOBSET_VERSION),
        # an addon the shipped matrix does not know: the lab inventory defines it (gpufleet_addons) and gives its row
        workload("Deployment", "cosign-system", "policy-controller-webhook", POLICY_CONTROLLER_IMAGE),
    ]


def ensure_addons(cfg: LabConfig) -> List[str]:
    core, apps = client.CoreV1Api(api(cfg)), client.AppsV1Api(api(cfg))
    made = []
    for obj in addon_objects(cfg):
        namespace = obj["metadata"]["namespace"]
        tolerate(409, core.create_namespace, {"metadata": {"name": namespace}})
        create = apps.create_namespaced_daemon_set if obj["kind"] == "DaemonSet" else \
            apps.create_namespaced_deployment
        tolerate(409, create, namespace, obj)
        made.append("%s %s" % (obj["metadata"]["name"], obj["spec"]["template"]["spec"]["containers"][0]["image"]))
    return made


# Security the wave must keep (docs/reference.md section 11): Pod Security levels pinned to a minor, an image
# policy in `inference` (a ValidatingAdmissionPolicy that admits only digests from the lab's registry - a real cell
# has its policy engine's signature check), NetworkPolicies around the training gang, Cilium as the CNI that
# enforces them (a DaemonSet whose pods are KWOK's: the lab has no pod network), and one legacy token Secret.
SIGNED_POLICY = "gpufleet-lab-signed-images"
LAB_REGISTRY = "registry.lab.example/"
CILIUM_IMAGE = "quay.io/cilium/cilium:v1.19.3"
PSA_PINNED = "v1.35"  # the minor the lab's namespaces are pinned to (the lab's `from` minor)


def security_objects(cfg: LabConfig) -> List[Dict[str, Any]]:
    from gpufleet_lab import training
    psa = "pod-security.kubernetes.io/"
    images_ok = "c.image.startsWith('%s') && c.image.contains('@sha256:')" % LAB_REGISTRY
    match = {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"],
                                "resources": ["pods"]}]}
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": training.NS, "labels": {
            psa + "enforce": "baseline", psa + "enforce-version": PSA_PINNED}}},
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "inference", "labels": {
            psa + "enforce": "restricted", psa + "enforce-version": PSA_PINNED,
            "gpufleet.io/image-policy": "signed"}}},
        {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
         "metadata": {"name": SIGNED_POLICY},
         "spec": {"failurePolicy": "Fail", "matchConstraints": match, "validations": [{
             "expression": "object.spec.containers.all(c, %s) && (!has(object.spec.initContainers) || "
                           "object.spec.initContainers.all(c, %s))" % (images_ok, images_ok),
             "message": "images must come from %s by digest (%s)" % (LAB_REGISTRY, SIGNED_POLICY)}]}},
        {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
         "metadata": {"name": SIGNED_POLICY},
         "spec": {"policyName": SIGNED_POLICY, "validationActions": ["Deny"], "matchResources": {
             "namespaceSelector": {"matchLabels": {"gpufleet.io/image-policy": "signed"}}}}},
        {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
         "metadata": {"name": "default-deny-ingress", "namespace": training.NS},
         "spec": {"podSelector": {}, "policyTypes": ["Ingress"]}},
        {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
         "metadata": {"name": "allow-gang", "namespace": training.NS},
         "spec": {"podSelector": {}, "policyTypes": ["Ingress"], "ingress": [{"from": [{"podSelector": {}}]}]}},
        {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "cilium", "namespace": "kube-system",
                                                                    "labels": {"gpufleet.io/lab-addon": "true"}},
         "spec": {"selector": {"matchLabels": {"k8s-app": "cilium"}}, "template": {
             "metadata": {"labels": {"k8s-app": "cilium"}},
             "spec": {"tolerations": [{"operator": "Exists"}],
                      "containers": [{"name": "cilium-agent", "image": CILIUM_IMAGE}]}}}},
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "legacy-ci", "namespace": training.NS}},
        # the identity the lab's AWX jobs use (tests/lab/awx_job.py asks a token for it), bound before any window
        {"apiVersion": "v1", "kind": "ServiceAccount",
         "metadata": {"name": "gpufleet-awx", "namespace": "kube-system"}},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
         "metadata": {"name": "gpufleet-awx"},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
         "subjects": [{"kind": "ServiceAccount", "name": "gpufleet-awx", "namespace": "kube-system"}]},
        # a team's admin in its namespace, as every cell has: admin grown by aggregation is a new grant to it
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
         "metadata": {"name": "team-admin", "namespace": training.NS},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "admin"},
         "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "lab-team-lead"}]},
        {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/service-account-token",
         "metadata": {"name": "legacy-ci-token", "namespace": training.NS,
                      "annotations": {"kubernetes.io/service-account.name": "legacy-ci"}}},
    ]


def ensure_security(cfg: LabConfig) -> List[str]:
    """Create the security objects (server-side apply: a `lab up` on an existing lab puts them back as they
    were - the security tests break them on purpose)."""
    dyn = dynamic.DynamicClient(api(cfg))
    made = []
    for obj in security_objects(cfg):
        res = dyn.resources.get(api_version=obj["apiVersion"], kind=obj["kind"])
        namespace = obj["metadata"].get("namespace")
        if obj["kind"] == "Secret":  # the token controller fills it; apply would fight over its data
            tolerate(409, res.create, body=obj, namespace=namespace)
        else:
            res.server_side_apply(body=obj, namespace=namespace, field_manager="gpufleet-lab", force_conflicts=True)
        made.append("%s %s" % (obj["kind"], obj["metadata"]["name"]))
    return made
