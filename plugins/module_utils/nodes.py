# Copyright: gpufleet contributors
# Apache License 2.0
"""Per-node upgrade state kept on the Node object (pure functions).

The ledger is a set of annotations (see kube.py): the target version, the phase the node reached, the reason
it failed, and whether it was unschedulable before gpufleet cordoned it. A rerun reads them to skip finished
nodes; uncordon reads ``unschedulable-before`` so a node an operator had cordoned stays cordoned. The cycle and
its drain count say how often the node was disrupted on the way to a skip-level cycle's last version.
"""
from __future__ import annotations

import re

from typing import Any, Dict, List, Optional, Tuple

from ansible_collections.gpufleet.upgrade.plugins.module_utils import kube
from ansible_collections.gpufleet.upgrade.plugins.module_utils.errors import InputError

PHASES = ("cordoned", "drained", "upgraded", "validated", "done", "failed", "held")
STATES = ("cordoned", "uncordoned", "marked")
# What a node was doing when the run lost it, from the last phase it recorded.
NEXT_STAGE = {"": "its first stage (kubeadm upgrade on a control-plane host, cordon on a GPU node)",
              "cordoned": "drain", "drained": "the package upgrade (kubeadm, kubelet, GPU stack)",
              "upgraded": "validation (GPU, DCGM, NCCL and Node gates)", "validated": "uncordon"}
MAX_REASON = 1000
_VERSION = re.compile(r"v[0-9]+\.[0-9]+\.[0-9]+")  # fullmatch: a whole value, ASCII digits


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
            "finished": phase == "done" and kube.ANN_UNSCHED_BEFORE not in ann,
            "cycle": ann.get(kube.ANN_CYCLE, ""), "cycle_drains": ann.get(kube.ANN_CYCLE_DRAINS, "")}


def cycle_drains(node: Dict[str, Any], cycle: str) -> List[str]:
    """The targets gpufleet cordoned ``node`` for within the cycle ending at ``cycle`` (empty when its ledger names
    another cycle or none): one entry per disruption. A value that is not a list of versions is refused, naming
    the annotation."""
    ann = node_annotations(node)
    if ann.get(kube.ANN_CYCLE) != cycle:
        return []
    raw = ann.get(kube.ANN_CYCLE_DRAINS, "")
    drains = raw.split(",") if raw else []
    if not all(_VERSION.fullmatch(d) for d in drains):
        raise InputError("%s: annotation %s=%r is not a list of versions; it is gpufleet's own record - remove it "
                         "together with %s (the cycle's count then starts again)" % (
                             (node.get("metadata") or {}).get("name", "node"), kube.ANN_CYCLE_DRAINS, raw,
                             kube.ANN_CYCLE))
    return drains


def plan_patch(node: Dict[str, Any], state: str, target: str, phase: Optional[str] = None,
               reason: Optional[str] = None, now: str = "", cycle: str = "") -> Optional[Dict[str, Any]]:
    """The patch that brings ``node`` to ``state`` (None when it is already there: idempotent).

    - cordoned: unschedulable, remembering the state before (only the first time: a rerun must not record
      gpufleet's own cordon as the operator's); phase defaults to 'cordoned'.
    - uncordoned: back to the remembered state (a node that was cordoned before stays cordoned); phase defaults
      to 'done'; the reason is cleared.
    - marked: only the phase and reason (e.g. 'failed' with the gate that failed); scheduling is not touched.

    A cordon records its target among the drains of the cycle ``cycle`` (default: the target itself, a cycle of
    one hop); a rerun's cordon for the same target does not count again.
    """
    if state not in STATES:
        raise InputError("state %r: use one of %s" % (state, ", ".join(STATES)))
    ann = node_annotations(node)
    if not phase and state == "cordoned" and ann.get(kube.ANN_TARGET) == target:
        if ann.get(kube.ANN_PHASE) in ("cordoned", "drained", "upgraded"):
            phase = ann[kube.ANN_PHASE]  # a rerun re-cordons without losing how far the node got
        elif ann.get(kube.ANN_PHASE) == "validated":
            phase = "upgraded"  # a validation does not outlive a new cordon: the gates run again
        elif ann.get(kube.ANN_PHASE) in ("failed", "held"):
            phase, reason = "cordoned", ""  # a rerun after a failure is a new attempt: the old reason goes
    phase = phase or {"cordoned": "cordoned", "uncordoned": "done"}.get(state)
    if phase is None:
        raise InputError("state 'marked' needs a phase (one of %s)" % ", ".join(PHASES))
    if phase not in PHASES:
        raise InputError("phase %r: use one of %s" % (phase, ", ".join(PHASES)))
    if phase in ("failed", "held") and not reason:
        raise InputError("phase %r needs a reason: name the gate and the measured value" % phase)
    if not target:
        raise InputError("target: give the version this node is being taken to (e.g. v1.36.3)")
    want_ann: Dict[str, Optional[str]] = {kube.ANN_TARGET: target, kube.ANN_PHASE: phase}
    spec: Dict[str, Any] = {}
    if state == "cordoned":
        cycle = cycle or target  # each target cordoned for is one disruption; a rerun's re-cordon adds none
        drains = cycle_drains(node, cycle)
        want_ann[kube.ANN_CYCLE] = cycle
        want_ann[kube.ANN_CYCLE_DRAINS] = ",".join(drains + ([] if target in drains else [target]))
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


def failure_text(task: str, result: Any) -> str:
    """The reason a task failed, for a Node annotation: ``TASK: message``, or ``TASK: output censored (no_log)``
    when the task hid its output (a failed no_log task's result still holds the values in the play)."""
    task = str(task or "a task")[:200]
    if not isinstance(result, dict):
        return "%s: failed" % task
    if result.get("_ansible_no_log") or result.get("censored"):
        return "%s: output censored (no_log)" % task
    message = str(result.get("msg") or result.get("reason") or "failed")
    stderr = str(result.get("stderr") or "").strip()
    if stderr and stderr not in message:  # a command's own words say more than "non-zero return code"
        message = "%s: %s" % (message, stderr.splitlines()[-1] if len(stderr) > 300 else stderr)
    return ("%s: %s" % (task, " ".join(message.split())))[:MAX_REASON]


def wave_outcome(wave: List[str], failures: Dict[str, str], in_rescue: List[str],
                 phases: Dict[str, str]) -> Dict[str, Any]:
    """How each node of a failed wave ends: its own failure (``failed``), held because of a wave-mate
    (``held``), or lost - not in rescue, no failure of its own: Ansible dropped it as unreachable (``failed``,
    naming the stage from its last recorded phase). Returns ``{marks: {node: (phase, reason)}, message}``."""
    own = {n: failures[n] for n in wave if failures.get(n)}
    lost = [n for n in wave if n not in own and n not in in_rescue]
    marks: Dict[str, Tuple[str, str]] = {}
    for node in lost:
        marks[node] = ("failed", lost_reason(phases.get(node, "")))
    culprits = dict(own, **{n: marks[n][1] for n in lost})
    for node in wave:
        if node in own:
            marks[node] = ("failed", own[node][:MAX_REASON])
        elif node not in marks:
            marks[node] = ("held", ("held: wave-mate %s" % "; wave-mate ".join(
                "%s failed %s" % (n, culprits[n]) for n in sorted(culprits)) if culprits else
                "held: the wave stopped without a recorded failure")[:MAX_REASON])
    message = "; ".join("%s %s (%s)" % (n, marks[n][0], marks[n][1]) for n in wave)
    return {"marks": marks, "message": message, "failed": sorted(own) + sorted(lost),
            "held": sorted(n for n in wave if marks[n][0] == "held")}


def lost_reason(phase: str) -> str:
    return "unreachable during %s (last recorded phase: %s); Ansible lost the host before the stage finished" % (
        NEXT_STAGE.get(phase, "its wave"), phase or "none")


def boundary(progress_list: List[Dict[str, Any]]) -> Dict[str, Any]:
    """Judge a wave boundary: every node of the earlier batches must be ``done``. A node still in a working phase
    was lost by the run (unreachable: a failed or held node has its phase) and is to be marked ``failed``; a node
    with no ledger for the target has not started (it is named, not marked).
    Returns ``{ok, lost: {node: reason}, message}``."""
    lost: Dict[str, str] = {}
    lines = []
    for p in progress_list:
        if p["phase"] == "done":
            continue
        if p["phase"] in ("failed", "held"):
            lines.append("%s is %s (%s)" % (p["name"], p["phase"], p["reason"] or "no reason recorded"))
        elif not p["phase"]:
            # no ledger for this target: never started (or lost before its first recorded step) - not marked
            lines.append("%s has not been upgraded to this target (no ledger for it)" % p["name"])
        else:
            lost[p["name"]] = lost_reason(p["phase"])
            lines.append("%s failed (%s)" % (p["name"], lost[p["name"]]))
    return {"ok": not lines, "lost": lost, "message": "; ".join(lines)}
