"""What real kubeadm reads from a cluster it manages, kept true by the lab at every step (docs/reference.md section 2).

`kubeadm upgrade plan` (and `upgrade apply --dry-run`) on a control-plane host read:
- the `kubeadm-config` ConfigMap's ClusterConfiguration (here: external etcd, the lab's certificate paths as the
  hosts mount them, `kubernetesVersion` the cluster's version: the newest apiserver, as `upgrade apply` records it)
  and the `kubelet-config` ConfigMap, both uploaded by the real kubeadm of the cluster's version (`kubeadm init
  phase upload-config all`, `upload_config`), with the Roles that let nodes read them - so a worker's real `kubeadm
  upgrade node` reads them with its node credentials, as on a real cell;
- the `kube-proxy` ConfigMap (a component config whose version plan reports), the `coredns` ConfigMap and
  Deployment and the `kube-proxy` DaemonSet, found by their `k8s-app` labels: kubeadm's own, made by the real
  kubeadm of the cluster's version (`kubeadm init phase addon all`, `init_addons`);
- the mirror pods of the control-plane static pods (`kube-apiserver-HOST` ... in kube-system, labels `component`
  and `tier: control-plane`, the apiserver's advertise-address annotation): plan's per-node CURRENT column is read
  from their images, and `upgrade apply`/`node` wait for their `kubernetes.io/config.hash` to change after writing a
  new manifest. A kubelet makes them from the host's static pod manifests; the lab has no kubelet, so the lab writes
  them (SIMULATION of the kubelet's mirror pods, `mirror_pod`) from the manifest its static-pod player runs
  (controller.StaticPods: what runs on the host, `running_manifest`);
- the static pod manifests on the host (`/etc/kubernetes/manifests/*.yaml`, the host's state directory's
  `manifests`, which `lab up` mounts there on control-plane hosts): kubeadm's own, written by the real kubeadm of
  the lab's first version (`init phase control-plane all`, `init_manifests`), then by the real `kubeadm upgrade
  apply` and `upgrade node` the wave runs.

kubeadm's addon phase (CoreDNS, kube-proxy) is kubeadm's own too: `upgrade apply` or `upgrade node` runs it once
every kube-apiserver runs the target.
"""
from __future__ import annotations

import copy
import functools
import hashlib
import pathlib
import shutil
import subprocess
import threading
import time
from typing import Any, Dict, List, Optional, Tuple

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


def cluster_configuration(cfg: LabConfig, version: str) -> Dict[str, Any]:
    """The ClusterConfiguration kubeadm would have uploaded for this cell (v1beta4, kubeadm 1.31+)."""
    return {"apiVersion": "kubeadm.k8s.io/v1beta4", "kind": "ClusterConfiguration",
            "kubernetesVersion": version, "clusterName": cfg.cell,
            "controlPlaneEndpoint": "127.0.0.1:%d" % cfg.ports["apiserver_lb"],
            "certificatesDir": "/etc/kubernetes/pki", "imageRepository": "registry.k8s.io",
            "encryptionAlgorithm": "RSA-2048", "caCertificateValidityPeriod": "87600h0m0s",
            "certificateValidityPeriod": "8760h0m0s",
            "etcd": {"external": {"endpoints": cluster.etcd_endpoints(cfg),
                                  "caFile": "/etc/kubernetes/pki/ca.crt",
                                  "certFile": "/etc/kubernetes/pki/etcd-client.crt",
                                  "keyFile": "/etc/kubernetes/pki/etcd-client.key"}},
            "networking": {"dnsDomain": "cluster.local", "serviceSubnet": SERVICE_SUBNET, "podSubnet": POD_SUBNET},
            "apiServer": {"extraArgs": extra_args(APISERVER_EXTRA_ARGS), "extraVolumes": AUDIT_VOLUMES},
            "controllerManager": {"extraArgs": extra_args(CONTROLLER_MANAGER_EXTRA_ARGS)},
            "scheduler": {"extraArgs": extra_args(SCHEDULER_EXTRA_ARGS)}, "dns": {}, "proxy": {}}


def extra_args(flags: Tuple[Tuple[str, str], ...]) -> List[Dict[str, str]]:
    """(name, value) flags as kubeadm v1beta4's extraArgs list."""
    return [{"name": k, "value": v} for k, v in flags]


# LAB ONLY: the histograms gpufleet never reads that make up most of a lab apiserver's /metrics, turned off with the
# apiserver's own --disabled-metrics (the admission and workqueue histograms ignore the flag, so they are not listed):
# the real 1.35 and 1.36 captures in tests/fixtures/metrics lose 57-61 % of their 1.4-2.0 MB without them (etcd's
# request latency alone is a quarter), and a lab apiserver a minute after its start served 1.03 MB with the flag.
# Every soak reading, fleet halt reading and removed-API scan parses the whole text with prometheus_client (about
# 0.4 CPU-s for 1.6 MB), and CI takes hundreds of them on two cores. A real cell keeps all of them: the readings are
# tested on whole real captures; tests/unit/lab/test_lab_units.py checks that the readings give the same results on
# those captures with these families taken out, and tests/lab/test_lab.py that a lab apiserver serves what the
# readings need and none of these.
DISABLED_METRICS = ("etcd_request_duration_seconds", "apiserver_request_sli_duration_seconds",
                    "apiserver_watch_list_duration_seconds", "apiserver_watch_cache_read_wait_seconds",
                    "apiserver_request_body_size_bytes", "apiserver_watch_events_sizes",
                    "apiserver_flowcontrol_priority_level_request_utilization", "apiserver_response_sizes")
# What the lab's apiservers add to kubeadm's flags (ClusterConfiguration apiServer.extraArgs, so kubeadm's manifests
# carry them through every upgrade): no endpoint reconciler (each apiserver of a cell listens on its own port, so
# the `kubernetes` Service could not name one), quiet. Each listens on every address of its host's network
# namespace, as kubeadm's manifest has it.
# Auditing as docs/stages.md ("Who calls a removed API") tells an operator to turn it on: a Metadata-level policy
# (cluster.AUDIT_POLICY) and a JSON log that the apiserver rotates (2 backups of 20 MB here), on the host's disk; and
# one deprecated beta API turned on, as a cell that still runs an old CSI sidecar would have it (storage.k8s.io/v1beta1:
# VolumeAttributesClass, removed in 1.37), which the legacy-client fault calls (soakfaults.py).
APISERVER_EXTRA_ARGS = (("endpoint-reconciler-type", "none"), ("profiling", "false"), ("v", "1"),
                        ("audit-policy-file", "/etc/kubernetes/audit-policy.yaml"),
                        ("audit-log-path", "/var/log/kubernetes/audit/audit.log"),
                        ("audit-log-maxsize", "20"), ("audit-log-maxbackup", "2"),
                        ("runtime-config", "storage.k8s.io/v1beta1=true"),
                        ("disabled-metrics", ",".join(DISABLED_METRICS)))
AUDIT_VOLUMES = [{"name": "audit-policy", "hostPath": "/etc/kubernetes/audit-policy.yaml",
                  "mountPath": "/etc/kubernetes/audit-policy.yaml", "readOnly": True, "pathType": "File"},
                 {"name": "audit-log", "hostPath": "/var/log/kubernetes/audit",
                  "mountPath": "/var/log/kubernetes/audit", "readOnly": False, "pathType": "DirectoryOrCreate"}]
# LAB ONLY: the controller managers and schedulers (one of each on every control-plane host) renew or try for their
# leader lease every 5 s, not every 2 s: at 2 s their lease requests were half of an idle cell's (136 of 266 a
# minute), each renewal an etcd write; at 5 s the cell's total fell by about a quarter. The lease stays 15 s and the
# renewal deadline 10 s (their defaults). A standby tries every 5-11 s (client-go's jitter: up to 2.2 x the period)
# instead of every 2-4.4 s, so a leader that kubeadm restarts is replaced later: a scheduler gives its lease up on
# exit and is replaced within 11 s (4.4 s before); a controller manager does not (that needs an alpha feature gate
# in 1.36 and 1.37), so its lease runs out first - up to 15 s after a standby last saw it renewed, then the next try:
# up to about 13 s later than with the default. The lab's waits allow minutes for either.
LEADER_ELECTION_ARGS = (("leader-elect-retry-period", "5s"),)
# The controller manager's: a Node counts as unreachable after 60 s without a lease renewal, not kubeadm's 50 s
# (KWOK renews the lab's leases; on two busy cores a renewal can come late).
CONTROLLER_MANAGER_EXTRA_ARGS = (("node-monitor-grace-period", "60s"),) + LEADER_ELECTION_ARGS
SCHEDULER_EXTRA_ARGS = LEADER_ELECTION_ARGS


# The cluster-wide kubelet settings the lab's kubeadm config gives (kubeadm adds its own defaults): the lab machine
# runs cgroup v1 (hybrid), which a kubelet of 1.35 or newer refuses unless told, as a real kubelet on it would.
KUBELET_SETTINGS = {"apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration",
                    "cgroupDriver": "systemd", "failCgroupV1": False}


def advertise(cfg: LabConfig, host: str) -> Tuple[str, int]:
    """A control-plane host's API endpoint as kubeadm records it: the host's address on the lab's bridge (kubeadm
    refuses a loopback one) and its apiserver's port."""
    return cfg.node_address(host), cfg.apiserver_port(host)


def kubeadm_config(cfg: LabConfig, version: str, host: str = "") -> str:
    """The kubeadm configuration file ``host`` (default: the first control-plane host) was made with
    (InitConfiguration, ClusterConfiguration and the cluster's KubeletConfiguration), as `kubeadm init --config`
    takes it."""
    host = host or cfg.control_plane[0]
    address, port = advertise(cfg, host)
    init = {"apiVersion": "kubeadm.k8s.io/v1beta4", "kind": "InitConfiguration",
            "localAPIEndpoint": {"advertiseAddress": address, "bindPort": port},
            "nodeRegistration": {"name": host, "criSocket": CONTAINERD}}
    return yaml.safe_dump_all([init, cluster_configuration(cfg, version), KUBELET_SETTINGS], sort_keys=False)


def _kubeadm(cfg: LabConfig, version: str, args: List[str], what: str, env: Optional[Dict[str, str]] = None) -> str:
    """Run the real kubeadm of ``version`` with ``args``; returns its output, or fails naming ``what`` it did and
    kubeadm's own words."""
    proc = subprocess.run([str(cfg.bin_dir("kubernetes", version) / "kubeadm"), *args], env=env,
                          capture_output=True, text=True, check=False, timeout=120)
    if proc.returncode != 0:
        raise LabError("kubeadm %s %s failed (%d): %s" % (
            version, what, proc.returncode, (proc.stderr or proc.stdout).strip()[-1500:]))
    return proc.stdout


def _init_phase(cfg: LabConfig, version: str, phase: str) -> str:
    """Run the real kubeadm of ``version``'s `kubeadm init phase PHASE` against the cell, with the configuration
    the cell was made with; returns its output."""
    path = cfg.run / "kubeadm-config.yaml"
    path.write_text(kubeadm_config(cfg, version))
    return _kubeadm(cfg, version, ["init", "phase", *phase.split(), "--config", str(path),
                                   "--kubeconfig", str(cfg.run / "kubeconfigs" / "admin.conf")],
                    "init phase %s" % phase)


def upload_config(cfg: LabConfig, version: str) -> str:
    """The real kubeadm of ``version`` uploads kubeadm-config and kubelet-config and the Roles nodes read them with
    (`kubeadm init phase upload-config all`, as `kubeadm init` does)."""
    return _init_phase(cfg, version, "upload-config all")


def init_addons(cfg: LabConfig, version: str) -> str:
    """kubeadm's CoreDNS and kube-proxy - Deployment, DaemonSet, ConfigMaps, Service, ServiceAccounts and RBAC - made
    by the real kubeadm of ``version`` as `kubeadm init` makes them (`init phase addon all`)."""
    return _init_phase(cfg, version, "addon all")


COMPONENTS = ("kube-apiserver", "kube-controller-manager", "kube-scheduler")


def manifests_dir(cfg: LabConfig, host: str) -> pathlib.Path:
    """The host's /etc/kubernetes/manifests."""
    return cfg.run / "hosts" / host / "manifests"


def running_manifest(cfg: LabConfig, host: str, component: str) -> pathlib.Path:
    """The manifest of ``component`` the lab's kubelet stand-in last started on ``host`` (controller.StaticPods):
    its mirror pod is made from this one, not from the file kubeadm just wrote."""
    return cfg.run / "hosts" / host / "kubelet-running" / (component + ".yaml")


def manifest_version(text: str) -> str:
    """The version a static pod manifest runs: its first container's image tag (registry.k8s.io/NAME:vX.Y.Z)."""
    pod = yaml.safe_load(text) or {}
    containers = (pod.get("spec") or {}).get("containers") or [{}]
    image = str(containers[0].get("image") or "")
    if ":" not in image.rsplit("/", 1)[-1]:
        raise LabError("static pod manifest with no image tag: %r" % image)
    return image.rsplit(":", 1)[-1]


def init_manifests(cfg: LabConfig, host: str, version: str) -> List[str]:
    """kubeadm's own static pod manifests for ``host``'s control plane, written once by the real kubeadm of
    ``version`` (`kubeadm init phase control-plane all --dry-run`, which writes them into KUBEADM_INIT_DRYRUN_DIR
    instead of /etc/kubernetes/manifests, so no host container is needed yet); returns the components written."""
    folder = manifests_dir(cfg, host)

    def kubeadms(path: pathlib.Path) -> bool:  # an older lab wrote manifests with a bare command
        return path.exists() and len(yaml.safe_load(path.read_text())["spec"]["containers"][0]["command"]) > 1
    missing = [c for c in COMPONENTS if not kubeadms(folder / ("%s.yaml" % c))]
    if not missing:
        return []
    folder.mkdir(parents=True, exist_ok=True)
    work = cfg.run / "hosts" / host / "kubeadm-init"
    shutil.rmtree(work, ignore_errors=True)
    (work / "out").mkdir(parents=True)
    docs = list(yaml.safe_load_all(kubeadm_config(cfg, version, host)))
    (work / "config.yaml").write_text(yaml.safe_dump_all(docs[:2], sort_keys=False))
    _kubeadm(cfg, version, ["init", "phase", "control-plane", "all", "--dry-run", "--config",
                            str(work / "config.yaml")], "init phase control-plane all for %s" % host,
             env={"PATH": "/usr/bin:/bin", "KUBEADM_INIT_DRYRUN_DIR": str(work / "out")})
    for component in missing:
        (work / "out" / ("%s.yaml" % component)).replace(folder / ("%s.yaml" % component))
    shutil.rmtree(work, ignore_errors=True)
    return missing


def init_kubeconfigs(cfg: LabConfig, host: str, version: str) -> List[str]:
    """kubeadm's own /etc/kubernetes/controller-manager.conf and scheduler.conf for ``host``, written once by the
    real kubeadm of ``version`` (`kubeadm init phase kubeconfig controller-manager|scheduler`, with the host's
    InitConfiguration: each reaches the host's own apiserver, with a client certificate kubeadm signs with the
    cell's CA); returns the files written."""
    folder = cluster.host_kubeconfig(cfg, host, "controller-manager").parent
    missing = [u for u in cluster.COMPONENT_USERS if not (folder / (u + ".conf")).exists()]
    if not missing:
        return []
    folder.mkdir(parents=True, exist_ok=True)
    docs = list(yaml.safe_load_all(kubeadm_config(cfg, version, host)))[:2]
    docs[1]["certificatesDir"] = str(cfg.pki)  # the CA it signs with, where the lab keeps it
    config = cfg.run / "hosts" / host / "kubeadm-kubeconfig.yaml"
    config.write_text(yaml.safe_dump_all(docs, sort_keys=False))
    for user in missing:
        _kubeadm(cfg, version, ["init", "phase", "kubeconfig", user, "--config", str(config), "--kubeconfig-dir",
                                str(folder)], "init phase kubeconfig %s for %s" % (user, host),
                 env={"PATH": "/usr/bin:/bin"})
    config.unlink()
    return ["%s.conf" % u for u in missing]


def config_hash(text: str) -> str:
    """The mirror pod's config hash for a manifest: a kubelet hashes the pod it read; the lab hashes the file's
    text (kubeadm only compares the hash before and after it writes a manifest)."""
    return hashlib.sha256(text.encode()).hexdigest()[:32]


@functools.lru_cache(maxsize=64)
def _parsed(text: str) -> Dict[str, Any]:
    """A manifest's text as a dict, parsed once per text (the lab controller syncs the mirror pods every few
    seconds; parsing every manifest each time was a third of its CPU): callers copy it before changing it."""
    return yaml.safe_load(text)


def mirror_pod(cfg: LabConfig, component: str, host: str) -> Optional[Dict[str, Any]]:
    """The kubelet's mirror of the static pod ``component`` it runs on ``host``: the manifest's pod named
    COMPONENT-HOST, bound to the host's Node, with the config annotations a kubelet sets (SIMULATION: the lab has no
    kubelet); None when nothing runs it."""
    path = running_manifest(cfg, host, component)
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    pod = copy.deepcopy(_parsed(text))
    pod.pop("status", None)
    digest = config_hash(text)
    meta = pod.setdefault("metadata", {})
    meta["name"] = "%s-%s" % (component, host)
    meta["namespace"] = "kube-system"
    meta.setdefault("annotations", {}).update({"kubernetes.io/config.hash": digest,
                                               "kubernetes.io/config.mirror": digest,
                                               "kubernetes.io/config.source": "file"})
    pod["spec"].update({"nodeName": host, "tolerations": [{"operator": "Exists", "effect": "NoExecute"}]})
    return pod


def mirror_pods(cfg: LabConfig) -> List[Dict[str, Any]]:
    """Every control-plane mirror pod the lab's kubelet stand-in keeps."""
    pods = [mirror_pod(cfg, component, host) for host in cfg.control_plane for component in COMPONENTS]
    return [p for p in pods if p is not None]


def etcd_static_pod(cfg: LabConfig, host: str, image: str) -> Dict[str, Any]:
    """``host``'s etcd.yaml, as kubeadm's guide to an external etcd run by a kubelet writes it: the member named
    after its host, its URLs and data directory (the lab controller runs it from this, cluster.etcd_argv)."""
    data = cluster.ETCD_DATA_ON_HOST
    members = cluster.etcd_members(cfg)
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "etcd", "namespace": "kube-system",
                         "labels": {"component": "etcd", "tier": "control-plane"}},
            "spec": {"hostNetwork": True, "priorityClassName": "system-node-critical",
                     "containers": [{"name": "etcd", "image": image,
                                     "command": ["etcd", "--name=%s" % host, "--data-dir=%s" % data,
                                                 "--advertise-client-urls=%s" % cluster.etcd_url(cfg, host),
                                                 "--initial-advertise-peer-urls=%s" % cluster.etcd_peer_url(cfg, host),
                                                 "--initial-cluster=%s" % ",".join(
                                                     "%s=%s" % (h, cluster.etcd_peer_url(cfg, h)) for h in members),
                                                 "--client-cert-auth=true"],
                                     "volumeMounts": [{"name": "etcd-data", "mountPath": data}]}],
                     "volumes": [{"name": "etcd-data", "hostPath": {"path": data, "type": "DirectoryOrCreate"}}]}}


def write_etcd_manifests(cfg: LabConfig) -> None:
    """Each member's etcd.yaml: the image of one already there is kept (an etcd upgrade set it), the rest made again
    when it differs."""
    for host in cluster.etcd_members(cfg):
        path = manifests_dir(cfg, host) / "etcd.yaml"
        image = "%s:%s-0" % (cluster.ETCD_IMAGE, cfg.etcd_version.lstrip("v"))
        if path.exists():
            image = yaml.safe_load(path.read_text())["spec"]["containers"][0]["image"]
        text = yaml.safe_dump(etcd_static_pod(cfg, host, image), sort_keys=False)
        if not path.exists() or path.read_text() != text:
            cluster.write_atomic(path, text)


def write_manifests(cfg: LabConfig, state: Dict[str, Any]) -> None:
    """Each control-plane host's kubeadm manifests and the kubeconfigs they name (made once, by the real kubeadm at
    the host's apiserver version: `init_manifests`, `init_kubeconfigs`)."""
    for host in cfg.control_plane:
        init_manifests(cfg, host, state["apiserver"][host])
        init_kubeconfigs(cfg, host, state["apiserver"][host])


def _create_when_gone(core: client.CoreV1Api, pod: Dict[str, Any], timeout: float = 30) -> None:
    """Create ``pod`` once the one of its name is gone; done at once when the one there already has its hash (made by
    the lab's other syncer)."""
    name, digest = pod["metadata"]["name"], pod["metadata"]["annotations"]["kubernetes.io/config.hash"]
    deadline = time.time() + timeout
    while True:
        try:
            core.create_namespaced_pod("kube-system", pod, _request_timeout=REQUEST_TIMEOUT)
            return
        except client.ApiException as exc:
            if exc.status != 409 or time.time() > deadline:
                raise
        there = kube.tolerate(404, core.read_namespaced_pod, name, "kube-system", _request_timeout=REQUEST_TIMEOUT)
        if there is not None and (there.metadata.annotations or {}).get("kubernetes.io/config.hash") == digest:
            return
        time.sleep(0.2)


REQUEST_TIMEOUT = 30  # seconds: a mirror pod call that hangs (an apiserver going away) must not hold the lock
_MIRROR_LOCK = threading.Lock()  # the lab controller syncs from two threads (the static pods and a 5 s repair)


def sync_mirror_pods(cfg: LabConfig, core: client.CoreV1Api) -> List[str]:
    """Make each control-plane mirror pod hold the manifest the host runs, as a kubelet does (SIMULATION): made when
    gone, replaced when its config hash is not the running manifest's (a mirror pod's config.mirror hash cannot be
    updated); returns what changed. Called by the lab controller every few seconds: KWOK deletes a pod it saw
    deleted by name, without its UID, so a mirror pod just made again under the same name can go with the old one's
    deletion when the machine is busy. One list call when all is in place."""
    with _MIRROR_LOCK:
        return _sync_mirror_pods(cfg, core)


def _sync_mirror_pods(cfg: LabConfig, core: client.CoreV1Api) -> List[str]:
    have = {p.metadata.name: (p.metadata.annotations or {}).get("kubernetes.io/config.hash")
            for p in core.list_namespaced_pod("kube-system", label_selector="tier=control-plane",
                                              _request_timeout=REQUEST_TIMEOUT).items}
    changed = []
    for pod in mirror_pods(cfg):
        name, digest = pod["metadata"]["name"], pod["metadata"]["annotations"]["kubernetes.io/config.hash"]
        if have.get(name) == digest:
            continue
        if name in have:
            kube.tolerate(404, core.delete_namespaced_pod, name, "kube-system", grace_period_seconds=0,
                          _request_timeout=REQUEST_TIMEOUT)
        _create_when_gone(core, pod)
        changed.append("mirror pod %s %s" % (name, manifest_version(yaml.safe_dump(pod))))
    return changed


def kubeadm_images(cfg: LabConfig, version: str) -> Dict[str, str]:
    """The images the real kubeadm at ``version`` installs, by name (kube-proxy, coredns, ...)."""
    out = subprocess.run([str(cfg.bin_dir("kubernetes", version) / "kubeadm"), "config", "images", "list",
                          "--kubernetes-version", version], capture_output=True, text=True, check=True,
                         timeout=60).stdout
    return {line.rsplit("/", 1)[-1].split(":")[0]: line.strip() for line in out.splitlines() if ":" in line}


def sync(cfg: LabConfig, api: client.ApiClient, state: Dict[str, Any]) -> List[str]:
    """Make the cluster hold what kubeadm reads (what `kubeadm init` and a kubelet would have left); returns what
    changed."""
    core, apps = client.CoreV1Api(api), client.AppsV1Api(api)
    changed: List[str] = []
    for host in cfg.control_plane:  # kubeadm's NodeRegistration: the CRI socket it would have recorded
        if (core.read_node(host).metadata.annotations or {}).get(CRI_SOCKET) != CONTAINERD:
            core.patch_node(host, {"metadata": {"annotations": {CRI_SOCKET: CONTAINERD}}})
            changed.append("node %s cri-socket" % host)
    write_manifests(cfg, state)
    cluster_version = cluster.newest(list(state["apiserver"].values()))
    if kube.tolerate(404, core.read_namespaced_config_map, "kubeadm-config", "kube-system") is None:
        upload_config(cfg, cluster_version)  # as `kubeadm init` did; later uploads are the real upgrade's own
        changed.append("kubeadm-config and kubelet-config (kubeadm %s upload-config)" % cluster_version)
    if kube.tolerate(404, apps.read_namespaced_deployment, "coredns", "kube-system") is None:
        init_addons(cfg, cluster_version)  # likewise: later the upgrade's addon phase moves them
        changed.append("CoreDNS and kube-proxy (kubeadm %s addon phase)" % cluster_version)
    return changed + sync_mirror_pods(cfg, core)
