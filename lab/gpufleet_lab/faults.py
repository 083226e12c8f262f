"""Fault injection: what `lab fault HOST KIND` changes, and `lab clear HOST` undoes."""
from __future__ import annotations

import json
from typing import Dict, List

from kubernetes import client

from gpufleet_lab import hosts, kube, soakfaults
from gpufleet_lab.config import LabConfig
from gpufleet_lab.procs import LabError

# kind: (what it does, hosts it applies to: "gpu", "cp" or "any")
HOST_FAULTS: Dict[str, tuple] = {
    "gpu-missing": ("one GPU gone after a reboot: nvidia-smi/dcgmi see 7 of 8, allocatable nvidia.com/gpu 7", "gpu"),
    "xid79": ("kernel log gets 'NVRM: Xid (PCI:0000:9a:00): 79 ... GPU has fallen off the bus'", "gpu"),
    "dcgm-fail": ("dcgmi diag: memory test fails on GPU 5 (error_severity 2, isolate)", "gpu"),
    "nccl-slow": ("all_reduce_perf bus bandwidth 30% below baseline", "gpu"),
    "nccl-wrong": ("all_reduce_perf reports wrong elements (first message size)", "gpu"),
    "ecc": ("an uncorrectable ECC error on GPU 4", "gpu"),
    "remap-pending": ("a pending row remap on GPU 6", "gpu"),
    "hostengine-down": ("dcgmi diag cannot reach nv-hostengine (runtime_error)", "gpu"),
    "inference-slow": ("the simulated inference service on this host answers six times slower (the canary "
                       "latency probe's p99 about 708 ms; the cell's inference /metrics for the fleet too)", "gpu"),
    "checkpoint-never": ("the training gang never confirms a checkpoint while a rank runs on this host", "gpu"),
    "kubelet-config-drift": ("the kubelet's config file is rewritten before the kubelet starts (a configuration "
                             "agent's old template): topologyManagerPolicy best-effort, not the pool's", "gpu"),
    "apiserver-start-fail": ("a new kube-apiserver manifest never starts on this host (kubeadm upgrade apply/node "
                             "waits for its mirror pod, then rolls the manifest back)", "cp"),
    "snapshot-fail": ("etcdctl snapshot save fails (no space left on device)", "cp"),
    "pause-in-upgrade": ("the host hangs in the middle of its kubelet package upgrade (its container is paused from "
                         "the package's preinst): Ansible loses it over SSH, UNREACHABLE", "any"),
}
OTHER_FAULTS = {
    "unreachable": "the host's container is paused: Ansible cannot reach it",
    "pdb-block": "a Deployment's only pod on the node, guarded by a PodDisruptionBudget with no disruptions allowed "
                 "(eviction 429)",
}
FAULT_NS = "gpufleet-lab-faults"
SLOW_INFERENCE = "inference-slow"


def kinds() -> Dict[str, str]:
    out = {k: v[0] for k, v in HOST_FAULTS.items()}
    out.update(OTHER_FAULTS)
    out.update(soakfaults.KINDS)
    return out


def _state_path(cfg: LabConfig, host: str):
    return cfg.run / "hosts" / host / "state.json"


def host_state(cfg: LabConfig, host: str) -> Dict:
    """A host's simulator state ({} before the host exists)."""
    try:
        return json.loads(_state_path(cfg, host).read_text())
    except (OSError, ValueError):
        return {}


def host_faults(cfg: LabConfig, host: str) -> List[str]:
    return sorted(host_state(cfg, host).get("faults") or {})


def visible_gpus(cfg: LabConfig, host: str) -> int:
    """GPUs the host's tools report: the gpu-missing fault hides one (the simulators apply the same rule)."""
    state = host_state(cfg, host)
    return int(state.get("gpus", cfg.gpus_per_node)) - (1 if "gpu-missing" in (state.get("faults") or {}) else 0)


def _edit(cfg: LabConfig, host: str, fn) -> None:
    path = _state_path(cfg, host)
    state = json.loads(path.read_text())
    fn(state)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(state, indent=2, sort_keys=True))
    tmp.replace(path)


def inject(cfg: LabConfig, host: str, kind: str) -> str:
    if host not in cfg.hosts:
        raise LabError("unknown host %r; lab hosts: %s" % (host, ", ".join(cfg.hosts)))
    if kind in HOST_FAULTS:
        scope = HOST_FAULTS[kind][1]
        if (scope == "gpu" and host not in cfg.gpu_hosts) or (scope == "cp" and host not in cfg.control_plane):
            raise LabError("fault %s applies to %s hosts only" % (kind, "GPU" if scope == "gpu" else "control-plane"))
        _edit(cfg, host, lambda s: s.setdefault("faults", {}).__setitem__(kind, True))
    elif kind in soakfaults.KINDS:
        if host not in cfg.control_plane:
            raise LabError("fault %s applies to control-plane hosts only" % kind)
        armed = soakfaults.arm_state(cfg, host, kind)
        soakfaults.make_objects(cfg, kind)
        _edit(cfg, host, lambda s: s.setdefault("faults", {}).__setitem__(kind, armed))
    elif kind == "unreachable":
        hosts.podman("pause", hosts.container(cfg, host))
    elif kind == "pdb-block":
        _pdb_block(cfg, host)
    else:
        raise LabError("unknown fault %r; kinds: %s" % (kind, ", ".join(sorted(kinds()))))
    return kinds()[kind]


def clear(cfg: LabConfig, host: str) -> None:
    if host not in cfg.hosts:
        raise LabError("unknown host %r" % host)
    had = set(host_faults(cfg, host))
    _edit(cfg, host, lambda s: s.__setitem__("faults", {}))
    if had & set(soakfaults.KINDS) and not any(set(host_faults(cfg, h)) & set(soakfaults.KINDS)
                                               for h in cfg.control_plane):
        soakfaults.remove_objects(cfg)  # shared by every host's soak faults: once none is left
    if hosts.host_status(cfg).get(host) == "paused":
        hosts.podman("unpause", hosts.container(cfg, host))
    core = client.CoreV1Api(kube.api(cfg))
    policy = client.PolicyV1Api(kube.api(cfg))
    name = "pdb-block-" + host
    kube.tolerate(404, policy.delete_namespaced_pod_disruption_budget, name, FAULT_NS)
    apps = client.AppsV1Api(kube.api(cfg))
    kube.tolerate(404, apps.delete_namespaced_deployment, name, FAULT_NS, propagation_policy="Background")
    for pod in core.list_namespaced_pod(FAULT_NS, label_selector="app=" + name).items:
        kube.tolerate(404, core.delete_namespaced_pod, pod.metadata.name, FAULT_NS, grace_period_seconds=0)


def _pdb_block(cfg: LabConfig, host: str) -> None:
    """A Deployment with one replica pinned to the host, guarded by a PDB with minAvailable 1: the eviction API
    answers 429 for its pod until the fault is cleared (what a single-replica service with a strict PDB does)."""
    core = client.CoreV1Api(kube.api(cfg))
    apps = client.AppsV1Api(kube.api(cfg))
    policy = client.PolicyV1Api(kube.api(cfg))
    kube.tolerate(409, core.create_namespace, {"metadata": {"name": FAULT_NS}})
    name = "pdb-block-" + host
    labels = {"app": name}
    deployment = {"metadata": {"name": name, "labels": labels},
                  "spec": {"replicas": 1, "selector": {"matchLabels": labels}, "template": {
                      "metadata": {"labels": labels},
                      "spec": {"nodeName": host, "tolerations": [{"operator": "Exists"}],
                               "containers": [{"name": "guarded", "image": "registry.invalid/guarded:1"}]}}}}
    pdb = {"metadata": {"name": name}, "spec": {"minAvailable": 1, "selector": {"matchLabels": labels}}}
    kube.tolerate(409, apps.create_namespaced_deployment, FAULT_NS, deployment)
    kube.tolerate(409, policy.create_namespaced_pod_disruption_budget, FAULT_NS, pdb)
