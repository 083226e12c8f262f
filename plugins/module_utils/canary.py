# Copyright: gpufleet contributors
# Apache License 2.0
"""Canary workloads: work that runs on the canary nodes after their gates pass and before they go back to service
(the later waves wait on the result).

- Training: a JobSet gang, one rank per canary node of a pool with all its GPUs, running the multi-node NCCL
  all-reduce across them; its bus bandwidth is judged against the pool baseline's ``canary.training_busbw_gbps``.
- Inference: a Deployment (one replica per canary node, a readiness probe) behind a Service, then a latency probe
  Job that sends requests through the Service; its p99 latency and error rate are judged against the baseline's
  ``canary.inference_p99_ms`` and ``canary.inference_max_error_pct``.

The nodes are still cordoned: the workloads tolerate ``node.kubernetes.io/unschedulable`` and are pinned to the
canary nodes by name, so nothing else lands there before the canaries pass.

Results come back through each container's termination message (``/dev/termination-log``, at most 4096 bytes,
read from the pod's status: no log access is needed, and it is how a Job reports a small result):
- training: rank 0 (JobSet job index 0) writes all_reduce_perf's output from its ``# Using devices`` line to the
  end - the rank lines (how many ranks on how many hosts), the table and the footer - or its ``-J`` JSON report;
- latency probe: one JSON object ``{"requests": N, "errors": N, "p50_ms": X, "p99_ms": X}``.

The inputs (``gpufleet_canary_workloads``) are checked with ansible-core's argument-spec validator.
"""
from __future__ import annotations

import hashlib
import json
import math
import time
from typing import Any, Dict, List, Mapping, Optional, Sequence

from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

from ansible_collections.gpufleet.upgrade.plugins.module_utils import nccl
from ansible_collections.gpufleet.upgrade.plugins.module_utils.checks import Check, summarize
from ansible_collections.gpufleet.upgrade.plugins.module_utils.errors import GpufleetError, InputError, ParseError
from ansible_collections.gpufleet.upgrade.plugins.module_utils.textparse import DNS_LABEL

VAR = "gpufleet_canary_workloads"
JOBSET = ("jobset.x-k8s.io", "v1alpha2", "jobsets")
LABEL = "gpufleet.io/canary-workload"
GANG_LABEL = "gpufleet.io/canary-gang"
JOB_INDEX = "jobset.sigs.k8s.io/job-index"  # set by the JobSet controller on each child Job's pods
UNSCHEDULABLE = {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}
MESSAGE_LIMIT = 4096  # the kubelet keeps at most this many bytes of a termination message

_COMMON = {
    "image": {"type": "str", "required": True},
    "command": {"type": "list", "elements": "str", "default": []},
    "args": {"type": "list", "elements": "str", "default": []},
    "env": {"type": "dict", "default": {}},
    "pod_annotations": {"type": "dict", "default": {}},
    "tolerations": {"type": "list", "elements": "dict", "default": []},
}
SPEC: Dict[str, Any] = {
    "namespace": {"type": "str", "default": "gpufleet-canary"},
    "timeout": {"type": "int", "default": 900},
    "training": {"type": "dict", "options": dict(_COMMON, gpus_per_node={"type": "int"})},
    "inference": {"type": "dict", "options": dict(
        _COMMON, port={"type": "int", "required": True}, readiness_path={"type": "str", "default": "/healthz"},
        path={"type": "str", "default": "/"}, gpus_per_replica={"type": "int", "default": 1},
        requests={"type": "int", "default": 200},
        probe={"type": "dict", "required": True, "options": dict(_COMMON)})},
}


def parse_inputs(value: Any, name: str = VAR) -> Dict[str, Any]:
    """The checked workloads: ``{}`` when none is configured, else ``{namespace, timeout, training, inference}``
    with every default filled in (``training``/``inference`` None when not configured)."""
    if value in (None, "", {}):
        return {}
    if not isinstance(value, Mapping):
        raise InputError("%s: expected a mapping {namespace, timeout, training: {...}, inference: {...}}, got %s"
                         % (name, type(value).__name__))
    result = ArgumentSpecValidator(SPEC).validate(dict(value))
    if result.error_messages:
        raise InputError("%s: %s. Nothing was changed." % (name, "; ".join(result.error_messages)))
    out = dict(result.validated_parameters)
    if not out.get("training") and not out.get("inference"):
        raise InputError("%s: neither training nor inference is configured; give at least one, or leave %s unset"
                         % (name, name))
    if not 60 <= out["timeout"] <= 86400:
        raise InputError("%s.timeout: %d s; give 60 to 86400 (each workload must finish within it)" % (
            name, out["timeout"]))
    _dns_label(out["namespace"], "%s.namespace" % name)
    inference = out.get("inference")
    if inference:
        if not 1 <= inference["port"] <= 65535:
            raise InputError("%s.inference.port: %d is not a TCP port" % (name, inference["port"]))
        if not 1 <= inference["requests"] <= 100000:
            raise InputError("%s.inference.requests: %d; give 1 to 100000" % (name, inference["requests"]))
        for key in ("path", "readiness_path"):
            if not str(inference[key]).startswith("/"):
                raise InputError("%s.inference.%s: %r must start with '/'" % (name, key, inference[key]))
    for kind, spec in (("training", out.get("training")), ("inference", out.get("inference")),
                       ("inference.probe", (out.get("inference") or {}).get("probe"))):
        for key in ("env", "pod_annotations"):
            bad = sorted(str(k) for k, v in ((spec or {}).get(key) or {}).items()
                         if isinstance(v, (dict, list)) or v is None)
            if bad:
                raise InputError("%s.%s.%s.%s: give a plain value (a string); %s" % (
                    name, kind, key, bad[0], "gpufleet puts literal values only, never a secret: mount one with "
                    "the image's own configuration" if key == "env" else "annotation values are strings"))
        for i, tol in enumerate((spec or {}).get("tolerations") or []):
            unknown = sorted(set(tol) - {"key", "operator", "value", "effect", "tolerationSeconds"})
            if unknown:
                raise InputError("%s.%s.tolerations[%d]: unknown field(s) %s; a toleration has key, operator, value, "
                                 "effect, tolerationSeconds" % (name, kind, i, ", ".join(unknown)))
    for kind in ("training", "inference"):
        spec = out.get(kind)
        for key in ("gpus_per_node", "gpus_per_replica"):
            if spec and spec.get(key) is not None and not 1 <= spec[key] <= 64:
                raise InputError("%s.%s.%s: %d; give 1 to 64" % (name, kind, key, spec[key]))
    return out


def _dns_label(value: str, where: str) -> str:
    if not DNS_LABEL.fullmatch(value):  # ASCII: isdigit() takes Unicode
        raise InputError("%s: %r is not a Kubernetes name (lower-case letters, digits and '-', at most 63)" % (
            where, value))
    return value


def baseline_gaps(workloads: Mapping[str, Any], pools: Mapping[str, Mapping[str, Any]]) -> List[str]:
    """What the pool baselines lack for the configured workloads, one line per pool and field (empty: none)."""
    need = []
    if workloads.get("training"):
        need.append(("training_busbw_gbps", "the canary gang's NCCL bus bandwidth in GB/s per message size"))
    if workloads.get("inference"):
        need.append(("inference_p99_ms", "the inference canary's p99 latency ceiling in ms"))
    return ["pool %s: baseline canary.%s is not set (%s); add it to %s.yml or take the workload out of %s" % (
        pool, key, why, pool, VAR) for pool, info in sorted(pools.items()) for key, why in need
        if (info.get("baseline") or {}).get("canary", {}).get(key) in (None, {})]


def require(workloads: Mapping[str, Any], kind: str, nodes: Sequence[str], gaps: Sequence[str]) -> None:
    """Refuse, before anything is created, a workload that is not configured, no or repeated nodes, or a baseline
    without the figures to judge it by."""
    if not workloads.get(kind):
        raise InputError("workloads.%s: not configured; set %s.%s (image ...) or do not run this workload" % (
            kind, VAR, kind))
    if not nodes or len(set(nodes)) != len(nodes) or not all(isinstance(n, str) and n for n in nodes):
        raise InputError("nodes: %r; give each canary node once" % (list(nodes),))
    if gaps:
        raise InputError("; ".join(gaps) + ". Nothing was changed.")


def object_name(kind: str, pool: str) -> str:
    """A stable name per workload and pool (a rerun replaces the objects of an earlier try)."""
    base = "gpufleet-canary-%s-%s" % (kind, pool.replace(".", "-").replace("_", "-"))
    if len(base) > 40:  # the JobSet controller appends -<job>-<index>-<index>-<suffix> to pod names
        base = "%s-%s" % (base[:31].rstrip("-"), hashlib.sha256(base.encode()).hexdigest()[:8])
    return base


def _env(spec: Mapping[str, Any], extra: Mapping[str, str]) -> List[Dict[str, str]]:
    merged = dict((str(k), str(v)) for k, v in (spec.get("env") or {}).items())
    merged.update(extra)
    return [{"name": k, "value": v} for k, v in sorted(merged.items())]


def _container(name: str, spec: Mapping[str, Any], env: Mapping[str, str], gpus: int = 0) -> Dict[str, Any]:
    out: Dict[str, Any] = {"name": name, "image": spec["image"], "env": _env(spec, env),
                           "terminationMessagePolicy": "FallbackToLogsOnError"}
    if spec.get("command"):
        out["command"] = list(spec["command"])
    if spec.get("args"):
        out["args"] = list(spec["args"])
    if gpus:
        out["resources"] = {"limits": {"nvidia.com/gpu": str(gpus)}, "requests": {"nvidia.com/gpu": str(gpus)}}
    return out


def _pinned(nodes: Sequence[str], selector: Mapping[str, str]) -> Dict[str, Any]:
    """Affinity: only the given nodes (by name, not by a hostname label that may differ), one pod per node."""
    by_name = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": list(nodes)}]}
    apart = {"labelSelector": {"matchLabels": dict(selector)}, "topologyKey": "kubernetes.io/hostname"}
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [by_name]}},
            "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [apart]}}


def _labels(kind: str, run_id: str) -> Dict[str, str]:
    return {"app.kubernetes.io/managed-by": "gpufleet", LABEL: kind,
            "gpufleet.io/run-id": run_id[:63].rstrip("-_.") or "none"}


def training_jobset(name: str, namespace: str, nodes: Sequence[str], spec: Mapping[str, Any], gpus: int,
                    nccl_args: Sequence[str], run_id: str) -> Dict[str, Any]:
    """The training canary: a JobSet of one rank per node (each a Job of one pod with ``gpus`` GPUs), no restarts
    (a failed rank is a failed canary, not something to retry past)."""
    labels = _labels("training", run_id)
    gang = {GANG_LABEL: name}
    env = {"GPUFLEET_CANARY_GANG": name, "GPUFLEET_CANARY_NODES": ",".join(nodes),
           "GPUFLEET_CANARY_RANKS": str(len(nodes)), "GPUFLEET_CANARY_GPUS_PER_NODE": str(gpus),
           "GPUFLEET_NCCL_ARGS": " ".join(nccl_args)}
    pod = {"metadata": {"labels": dict(labels, **gang), "annotations": dict(spec.get("pod_annotations") or {})},
           "spec": {"restartPolicy": "Never", "affinity": _pinned(nodes, gang),
                    "tolerations": [UNSCHEDULABLE] + list(spec.get("tolerations") or []),
                    "containers": [_container("nccl", spec, env, gpus)]}}
    return {"apiVersion": "%s/%s" % JOBSET[:2], "kind": "JobSet",
            "metadata": {"name": name, "namespace": namespace, "labels": labels},
            "spec": {"failurePolicy": {"maxRestarts": 0}, "replicatedJobs": [{
                "name": "ranks", "replicas": len(nodes), "template": {"spec": {
                    "parallelism": 1, "completions": 1, "backoffLimit": 0, "template": pod}}}]}}


def inference_objects(name: str, namespace: str, nodes: Sequence[str], spec: Mapping[str, Any],
                      run_id: str) -> List[Dict[str, Any]]:
    """The inference canary: a Deployment with one replica per node and a readiness probe, and its Service."""
    labels = _labels("inference", run_id)
    selector = {GANG_LABEL: name}
    container = _container("server", spec, {"GPUFLEET_CANARY_NODES": ",".join(nodes)},
                           int(spec.get("gpus_per_replica") or 1))
    container["ports"] = [{"name": "http", "containerPort": int(spec["port"])}]
    container["readinessProbe"] = {"httpGet": {"path": spec["readiness_path"], "port": int(spec["port"])},
                                   "periodSeconds": 5, "failureThreshold": 3}
    container.pop("terminationMessagePolicy")
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment",
                  "metadata": {"name": name, "namespace": namespace, "labels": labels},
                  "spec": {"replicas": len(nodes), "selector": {"matchLabels": selector},
                           "strategy": {"type": "Recreate"},
                           "template": {"metadata": {"labels": dict(labels, **selector),
                                                     "annotations": dict(spec.get("pod_annotations") or {})},
                                        "spec": {"affinity": _pinned(nodes, selector),
                                                 "tolerations": [UNSCHEDULABLE] + list(spec.get("tolerations") or []),
                                                 "containers": [container]}}}}
    service = {"apiVersion": "v1", "kind": "Service",
               "metadata": {"name": name, "namespace": namespace, "labels": labels},
               "spec": {"selector": selector, "ports": [{"name": "http", "port": int(spec["port"]),
                                                         "targetPort": int(spec["port"])}]}}
    return [deployment, service]


def probe_job(name: str, namespace: str, service: str, spec: Mapping[str, Any], run_id: str) -> Dict[str, Any]:
    """The latency probe: one pod that sends ``requests`` requests through the Service and writes its JSON result
    to its termination message. It runs anywhere the scheduler puts it (it is a client)."""
    probe = spec["probe"]
    labels = _labels("latency-probe", run_id)
    url = "http://%s.%s.svc:%d%s" % (service, namespace, int(spec["port"]), spec["path"])
    env = {"GPUFLEET_CANARY_URL": url, "GPUFLEET_CANARY_REQUESTS": str(spec["requests"]),
           "GPUFLEET_CANARY_SERVICE": service}
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": namespace, "labels": labels},
            "spec": {"backoffLimit": 0, "template": {
                "metadata": {"labels": dict(labels, **{GANG_LABEL: name}),
                             "annotations": dict(probe.get("pod_annotations") or {})},
                "spec": {"restartPolicy": "Never", "tolerations": list(probe.get("tolerations") or []),
                         "containers": [_container("probe", probe, env)]}}}}


# -- reading results ------------------------------------------------------------------------------------------------
def termination(pod: Mapping[str, Any]) -> Optional[Dict[str, Any]]:
    """The first container's terminated state ({exitCode, reason, message}) or None while it has not ended."""
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        state = (status.get("state") or {}).get("terminated")
        if state:
            return {"exitCode": state.get("exitCode"), "reason": state.get("reason") or "",
                    "message": state.get("message") or ""}
    return None


def waiting_reason(pods: Sequence[Mapping[str, Any]], expected: int) -> str:
    """Why pods are not all running yet, in one line (unscheduled with the scheduler's message, waiting, missing)."""
    parts = []
    if len(pods) < expected:
        parts.append("%d of %d pod(s) created" % (len(pods), expected))
    for pod in pods:
        name = (pod.get("metadata") or {}).get("name", "?")
        status = pod.get("status") or {}
        for cond in status.get("conditions") or []:
            if cond.get("type") == "PodScheduled" and cond.get("status") == "False":
                parts.append("%s unscheduled: %s" % (name, (cond.get("message") or cond.get("reason") or "")[:300]))
        for cs in status.get("containerStatuses") or []:
            waiting = (cs.get("state") or {}).get("waiting")
            if waiting:
                parts.append("%s waiting: %s %s" % (name, waiting.get("reason", ""), waiting.get("message", "")[:200]))
        if not status.get("conditions") and not status.get("containerStatuses"):
            parts.append("%s %s" % (name, status.get("phase") or "pending"))
    return "; ".join(parts) or "no pod reported anything"


def rank_zero(pods: Sequence[Mapping[str, Any]]) -> Optional[Mapping[str, Any]]:
    for pod in pods:
        if ((pod.get("metadata") or {}).get("labels") or {}).get(JOB_INDEX) == "0":
            return pod
    return None


def judge_training(pods: Sequence[Mapping[str, Any]], nodes: Sequence[str], gpus: int, baseline: Mapping[str, Any],
                   subject: str) -> Dict[str, Any]:
    """The training canary's gate from its finished pods: every rank ran on its own canary node and exited 0; rank
    0's all-reduce result shows ``len(nodes) x gpus`` ranks on ``len(nodes)`` hosts (the collective spanned every
    node: a one-node result passes a multi-node figure without touching the network) and holds the baseline's
    ``canary.training_busbw_gbps`` (within ``canary.training_tolerance_pct``), with no wrong elements or NCCL
    errors."""
    checks: List[Check] = []
    placed = sorted(str((p.get("spec") or {}).get("nodeName") or "") for p in pods)
    checks.append(Check("canary_training_placement", subject, placed == sorted(nodes), ",".join(placed) or "none",
                        ",".join(sorted(nodes)), "one rank on each canary node"))
    for pod in pods:
        name = (pod.get("metadata") or {}).get("name", "?")
        end = termination(pod)
        if end is None:
            checks.append(Check("canary_training_rank_exit", "%s %s" % (subject, name), False, "did not end",
                                "exit 0"))
            continue
        checks.append(Check("canary_training_rank_exit", "%s %s" % (subject, name), end["exitCode"] == 0,
                            "exit %s %s" % (end["exitCode"], end["reason"]), "exit 0",
                            end["message"][-300:] if end["exitCode"] != 0 else ""))
    canary = baseline.get("canary") or {}
    zero = rank_zero(pods)
    message = (termination(zero) or {}).get("message", "") if zero else ""
    if not message.strip():
        checks.append(Check("canary_training_busbw", subject, False, "no result",
                            "all_reduce_perf output in rank 0's termination message",
                            "rank 0 (label %s=0) wrote nothing to /dev/termination-log" % JOB_INDEX))
        return dict(summarize(checks), busbw={})
    try:
        parsed = nccl.parse_output(message)
    except ParseError as exc:
        checks.append(Check("canary_training_busbw", subject, False, "unreadable result",
                            "all_reduce_perf output", "%s (rank 0's termination message, %d bytes%s)" % (
                                exc.msg, len(message.encode()),
                                "; it is at the kubelet's limit: write from '# Using devices' on, or -J JSON"
                                if len(message.encode()) >= MESSAGE_LIMIT else "")))
        return dict(summarize(checks), busbw={})
    want = "%d ranks on %d hosts" % (len(nodes) * gpus, len(nodes))
    got = "%d ranks on %d hosts" % (parsed["ranks"], len(parsed["hosts"]))
    checks.append(Check("canary_training_span", subject, got == want, got, want,
                        "the result lists no ranks: write from all_reduce_perf's '# Using devices' line on"
                        if not parsed["ranks"] else "the all-reduce must span every canary node with all its GPUs"))
    policy = {"nccl": {"busbw_gbps": canary.get("training_busbw_gbps") or {},
                       "tolerance_pct": canary.get("training_tolerance_pct", 10.0), "min_runs": 1},
              "opt_out": {}}
    judged = nccl.judge_runs([parsed], policy, node=subject)
    for check in judged["checks"]:
        if check["name"] == "nccl_runs":
            continue
        checks.append(Check("canary_training_" + check["name"][len("nccl_"):], check["subject"], check["passed"],
                            check["measured"], check["expected"], check["detail"], check["severity"]))
    busbw = {nccl.human_size(int(k)): v for k, v in (judged.get("median_busbw") or {}).items()}
    return dict(summarize(checks), busbw=busbw)


LATENCY_KEYS = ("requests", "errors", "p50_ms", "p99_ms")


def parse_latency(message: str) -> Dict[str, float]:
    """The latency probe's JSON result; every key present, counts whole and non-negative, latencies finite."""
    if not message.strip():
        raise ParseError("the latency probe wrote no result to its termination message")
    try:
        doc = json.loads(message)
    except ValueError as exc:
        raise ParseError("the latency probe's result is not JSON (%s at position %d)" % (
            exc.__class__.__name__, getattr(exc, "pos", 0)))
    if not isinstance(doc, dict):
        raise ParseError("the latency probe's result is a %s, not a JSON object" % type(doc).__name__)
    missing = [k for k in LATENCY_KEYS if k not in doc]
    if missing:
        raise ParseError("the latency probe's result lacks %s (it must give %s)" % (
            ", ".join(missing), ", ".join(LATENCY_KEYS)))
    out: Dict[str, float] = {}
    for key in LATENCY_KEYS:
        value = doc[key]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
            raise ParseError("the latency probe's %s is %r, not a finite non-negative number" % (key, value))
        if key in ("requests", "errors") and value != int(value):
            raise ParseError("the latency probe's %s is %r, not a whole number" % (key, value))
        out[key] = float(value)
    if out["requests"] < 1:
        raise ParseError("the latency probe sent no request")
    if out["errors"] > out["requests"]:
        raise ParseError("the latency probe reports %d errors of %d requests" % (out["errors"], out["requests"]))
    return out


def judge_inference(ready: int, replicas: int, placed: Sequence[str], nodes: Sequence[str],
                    probe: Optional[Mapping[str, Any]], baseline: Mapping[str, Any], subject: str,
                    requests: int = 1) -> Dict[str, Any]:
    """The inference canary's gate: every replica ready on its own canary node, the probe exited 0 having sent at
    least ``requests`` requests, its p99 latency at most ``canary.inference_p99_ms`` and its error rate at most
    ``canary.inference_max_error_pct``."""
    canary = baseline.get("canary") or {}
    checks = [Check("canary_inference_ready", subject, ready == replicas, "%d/%d ready" % (ready, replicas),
                    "%d/%d ready" % (replicas, replicas), "the Deployment's readiness probe"),
              Check("canary_inference_placement", subject, sorted(placed) == sorted(nodes),
                    ",".join(sorted(placed)) or "none", ",".join(sorted(nodes)), "one replica on each canary node")]
    end = termination(probe) if probe else None
    latency: Dict[str, float] = {}
    if not end or end["exitCode"] != 0:
        checks.append(Check("canary_inference_probe", subject, False,
                            "did not run" if not probe else "did not end" if not end else "exit %s %s" % (
                                end["exitCode"], end["reason"]), "exit 0",
                            (end or {}).get("message", "")[-300:]))
    else:
        try:
            latency = parse_latency(end["message"])
        except ParseError as exc:
            checks.append(Check("canary_inference_probe", subject, False, "unreadable result",
                                "JSON {%s}" % ", ".join(LATENCY_KEYS), exc.msg))
    if latency:
        checks.append(Check("canary_inference_requests", subject, latency["requests"] >= requests,
                            int(latency["requests"]), ">= %d" % requests, "the requests the probe was asked to send"))
        ceiling = float(canary.get("inference_p99_ms") or 0)
        checks.append(Check("canary_inference_p99_ms", subject, latency["p99_ms"] <= ceiling,
                            round(latency["p99_ms"], 2), "<= %.2f ms" % ceiling,
                            "p50 %.2f ms over %d requests" % (latency["p50_ms"], latency["requests"])))
        limit = float(canary.get("inference_max_error_pct", 0.0))
        pct = 100.0 * latency["errors"] / latency["requests"]
        checks.append(Check("canary_inference_errors_pct", subject, pct <= limit, round(pct, 3),
                            "<= %g%%" % limit, "%d of %d requests failed" % (latency["errors"], latency["requests"])))
    return dict(summarize(checks), latency=latency)


# -- running them (through kube.Kube) -------------------------------------------------------------------------------
POLL_SECONDS = 2.0


class _Clock:
    """The deadline of one workload (monotonic clock and sleep injectable for tests)."""

    def __init__(self, timeout: float, clock: Any, sleep: Any) -> None:
        self.clock, self.sleep = clock, sleep
        self.start = clock()
        self.deadline = self.start + timeout

    def left(self) -> float:
        return self.deadline - self.clock()

    def elapsed(self) -> float:
        return round(self.clock() - self.start, 1)


def _condition(obj: Optional[Mapping[str, Any]], names: Sequence[str]) -> str:
    """The first of ``names`` among the object's status conditions that is True ('' when none is)."""
    for cond in ((obj or {}).get("status") or {}).get("conditions") or []:
        if cond.get("type") in names and cond.get("status") == "True":
            return str(cond.get("type"))
    return ""


def _clear(kube: Any, objects: Sequence[Mapping[str, Any]], clock: _Clock) -> None:
    """Delete what an earlier try left (one cut short) and wait until it and its pods are gone."""
    for obj in objects:
        meta = obj["metadata"]
        kube.delete_object(obj["apiVersion"], obj["kind"], meta["namespace"], meta["name"])
    while True:
        left = [o for o in objects if kube.get_object(o["apiVersion"], o["kind"], o["metadata"]["namespace"],
                                                      o["metadata"]["name"]) is not None]
        pods = [p for o in objects for p in kube.list_pods(o["metadata"]["namespace"],
                                                           "%s=%s" % (GANG_LABEL, o["metadata"]["name"]))]
        if not left and not pods:
            return
        if clock.left() <= 0:
            raise InputError("the canary objects of an earlier try are still being deleted (%s); wait and rerun" % (
                ", ".join("%s %s" % (o["kind"], o["metadata"]["name"]) for o in left) or "%d pod(s)" % len(pods)))
        clock.sleep(POLL_SECONDS)


def _wait(clock: _Clock, probe: Any) -> Any:
    """Call ``probe`` until it returns something true or the deadline passes (then its last answer)."""
    while True:
        answer = probe()
        if answer or clock.left() <= 0:
            return answer
        clock.sleep(min(POLL_SECONDS, max(clock.left(), 0.0)))


def _failed(judged: Dict[str, Any], check: Check) -> None:
    judged["checks"].append(check.as_dict())
    judged["failures"].append(check.message())
    judged["passed"] = False


def _result(kind: str, pool: str, nodes: Sequence[str], name: str, namespace: str, judged: Dict[str, Any],
            clock: _Clock, objects: Sequence[Mapping[str, Any]], kube: Any, note: str = "") -> Dict[str, Any]:
    """The run's record. Its objects are deleted whether it passed or not: kept ones would stand in the next try's
    way (a kept JobSet looks like a gang to stop, a kept Deployment's pods come back to the drained canaries);
    the checks and the note carry what was seen."""
    for obj in objects:
        kube.delete_object(obj["apiVersion"], obj["kind"], namespace, obj["metadata"]["name"])
    record = {"workload": kind, "pool": pool, "nodes": list(nodes), "namespace": namespace, "name": name,
              "passed": judged["passed"], "seconds": clock.elapsed()}
    for key in ("busbw", "latency"):
        if key in judged:
            record[key] = judged.pop(key)
    if note:
        record["note"] = note
    msg = "%s canary on %s: %s in %.0f s" % (kind, ",".join(nodes), "passed" if judged["passed"] else "FAILED",
                                             record["seconds"])
    return dict(judged, changed=True, canary=record, msg=msg)


def run_training(kube: Any, nodes: Sequence[str], pool: str, baseline: Mapping[str, Any],
                 workloads: Mapping[str, Any], run_id: str, check_mode: bool = False,
                 clock: Any = None, sleep: Any = None) -> Dict[str, Any]:
    """Run the training canary on ``nodes`` (of ``pool``) and judge it."""
    namespace, name = workloads["namespace"], object_name("train", pool)
    body = objects_of({"workload": "training", "pool": pool, "nodes": nodes, "baseline": baseline}, workloads,
                      run_id)[0]
    if check_mode:
        return {"changed": True, "msg": "check mode: would run JobSet %s/%s on %s" % (
            namespace, name, ",".join(nodes))}
    clk = _Clock(float(workloads["timeout"]), clock or time.monotonic, sleep or time.sleep)
    kube.ensure_namespace(namespace, {"app.kubernetes.io/managed-by": "gpufleet"})
    _clear(kube, [body], clk)
    kube.create_object(body)
    selector = "%s=%s" % (GANG_LABEL, name)
    finished = _wait(clk, lambda: _condition(kube.get_object(body["apiVersion"], "JobSet", namespace, name),
                                             ("Completed", "Failed")))
    pods = kube.list_pods(namespace, selector)
    note = ""
    if not finished:
        js = kube.get_object(body["apiVersion"], "JobSet", namespace, name) or {}
        note = "JobSet %s/%s did not finish within %d s%s: %s" % (
            namespace, name, workloads["timeout"], " (it is suspended: is it queued by Kueue? run the canary "
            "namespace outside Kueue's management)" if (js.get("spec") or {}).get("suspend") else "",
            waiting_reason(pods, len(nodes)))
    gpus = int(body["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][0]
               ["resources"]["limits"]["nvidia.com/gpu"])
    subject = "%s canary gang" % pool
    judged = judge_training(pods, nodes, gpus, baseline, subject)
    if not finished or finished == "Failed":
        _failed(judged, Check("canary_training_finished", subject, False, "timed out" if not finished else "Failed",
                              "Completed within %d s" % workloads["timeout"], note or "the JobSet failed"))
    return _result("training", pool, nodes, name, namespace, judged, clk, [body], kube, note)


def run_inference(kube: Any, nodes: Sequence[str], pool: str, baseline: Mapping[str, Any],
                  workloads: Mapping[str, Any], run_id: str, check_mode: bool = False,
                  clock: Any = None, sleep: Any = None) -> Dict[str, Any]:
    """Run the inference canary on ``nodes`` (of ``pool``): serve, wait for readiness, probe latency, judge."""
    namespace, name = workloads["namespace"], object_name("serve", pool)
    *objects, job = objects_of({"workload": "inference", "pool": pool, "nodes": nodes, "baseline": baseline},
                               workloads, run_id)
    if check_mode:
        return {"changed": True, "msg": "check mode: would serve Deployment %s/%s on %s and probe it" % (
            namespace, name, ",".join(nodes))}
    clk = _Clock(float(workloads["timeout"]), clock or time.monotonic, sleep or time.sleep)
    kube.ensure_namespace(namespace, {"app.kubernetes.io/managed-by": "gpufleet"})
    _clear(kube, objects + [job], clk)
    for obj in objects:
        kube.create_object(obj)
    subject = "%s canary service" % pool

    def ready() -> int:
        dep = kube.get_object("apps/v1", "Deployment", namespace, name) or {}
        count = int((dep.get("status") or {}).get("readyReplicas") or 0)
        return count if count >= len(nodes) else 0

    ready_count = _wait(clk, ready)
    pods = kube.list_pods(namespace, "%s=%s" % (GANG_LABEL, name))
    if not ready_count:
        ready_count = sum(1 for p in pods if _pod_ready(p))
    placed = [str((p.get("spec") or {}).get("nodeName") or "") for p in pods if _pod_ready(p)]
    note, probe = "", None
    if ready_count < len(nodes):
        note = "Deployment %s/%s not ready within %d s: %s" % (
            namespace, name, workloads["timeout"], waiting_reason(pods, len(nodes)))
    else:
        kube.create_object(job)
        finished = _wait(clk, lambda: _condition(kube.get_object("batch/v1", "Job", namespace,
                                                                 job["metadata"]["name"]), ("Complete", "Failed")))
        probes = kube.list_pods(namespace, "%s=%s" % (GANG_LABEL, job["metadata"]["name"]))
        probe = probes[-1] if probes else None
        if not finished:
            note = "latency probe Job %s/%s did not finish within %d s: %s" % (
                namespace, job["metadata"]["name"], workloads["timeout"], waiting_reason(probes, 1))
    judged = judge_inference(ready_count, len(nodes), placed, nodes, probe, baseline, subject,
                             int(workloads["inference"]["requests"]))
    if note:
        _failed(judged, Check("canary_inference_finished", subject, False, "timed out",
                              "finished within %d s" % workloads["timeout"], note))
    return _result("inference", pool, nodes, name, namespace, judged, clk, objects + [job], kube, note)


def _pod_ready(pod: Mapping[str, Any]) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (pod.get("status") or {}).get("conditions") or [])


def plan_runs(runs: Sequence[Mapping[str, Any]], pools: Mapping[str, Any], value: Any,
              pending: Optional[Sequence[str]] = None) -> Dict[str, Any]:
    """Check every run before any is started: the workloads, each pool's baseline and its figures, the nodes.
    ``pending``: only these nodes (a rerun's unfinished ones); a run left with none is dropped.
    Returns ``{workloads, runs: [{workload, pool, nodes, baseline}]}``."""
    from ansible_collections.gpufleet.upgrade.plugins.module_utils.baseline import validate
    workloads = parse_inputs(value, "workloads")
    if not runs:
        raise InputError("runs: empty; give each {workload, pool, nodes} to run (the cell module's "
                         "gpu_waves[].canary_runs)")
    out = []
    for i, run in enumerate(runs):
        pool = run["pool"]
        info = pools.get(pool)
        if not isinstance(info, Mapping) or not isinstance(info.get("baseline"), Mapping):
            raise InputError("runs[%d].pool: %r has no baseline in pools (pools: %s)" % (
                i, pool, ", ".join(sorted(pools)) or "none"))
        baseline = validate(info["baseline"], "baseline of pool %s" % pool)
        kind = run["workload"]
        require(workloads, kind, run["nodes"], baseline_gaps({kind: workloads.get(kind)},
                                                             {pool: {"baseline": baseline}}))
        if kind == "training":
            span = span_problem(pool, run["nodes"], baseline)
            if span:
                raise InputError(span + ". Nothing was changed.")
            # the gang spans every canary node of the pool, or it would not measure what the baseline holds
            nodes = list(run["nodes"]) if pending is None or set(run["nodes"]) & set(pending) else []
        else:
            nodes = [n for n in run["nodes"] if pending is None or n in pending]
        if nodes:
            out.append({"workload": kind, "pool": pool, "nodes": nodes, "baseline": baseline})
    return {"workloads": workloads, "runs": out}


def span_problem(pool: str, nodes: Sequence[str], baseline: Mapping[str, Any]) -> str:
    """Why the training canary of ``pool`` on ``nodes`` would not measure what the baseline's figures are for
    ('' when it would): they were measured across ``canary.training_nodes`` nodes."""
    want = int((baseline.get("canary") or {}).get("training_nodes") or 2)
    if len(nodes) == want:
        return ""
    return ("pool %s: the training canary's figures (baseline canary.training_busbw_gbps) are for a gang of %d "
            "node(s), but the pool has %d canary node(s) in its wave (%s); mark %d canaries with gpufleet_canary, "
            "or measure the figures across %d and set canary.training_nodes: %d" % (
                pool, want, len(nodes), ",".join(nodes), want, len(nodes), len(nodes)))


def canary_runs(workloads: Mapping[str, Any], wave_nodes: Sequence[str], host_pool: Mapping[str, str],
                pools: Optional[Mapping[str, Mapping[str, Any]]] = None) -> List[Dict[str, Any]]:
    """What a canary wave runs: each configured workload on each pool's nodes of the wave (training first).
    With ``pools`` (pool -> {baseline}), a training gang whose size is not the one its figures are for is
    refused (:func:`span_problem`)."""
    by_pool: Dict[str, List[str]] = {}
    for node in wave_nodes:
        by_pool.setdefault(host_pool[node], []).append(node)
    kinds = [kind for kind in ("training", "inference") if workloads.get(kind)]
    problems = [span_problem(pool, nodes, pools[pool]["baseline"]) for pool, nodes in sorted(by_pool.items())
                if pools is not None and "training" in kinds]
    if any(problems):
        raise InputError("%s. Nothing was changed." % "; ".join(p for p in problems if p))
    return [{"workload": kind, "pool": pool, "nodes": nodes}
            for kind in kinds for pool, nodes in sorted(by_pool.items())]


def objects_of(run: Mapping[str, Any], workloads: Mapping[str, Any], run_id: str) -> List[Dict[str, Any]]:
    """Every object a planned run creates (what a later try deletes first)."""
    namespace, pool, nodes = workloads["namespace"], run["pool"], run["nodes"]
    if run["workload"] == "training":
        spec = workloads["training"]
        gpus = int(spec.get("gpus_per_node") or run["baseline"]["gpu"]["count"])
        return [training_jobset(object_name("train", pool), namespace, nodes, spec, gpus,
                                run["baseline"]["nccl"]["args"], run_id)]
    name = object_name("serve", pool)
    return inference_objects(name, namespace, nodes, workloads["inference"], run_id) + [
        probe_job(name + "-probe", namespace, name, workloads["inference"], run_id)]


def prepare(kube: Any, plan: Mapping[str, Any], run_id: str, check_mode: bool = False, clock: Any = None,
            sleep: Any = None) -> Dict[str, Any]:
    """Before the canaries are drained: delete every object the planned runs create (what a try cut short left)
    and wait until they are gone, then create each as a server-side dry run - the API (JobSet) served, the
    objects valid, admission (Pod Security, policies) and RBAC allowing them - so a workload that cannot run is
    refused before anything on the canaries changes."""
    objects = [obj for run in plan["runs"] for obj in objects_of(run, plan["workloads"], run_id)]
    namespace = plan["workloads"]["namespace"]
    created = False if check_mode else kube.ensure_namespace(namespace, {"app.kubernetes.io/managed-by": "gpufleet"})
    found = [o for o in objects if kube.get_object(o["apiVersion"], o["kind"], o["metadata"]["namespace"],
                                                   o["metadata"]["name"]) is not None]
    names = ["%s %s/%s" % (o["kind"], o["metadata"]["namespace"], o["metadata"]["name"]) for o in found]
    if found and not check_mode:
        _clear(kube, found, _Clock(float(plan["workloads"]["timeout"]), clock or time.monotonic,
                                   sleep or time.sleep))
    refused = []
    for obj in objects if not check_mode or kube.get_object("v1", "Namespace", "", namespace) else []:
        try:
            kube.create_object(obj, dry_run=True)
        except GpufleetError as exc:
            refused.append(exc.msg)
    if refused:
        raise InputError("the canary workloads cannot run (checked with a server-side dry run before the canaries "
                         "are drained; nothing on them changed): %s. Fix gpufleet_canary_workloads, the namespace "
                         "%s (Pod Security, policies) or the credentials' RBAC" % ("; ".join(refused), namespace))
    return {"changed": bool(found) or bool(created), "removed": names, "checked": len(objects),
            "msg": "%s; %d object(s) pass a server-side dry run" % (
                "removed %s" % ", ".join(names) if names else "no canary workload object left from a try",
                len(objects))}


def run_all(kube: Any, plan: Mapping[str, Any], run_id: str, check_mode: bool = False,
            clock: Any = None, sleep: Any = None) -> Dict[str, Any]:
    """Run every planned workload (all of them, so one failure does not hide another) and merge their gates."""
    checks: List[Dict[str, Any]] = []
    failures: List[str] = []
    records: List[Dict[str, Any]] = []
    msgs: List[str] = []
    if not check_mode:
        # what earlier tries left goes first, all of it: a left inference replica holds a GPU the gang needs
        left = [obj for run in plan["runs"] for obj in objects_of(run, plan["workloads"], run_id)]
        _clear(kube, left, _Clock(float(plan["workloads"]["timeout"]), clock or time.monotonic, sleep or time.sleep))
    for run in plan["runs"]:
        fn = run_training if run["workload"] == "training" else run_inference
        res = fn(kube, run["nodes"], run["pool"], run["baseline"], plan["workloads"], run_id, check_mode,
                 clock=clock, sleep=sleep)
        msgs.append(res["msg"])
        checks += res.get("checks") or []
        failures += res.get("failures") or []
        if "canary" in res:
            records.append(res["canary"])
    if check_mode:
        return {"changed": True, "passed": None, "msg": "; ".join(msgs), "canary": []}
    passed = all(r["passed"] for r in records) and len(records) == len(plan["runs"])
    text = "; ".join(msgs + ([] if passed else ["failed: %s" % "; ".join(failures)]))
    return {"changed": True, "passed": passed, "checks": checks, "failures": failures, "canary": records,
            "msg": "canary workloads: %s" % text}
