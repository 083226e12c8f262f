# Copyright: gpufleet contributors
# Apache License 2.0
"""Drain: evict what runs on cordoned nodes through the eviction API, honouring PodDisruptionBudgets, retrying
429 until a deadline, and naming every blocker (pod, owner, PDB) when it gives up.

Closes the gaps of kubernetes.core.k8s_drain recorded in docs/reference.md section 4 (a PDB 429 is not retried there;
an expired wait only warns; one node per call). The I/O goes through an object with the methods of
kube.Kube (pods_on_node, pdbs, evict, delete_pod, pod_exists); time through ``clock``/``sleep``, so the loop is
tested without a cluster or waiting.
"""
from __future__ import annotations

import time
from typing import Any, Callable, Dict, List, Optional, Sequence

from ansible_collections.gpufleet.upgrade.plugins.module_utils import kube
from ansible_collections.gpufleet.upgrade.plugins.module_utils.errors import GpufleetError

MIRROR = "kubernetes.io/config.mirror"


class DrainBlocked(GpufleetError):
    """Pods are still on the nodes at the deadline; ``blockers`` names each with its reason."""


DELETE_POLL_SECONDS = 1.0  # how often evicted pods still terminating are looked at (kubectl drain: every second)


def owner(pod: Dict[str, Any]) -> str:
    refs = (pod.get("metadata") or {}).get("ownerReferences") or []
    ctl = next((r for r in refs if r.get("controller")), refs[0] if refs else None)
    return "%s/%s" % (ctl["kind"], ctl["name"]) if ctl else ""


def pod_ref(pod: Dict[str, Any]) -> str:
    meta = pod.get("metadata") or {}
    return "%s/%s" % (meta.get("namespace", ""), meta.get("name", ""))


def classify(pod: Dict[str, Any], force: bool = False) -> str:
    """How a drain treats a pod: 'skip' (DaemonSet and mirror pods stay, as with kubectl drain), 'gang' (a rank of
    a JobSet: never evicted alone; stop the gang first), 'unmanaged' (no controller would recreate it: refused
    unless ``force``), else 'evict'. Finished pods are evicted too (nothing to lose, frees the node)."""
    meta = pod.get("metadata") or {}
    if MIRROR in (meta.get("annotations") or {}):
        return "skip"
    kinds = {r.get("kind") for r in meta.get("ownerReferences") or []}
    if "DaemonSet" in kinds:
        return "skip"
    if kube.JOBSET_NAME_LABEL in (meta.get("labels") or {}) or "JobSet" in kinds:
        return "gang"
    phase = (pod.get("status") or {}).get("phase")
    if not kinds and phase not in ("Succeeded", "Failed") and not force:
        return "unmanaged"
    return "evict"


def selects(pdb: Dict[str, Any], pod: Dict[str, Any]) -> bool:
    """Whether a PDB's selector (matchLabels and matchExpressions) selects the pod."""
    selector = (pdb.get("spec") or {}).get("selector")
    if selector is None:
        return False
    labels = (pod.get("metadata") or {}).get("labels") or {}
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
        if op == "In" and labels.get(key) not in values:
            return False
        if op == "NotIn" and labels.get(key) in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
    return True


def describe_pdb(pdb: Dict[str, Any]) -> str:
    spec, status = pdb.get("spec") or {}, pdb.get("status") or {}
    rule = ("minAvailable %s" % spec["minAvailable"] if "minAvailable" in spec
            else "maxUnavailable %s" % spec.get("maxUnavailable"))
    return "PodDisruptionBudget %s (%s, %s healthy of %s expected, disruptionsAllowed %s)" % (
        pod_ref(pdb), rule, status.get("currentHealthy", "?"), status.get("expectedPods", "?"),
        status.get("disruptionsAllowed", "?"))


def blocker(node: str, pod: Dict[str, Any], reason: str, pdbs: Sequence[Dict[str, Any]] = ()) -> Dict[str, Any]:
    matching = [p for p in pdbs if selects(p, pod)]
    text = "%s: pod %s%s %s" % (node, pod_ref(pod), " (owner %s)" % owner(pod) if owner(pod) else "", reason)
    if matching:
        text += "; " + "; ".join(describe_pdb(p) for p in matching)
    return {"node": node, "pod": pod_ref(pod), "owner": owner(pod), "reason": reason,
            "pdbs": [pod_ref(p) for p in matching], "message": text}


def drain(api: Any, nodes: List[str], timeout: float, interval: float = 5.0, grace: Optional[int] = None,
          disable_eviction: bool = False, force: bool = False, check_mode: bool = False,
          clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep) -> Dict[str, Any]:
    """Evict (or, break-glass, delete) every pod on ``nodes`` that a drain moves, until none is left or
    ``timeout`` seconds pass. Raises DrainBlocked naming each pod that stayed and why."""
    deadline = clock() + timeout
    pending: Dict[str, Dict[str, Any]] = {}
    refused: List[Dict[str, Any]] = []
    skipped: List[str] = []
    for node in nodes:
        for pod in api.pods_on_node(node):
            kind = classify(pod, force=force)
            if kind == "skip":
                skipped.append(pod_ref(pod))
            elif kind == "gang" and not force:
                refused.append(blocker(node, pod, "is a rank of a training gang; stop the gang as a unit first "
                                       "(gpufleet.upgrade.gang state=stopped) so no rank dies alone"))
            elif kind == "unmanaged":
                refused.append(blocker(node, pod, "has no controller and would be lost; move it yourself, or "
                                       "break glass with force (recorded)"))
            else:
                pending[pod_ref(pod)] = dict(pod, _node=node)
    result: Dict[str, Any] = {"evicted": [], "deleted": [], "skipped": sorted(skipped), "blockers": [],
                              "break_glass": [], "changed": False}
    if refused:
        result["blockers"] = refused
        raise DrainBlocked("drain of %s refused before evicting anything:\n%s" % (
            ", ".join(nodes), "\n".join(b["message"] for b in refused)), **result)
    if check_mode:
        result["would_evict"] = sorted(pending)
        result["changed"] = bool(pending)
        return result
    pdb_cache: Dict[str, List[Dict[str, Any]]] = {}
    last: Dict[str, Dict[str, Any]] = {}
    accepted: Dict[str, Dict[str, Any]] = {}
    while True:
        read_this_pass = set()  # a namespace's PDBs, read once a pass to name what refused (not once a pod)
        for ref, pod in list(pending.items()):
            ns, name = ref.split("/", 1)
            if disable_eviction:
                status, message = api.delete_pod(ns, name, grace)
                if status in (200, 202, 404):
                    result["break_glass"].append("deleted %s without the eviction API (disable_eviction)" % ref)
            else:
                status, message = api.evict(ns, name, grace)
            if status in (200, 201, 202, 404):
                accepted[ref] = pending.pop(ref)
                result["deleted" if disable_eviction else "evicted"].append(ref)
                result["changed"] = True
                last.pop(ref, None)
            else:
                if ns not in pdb_cache or (status == 429 and ns not in read_this_pass):
                    pdb_cache[ns] = api.pdbs(ns)
                    read_this_pass.add(ns)
                reason = "eviction answered HTTP %d: %s" % (status, message)
                last[ref] = blocker(pod["_node"], pod, reason, pdb_cache[ns] if status == 429 else [])
        for ref, pod in list(accepted.items()):
            ns, name = ref.split("/", 1)
            if not api.pod_exists(ns, name, (pod.get("metadata") or {}).get("uid", "")):
                accepted.pop(ref)
        if not pending and not accepted:
            return result
        if clock() >= deadline:
            blockers = list(last.values()) + [
                blocker(p["_node"], p, "was evicted but is still terminating") for p in accepted.values()]
            result["blockers"] = blockers
            raise DrainBlocked("drain of %s did not finish in %ds; still there:\n%s\nFix: relax or satisfy the "
                               "PodDisruptionBudget (or move the workload) and rerun; break glass only with "
                               "disable_eviction=true (recorded in the change record)" % (
                                   ", ".join(nodes), int(timeout), "\n".join(b["message"] for b in blockers)),
                               **result)
        # a refused eviction is retried every ``interval``; pods only terminating are looked at every second, as
        # kubectl drain does, so a drain does not idle for the interval after its last eviction
        sleep(interval if pending else min(interval, DELETE_POLL_SECONDS))
