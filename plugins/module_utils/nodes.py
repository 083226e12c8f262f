# Copyright: gpufleet contributors
# Apache License 2.0
"""Per-node upgrade state kept on the Node object (pure functions).

The ledger is a set of annotations (see kube.py): the target version, the phase the node reached, the reason
it failed, and whether it was unschedulable before gpufleet cordoned it. A rerun reads them to skip finished
nodes; uncordon reads ``unschedulable-before`` so a node an operator had cordoned stays cordoned.
"""
from __future__ import annotations

from typing import Any, Dict, Optional

from ansible_collections.gpufleet.upgrade.plugins.module_utils import kube
from ansible_collections.gpufleet.upgrade.plugins.module_utils.errors import InputError

PHASES = ("cordoned", "drained", "upgraded", "validated", "done", "failed")
STATES = ("cordoned", "uncordoned", "marked")


def node_annotations(node: Dict[str, Any]) -> Dict[str, str]:
    return dict((node.get("metadata") or {}).get("annotations") or {})


def unschedulable(node: Dict[str, Any]) -> bool:
    return bool((node.get("spec") or {}).get("unschedulable"))


def progress(node: Dict[str, Any], target: str) -> Dict[str, Any]:
    """What the ledger says about this node for ``target``: phase ('' when the node has no record for this
    target), reason, whether gpufleet holds it cordoned, and whether it counts as finished."""
    ann = node_annotations(node)
    same = ann.get(kube.ANN_TARGET) == target
    phase = ann.get(kube.ANN_PHASE, "") if same else ""
    return {"name": (node.get("metadata") or {}).get("name", ""), "target": ann.get(kube.ANN_TARGET, ""),
            "phase": phase, "reason": ann.get(kube.ANN_REASON, "") if same else "",
            "unschedulable": unschedulable(node), "held_by_gpufleet": kube.ANN_UNSCHED_BEFORE in ann,
            "unschedulable_before": ann.get(kube.ANN_UNSCHED_BEFORE) == "true",
            "finished": phase == "done" and kube.ANN_UNSCHED_BEFORE not in ann}


def plan_patch(node: Dict[str, Any], state: str, target: str, phase: Optional[str] = None,
               reason: Optional[str] = None, now: str = "") -> Optional[Dict[str, Any]]:
    """The patch that brings ``node`` to ``state`` (None when it is already there: idempotent).

    - cordoned: unschedulable, remembering the state before (only the first time: a rerun must not record
      gpufleet's own cordon as the operator's); phase defaults to 'cordoned'.
    - uncordoned: back to the remembered state (a node that was cordoned before stays cordoned); phase defaults
      to 'done'; the reason is cleared.
    - marked: only the phase and reason (e.g. 'failed' with the gate that failed); scheduling is not touched.
    """
    if state not in STATES:
        raise InputError("state %r: use one of %s" % (state, ", ".join(STATES)))
    ann = node_annotations(node)
    if not phase and state == "cordoned" and ann.get(kube.ANN_TARGET) == target:
        if ann.get(kube.ANN_PHASE) in ("cordoned", "drained", "upgraded", "validated"):
            phase = ann[kube.ANN_PHASE]  # a rerun re-cordons without losing how far the node got
        elif ann.get(kube.ANN_PHASE) == "failed":
            phase, reason = "cordoned", ""  # a rerun after a failure is a new attempt: the old reason goes
    phase = phase or {"cordoned": "cordoned", "uncordoned": "done"}.get(state)
    if phase is None:
        raise InputError("state 'marked' needs a phase (one of %s)" % ", ".join(PHASES))
    if phase not in PHASES:
        raise InputError("phase %r: use one of %s" % (phase, ", ".join(PHASES)))
    if phase == "failed" and not reason:
        raise InputError("phase 'failed' needs a reason: name the gate and the measured value")
    if not target:
        raise InputError("target: give the version this node is being taken to (e.g. v1.36.3)")
    want_ann: Dict[str, Optional[str]] = {kube.ANN_TARGET: target, kube.ANN_PHASE: phase}
    spec: Dict[str, Any] = {}
    if state == "cordoned":
        if kube.ANN_UNSCHED_BEFORE not in ann:
            want_ann[kube.ANN_UNSCHED_BEFORE] = "true" if unschedulable(node) else "false"
        if not unschedulable(node):
            spec["unschedulable"] = True
    elif state == "uncordoned":
        if kube.ANN_UNSCHED_BEFORE in ann:
            before = ann[kube.ANN_UNSCHED_BEFORE] == "true"
            want_ann[kube.ANN_UNSCHED_BEFORE] = None
            if unschedulable(node) != before:
                spec["unschedulable"] = before
        want_ann[kube.ANN_REASON] = None
    if reason is not None:
        want_ann[kube.ANN_REASON] = reason or None
    delta = {k: v for k, v in want_ann.items() if ann.get(k) != v}
    if not delta and not spec:
        return None
    if now:
        delta[kube.ANN_UPDATED] = now
    patch: Dict[str, Any] = {"metadata": {"annotations": delta}}
    if spec:
        patch["spec"] = spec
    return patch
