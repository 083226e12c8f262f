# Copyright: gpufleet contributors
# Apache License 2.0
"""Node gate from a Kubernetes Node object and the kubelet's ``/configz`` JSON."""
from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional

from ansible_collections.gpufleet.upgrade.plugins.module_utils.checks import Check, summarize
from ansible_collections.gpufleet.upgrade.plugins.module_utils.errors import InputError, ParseError
from ansible_collections.gpufleet.upgrade.plugins.module_utils.versions import parse_version

GPU_RESOURCE = "nvidia.com/gpu"


def node_facts(node: Mapping[str, Any]) -> Dict[str, Any]:
    """Extract name, Ready, kubeletVersion, unschedulable and allocatable GPUs from a Node object."""
    if not isinstance(node, Mapping) or node.get("kind", "Node") != "Node":
        raise InputError("node: expected a Kubernetes Node object (kubernetes.core.k8s_info resources[0])")
    meta = node.get("metadata") or {}
    status = node.get("status") or {}
    ready = None
    for cond in status.get("conditions") or []:
        if cond.get("type") == "Ready":
            ready = cond.get("status") == "True"
    alloc = (status.get("allocatable") or {}).get(GPU_RESOURCE)
    try:
        gpus = int(alloc) if alloc is not None else 0
    except (TypeError, ValueError):
        raise ParseError("node %s: allocatable %s is %r, not an integer" % (meta.get("name"), GPU_RESOURCE, alloc))
    return {"name": meta.get("name", ""), "ready": ready,
            "kubelet_version": (status.get("nodeInfo") or {}).get("kubeletVersion", ""),
            "unschedulable": bool((node.get("spec") or {}).get("unschedulable")), "allocatable_gpus": gpus,
            "labels": meta.get("labels") or {}}


def kubelet_config(configz: Any) -> Dict[str, Any]:
    """``/api/v1/nodes/NAME/proxy/configz`` answers ``{"kubeletconfig": {...}}``."""
    if isinstance(configz, str):
        from ansible_collections.gpufleet.upgrade.plugins.module_utils.textparse import load_document
        configz = load_document(configz, "kubelet configz")
    if not isinstance(configz, Mapping) or not isinstance(configz.get("kubeletconfig"), Mapping):
        raise ParseError("kubelet configz: expected an object with a 'kubeletconfig' key")
    return dict(configz["kubeletconfig"])


def judge_node(node: Mapping[str, Any], configz: Optional[Any], target_version: Optional[str],
               policy: Mapping[str, Any]) -> Dict[str, Any]:
    """``policy``: ``allocatable_gpus`` (int), ``kubelet_config`` ({key: value}), ``require_schedulable`` (bool)."""
    facts = node_facts(node)
    subject = facts["name"] or "node"
    checks: List[Check] = [Check("node_ready", subject, facts["ready"] is True, facts["ready"], True)]
    if target_version:
        ok = bool(facts["kubelet_version"]) and parse_version(facts["kubelet_version"]) == parse_version(
            target_version, "target_version")
        checks.append(Check("kubelet_version", subject, ok, facts["kubelet_version"] or "unknown", target_version))
    if policy.get("allocatable_gpus") is not None:
        want = int(policy["allocatable_gpus"])
        checks.append(Check("allocatable_gpus", subject, facts["allocatable_gpus"] == want,
                            facts["allocatable_gpus"], want, "nvidia.com/gpu allocatable"))
    wanted_config = policy.get("kubelet_config") or {}
    if wanted_config:
        if configz is None:
            raise InputError("node gate for %s: the baseline names kubelet_config keys but no configz was given" %
                             subject)
        actual = kubelet_config(configz)
        for key in sorted(wanted_config):
            checks.append(Check("kubelet_config", "%s %s" % (subject, key), actual.get(key) == wanted_config[key],
                                actual.get(key, "unset"), wanted_config[key]))
    if policy.get("require_schedulable"):
        checks.append(Check("schedulable", subject, not facts["unschedulable"], not facts["unschedulable"], True))
    summary = summarize(checks)
    summary["node"] = facts
    return summary
