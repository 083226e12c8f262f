"""What real kubeadm reads from a cluster it manages, kept true by the lab at every step (docs/reference.md section 2).

`kubeadm upgrade plan` (and `upgrade apply --dry-run`) on a control-plane host read:
- the `kubeadm-config` ConfigMap's ClusterConfiguration (here: external etcd, the lab's certificate paths as the
  hosts mount them, `kubernetesVersion` the cluster's version: the newest apiserver, as `upgrade apply` records it)
  and the `kubelet-config` ConfigMap, both uploaded by the real kubeadm of the cluster's version (`kubeadm init
  phase upload-config all`, `upload_config`), with the Roles that let nodes read them - so a worker's real `kubeadm
  upgrade node` reads them with its node credentials, as on a real cell;
- the `kube-proxy` ConfigMap (a component config whose version plan reports);
- the `coredns` ConfigMap and Deployment, and the `kube-proxy` DaemonSet (kube.addon_objects), found by their
  `k8s-app` labels;
- the mirror pods of the control-plane static pods (`kube-apiserver-HOST` ... in kube-system, labels `component`
  and `tier: control-plane`, the running version's image, the apiserver's advertise-address annotation): plan's
  per-node CURRENT column is read from their images. A kubelet makes these from the host's static pod manifests;
  the lab has no kubelet, so the lab writes them (SIMULATION of the kubelet's mirror pods) and replaces each one
  when its component switches version (`sync`, at `lab up` and by the lab controller after every switch);
- the static pod manifests on the host (`/etc/kubernetes/manifests/*.yaml`, written here into the host's state
  directory, which `lab up` mounts there on control-plane hosts).

And what kubeadm's addon phase leaves (`addon_phase`): since 1.28 `upgrade apply` or `upgrade node` moves
kube-proxy and CoreDNS once every kube-apiserver runs the target - kube-proxy to the target's version, CoreDNS to
the version that kubeadm pins. The lab's simulated apply/node skip the phase (SIMULATION), so `sync` makes its
result, asking the real kubeadm at that version for its images (`kubeadm config images list`).
"""
from __future__ import annotations

import hashlib
import json
import pathlib
import socket
import subprocess
import time
from typing import Any, Dict, List

import yaml
from kubernetes import client

from gpufleet_lab import cluster, kube
from gpufleet_lab.config import LabConfig
from gpufleet_lab.procs import LabError

POD_SUBNET = "10.244.0.0/16"
SERVICE_SUBNET = "10.96.0.0/16"  # the apiservers' --service-cluster-ip-range
ADVERTISE = "kubeadm.kubernetes.io/kube-apiserver.advertise-address.endpoint"
CRI_SOCKET = "kubeadm.alpha.kubernetes.io/cri-socket"
CONTAINERD = "unix:///var/run/containerd/containerd.sock"
COREFILE = """.:53 {
    errors
    health {
       lameduck 5s
    }
    ready
    kubernetes cluster.local in-addr.arpa ip6.arpa {
       pods insecure
       fallthrough in-addr.arpa ip6.arpa
       ttl 30
    }
    prometheus :9153
    forward . /etc/resolv.conf {
       max_concurrent 1000
    }
    cache 30
    loop
    reload
    loadbalance
}
"""


def host_address() -> str:
    """The lab machine's own IPv4 address on its default route (the hosts share its network). The apiservers bind
    127.0.0.1, but kubeadm refuses a loopback advertise address (it then looks for another address on `lo`), so
    the mirror pod's advertise annotation names this one; 192.0.2.10 (a documentation address) on a machine with
    no default route. No packet is sent: a UDP socket's connect only picks the route."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))
            address = str(probe.getsockname()[0])
        except OSError:
            return "192.0.2.10"
    return "192.0.2.10" if address.startswith("127.") or address == "0.0.0.0" else address


def cluster_configuration(cfg: LabConfig, version: str) -> Dict[str, Any]:
    """The ClusterConfiguration kubeadm would have uploaded for this cell (v1beta4, kubeadm 1.31+)."""
    return {"apiVersion": "kubeadm.k8s.io/v1beta4", "kind": "ClusterConfiguration",
            "kubernetesVersion": version, "clusterName": cfg.cell,
            "controlPlaneEndpoint": "127.0.0.1:%d" % cfg.ports["apiserver_lb"],
            "certificatesDir": "/etc/kubernetes/pki", "imageRepository": "registry.k8s.io",
            "encryptionAlgorithm": "RSA-2048", "caCertificateValidityPeriod": "87600h0m0s",
            "certificateValidityPeriod": "8760h0m0s",
            "etcd": {"external": {"endpoints": ["https://127.0.0.1:%d" % cfg.ports["etcd"]],
                                  "caFile": "/etc/kubernetes/pki/ca.crt",
                                  "certFile": "/etc/kubernetes/pki/etcd-client.crt",
                                  "keyFile": "/etc/kubernetes/pki/etcd-client.key"}},
            "networking": {"dnsDomain": "cluster.local", "serviceSubnet": SERVICE_SUBNET, "podSubnet": POD_SUBNET},
            "apiServer": {}, "controllerManager": {}, "scheduler": {}, "dns": {}, "proxy": {}}


# The cluster-wide kubelet settings the lab's kubeadm config gives (kubeadm adds its own defaults): the lab machine
# runs cgroup v1 (hybrid), which a kubelet of 1.35 or newer refuses unless told, as a real kubelet on it would.
KUBELET_SETTINGS = {"apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration",
                    "cgroupDriver": "systemd", "failCgroupV1": False}


def kubeadm_config(cfg: LabConfig, version: str) -> str:
    """The kubeadm configuration file the cell was made with (InitConfiguration, ClusterConfiguration and the
    cluster's KubeletConfiguration), as `kubeadm init --config` takes it."""
    init = {"apiVersion": "kubeadm.k8s.io/v1beta4", "kind": "InitConfiguration",
            "nodeRegistration": {"name": cfg.control_plane[0], "criSocket": CONTAINERD}}
    return yaml.safe_dump_all([init, cluster_configuration(cfg, version), KUBELET_SETTINGS], sort_keys=False)


def upload_config(cfg: LabConfig, version: str) -> str:
    """The real kubeadm of ``version`` uploads kubeadm-config and kubelet-config and the Roles nodes read them with
    (`kubeadm init phase upload-config all`, as `kubeadm init` and `upgrade apply` do); returns its output."""
    path = cfg.run / "kubeadm-config.yaml"
    path.write_text(kubeadm_config(cfg, version))
    kubeadm = cfg.bin_dir("kubernetes", version) / "kubeadm"
    proc = subprocess.run([str(kubeadm), "init", "phase", "upload-config", "all", "--config", str(path),
                           "--kubeconfig", str(cfg.run / "kubeconfigs" / "admin.conf")],
                          capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise LabError("kubeadm %s init phase upload-config all failed (%d): %s" % (
            version, proc.returncode, (proc.stderr or proc.stdout).strip()[-1500:]))
    return proc.stdout


def config_maps(cfg: LabConfig, version: str) -> List[Dict[str, Any]]:
    proxy = {"apiVersion": "kubeproxy.config.k8s.io/v1alpha1", "kind": "KubeProxyConfiguration",
             "clusterCIDR": POD_SUBNET, "mode": "iptables",
             "clientConnection": {"kubeconfig": "/var/lib/kube-proxy/kubeconfig.conf"}}

    def cm(name: str, data: Dict[str, str]) -> Dict[str, Any]:
        return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "kube-system"},
                "data": data}
    return [cm("kube-proxy", {"config.conf": yaml.safe_dump(proxy)}),
            cm("coredns", {"Corefile": COREFILE})]


def static_pod(cfg: LabConfig, component: str, host: str, version: str) -> Dict[str, Any]:
    """The static pod manifest of ``component`` on ``host`` at ``version`` (what kubeadm writes)."""
    annotations = {}
    if component == "kube-apiserver":
        annotations[ADVERTISE] = "%s:%d" % (host_address(), cfg.apiserver_port(host))
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": component, "namespace": "kube-system", "annotations": annotations,
                         "labels": {"component": component, "tier": "control-plane"}},
            "spec": {"hostNetwork": True, "priorityClassName": "system-node-critical",
                     "containers": [{"name": component, "image": "registry.k8s.io/%s:%s" % (component, version),
                                     "command": [component]}]}}


def mirror_pod(cfg: LabConfig, component: str, host: str, version: str) -> Dict[str, Any]:
    """The kubelet's mirror of a static pod: named COMPONENT-HOST, bound to the host's Node, with the config hash
    annotations a kubelet sets (SIMULATION: the lab has no kubelet)."""
    pod = static_pod(cfg, component, host, version)
    digest = hashlib.sha256(json.dumps(pod, sort_keys=True).encode()).hexdigest()[:32]
    pod["metadata"]["name"] = "%s-%s" % (component, host)
    pod["metadata"]["annotations"].update({"kubernetes.io/config.hash": digest, "kubernetes.io/config.mirror": digest,
                                           "kubernetes.io/config.source": "file"})
    pod["spec"].update({"nodeName": host, "tolerations": [{"operator": "Exists", "effect": "NoExecute"}]})
    return pod


def versions(state: Dict[str, Any], controllers: str) -> Dict[str, Dict[str, str]]:
    """Per control-plane host, each component's version: the host's apiserver, and the controller manager and
    scheduler at ``controllers`` (the lab runs one of each, at the oldest apiserver's version)."""
    return {host: {"kube-apiserver": v, "kube-controller-manager": controllers, "kube-scheduler": controllers}
            for host, v in state["apiserver"].items()}


def etcd_static_pod(cfg: LabConfig) -> Dict[str, Any]:
    """The etcd host's etcd.yaml, as kubeadm's guide to an external etcd run by a kubelet writes it (the lab's
    controller starts the member while it is there, controller.StaticPods; its flags are cluster.start_etcd's)."""
    data, image = cluster.ETCD_DATA_ON_HOST, "registry.k8s.io/etcd:%s-0" % cfg.etcd_version.lstrip("v")
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "etcd", "namespace": "kube-system",
                         "labels": {"component": "etcd", "tier": "control-plane"}},
            "spec": {"hostNetwork": True, "priorityClassName": "system-node-critical",
                     "containers": [{"name": "etcd", "image": image,
                                     "command": ["etcd", "--name=lab", "--data-dir=%s" % data,
                                                 "--advertise-client-urls=https://127.0.0.1:%d" % cfg.ports["etcd"],
                                                 "--initial-advertise-peer-urls=http://127.0.0.1:%d"
                                                 % cfg.ports["etcd_peer"]],
                                     "volumeMounts": [{"name": "etcd-data", "mountPath": data}]}],
                     "volumes": [{"name": "etcd-data", "hostPath": {"path": data, "type": "DirectoryOrCreate"}}]}}


def write_manifests(cfg: LabConfig, state: Dict[str, Any], controllers: str) -> None:
    """Each control-plane host's /etc/kubernetes/manifests (its state directory's `manifests`, mounted there), and
    the etcd host's etcd.yaml."""
    for host, components in versions(state, controllers).items():
        folder = cfg.run / "hosts" / host / "manifests"
        folder.mkdir(parents=True, exist_ok=True)
        pods = [static_pod(cfg, component, host, version) for component, version in components.items()]
        if host == cluster.etcd_host(cfg):
            pods.append(etcd_static_pod(cfg))
        for pod in pods:
            component = pod["metadata"]["name"]
            text = yaml.safe_dump(pod, sort_keys=False)
            path = folder / ("%s.yaml" % component)
            if not path.exists() or path.read_text() != text:
                tmp = pathlib.Path(str(path) + ".tmp")
                tmp.write_text(text)
                tmp.replace(path)


# kubeadm finds its addons by these labels (its CoreDNS check reads the version from the image of the Deployment
# labelled k8s-app=kube-dns); kube.addon_objects makes the workloads.
ADDON_LABELS = {("Deployment", "coredns"): {"k8s-app": "kube-dns"},
                ("DaemonSet", "kube-proxy"): {"k8s-app": "kube-proxy"}}


def _read_or_make(read: Any, create: Any, obj: Dict[str, Any]) -> Any:
    """The kube-system object named like ``obj`` as the API has it; None when it was missing and is now made."""
    try:
        return read(obj["metadata"]["name"], "kube-system")
    except client.ApiException as exc:
        if exc.status != 404:
            raise
    create("kube-system", obj)
    return None


def _create_when_gone(core: client.CoreV1Api, pod: Dict[str, Any], timeout: float = 30) -> None:
    deadline = time.time() + timeout
    while True:
        try:
            core.create_namespaced_pod("kube-system", pod)
            return
        except client.ApiException as exc:
            if exc.status != 409 or time.time() > deadline:
                raise
            time.sleep(0.2)


def restore_mirror_pods(cfg: LabConfig, api: client.ApiClient, state: Dict[str, Any]) -> List[str]:
    """Make again any control-plane mirror pod that is gone, as a kubelet does (SIMULATION). Needed beside `sync`:
    KWOK deletes a pod it saw deleted by name, without its UID, so a mirror pod `sync` has just made again under the
    same name can go with the old one's deletion when the machine is busy. The lab controller calls this every few
    seconds; one list call."""
    core = client.CoreV1Api(api)
    have = {p.metadata.name for p in core.list_namespaced_pod(
        "kube-system", label_selector="tier=control-plane").items}
    made = []
    for host, components in versions(state, cluster.oldest(list(state["apiserver"].values()))).items():
        for component, version in components.items():
            pod = mirror_pod(cfg, component, host, version)
            if pod["metadata"]["name"] not in have and _read_or_make(
                    core.read_namespaced_pod, core.create_namespaced_pod, pod) is None:
                made.append("mirror pod %s %s" % (pod["metadata"]["name"], version))
    return made


def kubeadm_images(cfg: LabConfig, version: str) -> Dict[str, str]:
    """The images the real kubeadm at ``version`` installs, by name (kube-proxy, coredns, ...)."""
    out = subprocess.run([str(cfg.bin_dir("kubernetes", version) / "kubeadm"), "config", "images", "list",
                          "--kubernetes-version", version], capture_output=True, text=True, check=True,
                         timeout=60).stdout
    return {line.rsplit("/", 1)[-1].split(":")[0]: line.strip() for line in out.splitlines() if ":" in line}


def addon_phase(cfg: LabConfig, apps: client.AppsV1Api, state: Dict[str, Any]) -> List[str]:
    """kubeadm's addon phase once every apiserver runs one version that kube-proxy does not yet run (at `lab up`
    kube-proxy already runs `from`, so the lab's first addons stay as made)."""
    running = set(state["apiserver"].values())
    if len(running) != 1:
        return []  # kubeadm waits for the last control-plane instance
    version = running.pop()
    proxy = apps.read_namespaced_daemon_set("kube-proxy", "kube-system")
    if proxy.spec.template.spec.containers[0].image.rsplit(":", 1)[-1] == version:
        return []
    images = kubeadm_images(cfg, version)
    changed = []
    for kind, name, image in (("DaemonSet", "kube-proxy", images["kube-proxy"]),
                              ("Deployment", "coredns", images["coredns"])):
        patch = apps.patch_namespaced_deployment if kind == "Deployment" else apps.patch_namespaced_daemon_set
        patch(name, "kube-system", {"spec": {"template": {"spec": {"containers": [{"name": name, "image": image}]}}}})
        changed.append("%s %s %s" % (kind, name, image))
    return changed


def sync(cfg: LabConfig, api: client.ApiClient, state: Dict[str, Any]) -> List[str]:
    """Make the cluster hold what kubeadm reads at the state's versions; returns what changed. The controller
    manager and scheduler run at the oldest apiserver's version (controller.reconcile_controllers)."""
    controllers = cluster.oldest(list(state["apiserver"].values()))
    core, apps = client.CoreV1Api(api), client.AppsV1Api(api)
    changed: List[str] = []
    for host in cfg.control_plane:  # kubeadm's NodeRegistration: the CRI socket it would have recorded
        if (core.read_node(host).metadata.annotations or {}).get(CRI_SOCKET) != CONTAINERD:
            core.patch_node(host, {"metadata": {"annotations": {CRI_SOCKET: CONTAINERD}}})
            changed.append("node %s cri-socket" % host)
    for (kind, name), labels in ADDON_LABELS.items():
        read = apps.read_namespaced_deployment if kind == "Deployment" else apps.read_namespaced_daemon_set
        patch = apps.patch_namespaced_deployment if kind == "Deployment" else apps.patch_namespaced_daemon_set
        if any((read(name, "kube-system").metadata.labels or {}).get(k) != v for k, v in labels.items()):
            patch(name, "kube-system", {"metadata": {"labels": labels}})
            changed.append("%s %s labels" % (kind, name))
    changed += addon_phase(cfg, apps, state)
    write_manifests(cfg, state, controllers)
    cluster_version = cluster.newest(list(state["apiserver"].values()))
    for cm in config_maps(cfg, cluster_version):
        if _read_or_make(core.read_namespaced_config_map, core.create_namespaced_config_map, cm) is None:
            changed.append("configmap %s" % cm["metadata"]["name"])
    uploaded = kube.tolerate(404, core.read_namespaced_config_map, "kubeadm-config", "kube-system")
    if uploaded is None or yaml.safe_load((uploaded.data or {}).get("ClusterConfiguration") or "{}").get(
            "kubernetesVersion") != cluster_version:  # what kubeadm's `upgrade apply` re-uploads
        upload_config(cfg, cluster_version)
        changed.append("kubeadm-config and kubelet-config (kubeadm %s upload-config)" % cluster_version)
    for host, components in versions(state, controllers).items():
        for component, version in components.items():
            pod = mirror_pod(cfg, component, host, version)
            name = pod["metadata"]["name"]
            have_pod = _read_or_make(core.read_namespaced_pod, core.create_namespaced_pod, pod)
            if have_pod is None:
                changed.append("mirror pod %s %s" % (name, version))
                continue
            have_notes = have_pod.metadata.annotations or {}
            if have_pod.spec.containers[0].image != pod["spec"]["containers"][0]["image"] or any(
                    have_notes.get(k) != v for k, v in pod["metadata"]["annotations"].items()):
                # a new manifest: the kubelet replaces the mirror pod (its config.mirror hash cannot be updated)
                core.delete_namespaced_pod(name, "kube-system", grace_period_seconds=0)
                _create_when_gone(core, pod)
                changed.append("mirror pod %s %s" % (name, version))
    return changed
