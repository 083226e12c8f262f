# Copyright: gpufleet contributors
# Apache License 2.0
"""Node gate from a Kubernetes Node object and the kubelet's ``/configz`` JSON."""
from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional

from ansible_collections.gpufleet.upgrade.plugins.module_utils.checks import Check, summarize
from ansible_collections.gpufleet.upgrade.plugins.module_utils.errors import InputError, ParseError
from ansible_collections.gpufleet.upgrade.plugins.module_utils.textparse import load_document, mapping
from ansible_collections.gpufleet.upgrade.plugins.module_utils.versions import parse_version

GPU_RESOURCE = "nvidia.com/gpu"


def node_facts(node: Mapping[str, Any]) -> Dict[str, Any]:
    """Extract name, Ready, kubeletVersion, unschedulable and allocatable GPUs from a Node object."""
    if not isinstance(node, Mapping) or node.get("kind", "Node") != "Node" or not node.get("metadata"):
        raise InputError("node: expected a Kubernetes Node object (kubernetes.core.k8s_info resources[0]); got "
                         "nothing - does the Node exist?")
    meta = mapping(node.get("metadata"), "node: metadata")
    status = mapping(node.get("status"), "node: status")
    ready = None
    conditions = status.get("conditions") or []
    for cond in conditions if isinstance(conditions, list) else []:
        if isinstance(cond, Mapping) and cond.get("type") == "Ready":
            ready = cond.get("status") == "True"
    alloc = mapping(status.get("allocatable"), "node: status.allocatable").get(GPU_RESOURCE)
    try:
        gpus: Optional[int] = int(str(alloc)) if alloc is not None else None
    except (TypeError, ValueError):
        raise ParseError("node %s: allocatable %s is %r, not an integer" % (
            str(meta.get("name"))[:100], GPU_RESOURCE, str(alloc)[:40]))
    return {"name": str(meta.get("name", ""))[:253], "ready": ready,
            "kubelet_version": str(mapping(status.get("nodeInfo"), "node: status.nodeInfo").get("kubeletVersion", "")),
            "unschedulable": bool(mapping(node.get("spec"), "node: spec").get("unschedulable")),
            "allocatable_gpus": gpus, "labels": meta.get("labels") or {}}


def kubelet_config(configz: Any, node: str = "") -> Dict[str, Any]:
    """``/api/v1/nodes/NAME/proxy/configz`` answers ``{"kubeletconfig": {...}}`` (the kubelet's versioned
    KubeletConfiguration with every default filled in). Anything else - an HTML error page from a proxy, another
    component's configz, an empty answer - fails, naming the node."""
    what = "kubelet configz of %s" % node if node else "kubelet configz"
    if isinstance(configz, str):
        configz = load_document(configz, what)
    if not isinstance(configz, Mapping) or not isinstance(configz.get("kubeletconfig"), Mapping):
        keys = ", ".join(sorted(map(str, configz))[:5]) if isinstance(configz, Mapping) else type(configz).__name__
        raise ParseError("%s: expected an object with a 'kubeletconfig' key (the kubelet's /configz); got %s" % (
            what, keys or "an empty object"))
    config = dict(configz["kubeletconfig"])
    if isinstance(config.get("staticPodURLHeader"), Mapping):  # may carry credentials: masked, as the kubelet logs it
        config["staticPodURLHeader"] = {str(k): ["<masked>"] for k in config["staticPodURLHeader"]}
    if config.get("kind", "KubeletConfiguration") != "KubeletConfiguration":
        raise ParseError("%s: kubeletconfig is a %s, not a KubeletConfiguration" % (what, str(config["kind"])[:60]))
    return config


def config_changes(before: Any, after: Any, node: str = "") -> Dict[str, Dict[str, Any]]:
    """The kubelet settings that differ between two /configz answers of one node (top-level keys of the
    KubeletConfiguration, each {before, after}; a key one side lacks is None there)."""
    old, new = kubelet_config(before, node), kubelet_config(after, node)
    return {key: {"before": old.get(key), "after": new.get(key)}
            for key in sorted(set(old) | set(new)) if old.get(key) != new.get(key)}


def judge_node(node: Mapping[str, Any], configz: Optional[Any], target_version: Optional[str],
               baseline: Mapping[str, Any], require_schedulable: bool = False) -> Dict[str, Any]:
    """Judge a Node against a validated pool baseline: Ready; the kubelet at ``target_version``; allocatable
    ``nvidia.com/gpu`` equal to ``node.allocatable_gpus`` (``gpu.count`` unless the baseline says otherwise),
    always; ``node.kubelet_config`` keys from the kubelet's ``/configz``; schedulable when asked."""
    facts = node_facts(node)
    subject = facts["name"] or "node"
    policy = baseline["node"]
    checks: List[Check] = [Check("node_ready", subject, facts["ready"] is True,
                                 "unknown" if facts["ready"] is None else facts["ready"], True)]
    if target_version:
        ok = bool(facts["kubelet_version"]) and parse_version(facts["kubelet_version"]) == parse_version(
            target_version, "target_version")
        checks.append(Check("kubelet_version", subject, ok, facts["kubelet_version"] or "unknown", target_version))
    want = int(policy["allocatable_gpus"])
    checks.append(Check("allocatable_gpus", subject, facts["allocatable_gpus"] == want,
                        "not reported" if facts["allocatable_gpus"] is None else facts["allocatable_gpus"], want,
                        "nvidia.com/gpu allocatable (a node Ready with fewer GPUs than expected is worse than a "
                        "failed node)"))
    wanted_config = policy.get("kubelet_config") or {}
    if wanted_config:
        if configz is None:
            raise InputError("node gate for %s: the baseline names kubelet_config keys (%s) but no configz was "
                             "given" % (subject, ", ".join(sorted(wanted_config))))
        actual = kubelet_config(configz, subject)
        for key in sorted(wanted_config):
            checks.append(Check("kubelet_config", "%s %s" % (subject, key), key in actual and
                                actual[key] == wanted_config[key], actual.get(key, "not in its configz"),
                                wanted_config[key]))
    if require_schedulable:
        checks.append(Check("schedulable", subject, not facts["unschedulable"], not facts["unschedulable"], True))
    summary = summarize(checks)
    summary["node"] = facts
    return summary
