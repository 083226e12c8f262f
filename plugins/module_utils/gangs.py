# Copyright: gpufleet contributors
# Apache License 2.0
"""Training gangs on nodes about to be drained: checkpoint-and-yield, stop as a unit, resume (docs/reference.md
section 4).

A gang is a JobSet (``jobset.x-k8s.io/v1alpha2``) with at least one pod on the given nodes, and the Kueue
Workload that admits it when there is one. Checkpoint: gpufleet sets ``gpufleet.io/checkpoint-requested: TOKEN``
on the JobSet and waits for the job to answer ``gpufleet.io/checkpoint-completed: TOKEN`` (Kueue has no
checkpoint API; the annotation pair is the contract with the training framework's controller). Stop: Workload
``spec.active=false`` (Kueue suspends the JobSet and deletes every pod at once), or ``spec.suspend=true`` on a
JobSet without a Workload; either way the object is marked ``gpufleet.io/stopped-by: RUN`` and
``gpufleet.io/stopped-nodes: NODE,...``. Resume finds every gang any gpufleet run stopped (whatever its run id)
and gives it back to Kueue once the nodes it was stopped for are back in service (Ready, and no longer held
cordoned by gpufleet); a gang whose nodes are not is reported with why, and stays stopped. I/O goes through an
object with kube.Kube's methods; time is injected.
"""
from __future__ import annotations

import time
from typing import Any, Callable, Dict, List, Optional, Set, Tuple

from ansible_collections.gpufleet.upgrade.plugins.module_utils import kube
from ansible_collections.gpufleet.upgrade.plugins.module_utils.errors import GpufleetError

Key = Tuple[str, str]  # (namespace, jobset name)


class GangError(GpufleetError):
    """A gang did not checkpoint or stop in time. Nothing was stopped that had not checkpointed."""


def _meta(obj: Dict[str, Any]) -> Dict[str, Any]:
    return obj.get("metadata") or {}


def jobset_of_pod(pod: Dict[str, Any]) -> Optional[Key]:
    meta = _meta(pod)
    name = (meta.get("labels") or {}).get(kube.JOBSET_NAME_LABEL)
    if not name:
        name = next((r["name"] for r in meta.get("ownerReferences") or [] if r.get("kind") == "JobSet"), None)
    return (meta.get("namespace", ""), name) if name else None


def workload_of(jobset: Dict[str, Any], workloads: List[Dict[str, Any]]) -> Optional[Dict[str, Any]]:
    """The Kueue Workload of a JobSet: owned by it (what Kueue creates), or labelled with its name."""
    meta = _meta(jobset)
    for wl in workloads:
        wmeta = _meta(wl)
        if wmeta.get("namespace") != meta.get("namespace"):
            continue
        if any(r.get("kind") == "JobSet" and (r.get("uid") == meta.get("uid") or r.get("name") == meta.get("name"))
               for r in wmeta.get("ownerReferences") or []):
            return wl
        if (wmeta.get("labels") or {}).get(kube.JOBSET_NAME_LABEL) == meta.get("name"):
            return wl
    return None


def live_jobset_of_pod(pod: Dict[str, Any]) -> Optional[Key]:
    """The JobSet of a pod that is not being deleted (a terminating rank holds no gang on its node)."""
    return None if _meta(pod).get("deletionTimestamp") else jobset_of_pod(pod)


def find_gangs(pods_by_node: Dict[str, List[Dict[str, Any]]], jobsets: List[Dict[str, Any]],
               workloads: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """Gangs with a live pod on any of the nodes, sorted; each names its nodes and Workload."""
    on: Dict[Key, List[str]] = {}
    for node, pods in sorted(pods_by_node.items()):
        for pod in pods:
            key = live_jobset_of_pod(pod)
            if key:
                on.setdefault(key, [])
                if node not in on[key]:
                    on[key].append(node)
    by_key = {(_meta(j).get("namespace", ""), _meta(j).get("name", "")): j for j in jobsets}
    gangs = []
    for key in sorted(on):
        js = by_key.get(key)
        wl = workload_of(js, workloads) if js else None
        gangs.append({"namespace": key[0], "jobset": key[1], "nodes": on[key], "exists": js is not None,
                      "workload": _meta(wl).get("name") if wl else None,
                      "last_checkpoint": (_meta(js).get("annotations") or {}).get(kube.ANN_LAST_CHECKPOINT) if js
                      else None})
    return gangs


def confirmed(jobset: Dict[str, Any], token: str) -> bool:
    return (_meta(jobset).get("annotations") or {}).get(kube.ANN_CHECKPOINT_DONE) == token


def is_stopped(jobset: Dict[str, Any], workload: Optional[Dict[str, Any]]) -> bool:
    if workload is not None:
        return (workload.get("spec") or {}).get("active") is False
    return bool((jobset.get("spec") or {}).get("suspend"))


def stop_patch(workload: Optional[Dict[str, Any]], run_id: str,
               nodes: Optional[List[str]] = None) -> Tuple[str, Dict[str, Any]]:
    """('workload'|'jobset', merge patch) that stops a gang as a unit and marks who stopped it, for which nodes."""
    ann = {kube.ANN_STOPPED_BY: run_id, kube.ANN_STOPPED_NODES: ",".join(sorted(nodes or []))}
    if workload is not None:
        return "workload", {"metadata": {"annotations": ann}, "spec": {"active": False}}
    return "jobset", {"metadata": {"annotations": ann}, "spec": {"suspend": True}}


def resume_patch(kind: str) -> Dict[str, Any]:
    spec = {"active": True} if kind == "workload" else {"suspend": False}
    return {"metadata": {"annotations": {kube.ANN_STOPPED_BY: None, kube.ANN_STOPPED_NODES: None}}, "spec": spec}


def node_blocks(node: Optional[Dict[str, Any]]) -> str:
    """Why a stopped gang's node is not back in service ('' when it is, or when the node is gone)."""
    if node is None:
        return ""
    ann = (_meta(node).get("annotations") or {})
    if kube.ANN_UNSCHED_BEFORE in ann:
        phase = ann.get(kube.ANN_PHASE, "")
        reason = ann.get(kube.ANN_REASON, "")
        return "held cordoned by gpufleet (phase %s%s)" % (phase or "none", ": " + reason[:300] if reason else "")
    ready = next((c.get("status") for c in (node.get("status") or {}).get("conditions") or []
                  if isinstance(c, dict) and c.get("type") == "Ready"), None)
    if ready != "True":
        return "not Ready"
    return ""


class Gangs:
    """The three operations, over an API object with kube.Kube's methods."""

    def __init__(self, api: Any, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.api, self.clock, self.sleep = api, clock, sleep

    def discover(self, nodes: List[str]) -> List[Dict[str, Any]]:
        """The gangs on ``nodes``. Reads the nodes' pods, then only the JobSets they name and those JobSets'
        Workloads: the requests grow with the wave, not with the cluster's gangs (benchmarks/scale_kube.py)."""
        pods, keys = self._live_on(nodes)
        jobsets = [js for js in (self._jobset(key) for key in keys) if js is not None]
        return find_gangs(pods, jobsets, self._workloads(jobsets))

    def _live_on(self, nodes: List[str]) -> Tuple[Dict[str, List[Dict[str, Any]]], List[Key]]:
        """The nodes' pods, and the JobSets their live pods belong to."""
        pods = {n: self.api.pods_on_node(n) for n in nodes}
        return pods, sorted({key for on in pods.values() for key in map(live_jobset_of_pod, on) if key})

    def _jobset(self, key: Key) -> Optional[Dict[str, Any]]:
        """The JobSet, or None when it is gone (its pods are then reported with exists=false)."""
        try:
            return self.api.get_custom(kube.JOBSET, key[0], key[1])
        except kube.KubeError as exc:
            if exc.details.get("status") == 404:
                return None
            raise

    def _workloads(self, jobsets: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
        """The Kueue Workloads of these JobSets: those Kueue labels with a JobSet's UID (one small list each); for a
        JobSet without one, every Workload of its namespace, so a Workload that matches only by owner or name is
        never missed (a Workload lives in its JobSet's namespace)."""
        found: List[Dict[str, Any]] = []
        whole: Set[str] = set()
        for js in jobsets:  # read from the API: each has its namespace and UID
            meta = _meta(js)
            labelled = self.api.list_custom(kube.WORKLOAD, namespace=meta["namespace"],
                                            label_selector="%s=%s" % (kube.KUEUE_JOB_UID_LABEL, meta["uid"]))
            if labelled:
                found += labelled
            else:
                whole.add(meta["namespace"])
        for ns in sorted(whole):
            found += self.api.list_custom(kube.WORKLOAD, namespace=ns)
        return found

    def checkpoint(self, gangs: List[Dict[str, Any]], token: str, timeout: float, interval: float,
                   check_mode: bool = False) -> Dict[str, Any]:
        if check_mode or not gangs:
            return {"changed": bool(gangs), "checkpointed": []}
        for g in gangs:
            self.api.patch_custom(kube.JOBSET, g["namespace"], g["jobset"],
                                  {"metadata": {"annotations": {kube.ANN_CHECKPOINT_REQ: token}}})
        deadline = self.clock() + timeout
        waiting = {(g["namespace"], g["jobset"]) for g in gangs}
        done: Dict[Key, str] = {}
        while waiting:
            for key in sorted(waiting):
                js = self.api.get_custom(kube.JOBSET, key[0], key[1])
                if confirmed(js, token):
                    done[key] = (_meta(js).get("annotations") or {}).get(kube.ANN_LAST_CHECKPOINT, "")
            waiting -= set(done)
            if not waiting:
                break
            if self.clock() >= deadline:
                late = ["JobSet %s/%s (on %s)" % (k[0], k[1], ", ".join(
                    next(g["nodes"] for g in gangs if (g["namespace"], g["jobset"]) == k))) for k in sorted(waiting)]
                raise GangError(
                    "checkpoint not confirmed within %ds by %s: no %s=%s answer. The gang was NOT stopped and keeps "
                    "running; its nodes stay cordoned. Check the job's checkpoint hook, then rerun (or raise the "
                    "checkpoint timeout)." % (int(timeout), "; ".join(late), kube.ANN_CHECKPOINT_DONE, token),
                    not_confirmed=["%s/%s" % k for k in sorted(waiting)],
                    checkpointed=[{"gang": "%s/%s" % k, "time": t} for k, t in sorted(done.items())])
            self.sleep(interval)
        return {"changed": True, "checkpointed": [{"gang": "%s/%s" % k, "time": t} for k, t in sorted(done.items())]}

    def stop(self, gangs: List[Dict[str, Any]], run_id: str, timeout: float, interval: float,
             check_mode: bool = False) -> Dict[str, Any]:
        stopped: List[str] = []
        for g in gangs:
            js = self.api.get_custom(kube.JOBSET, g["namespace"], g["jobset"])
            wl = workload_of(js, self._workloads([js]))
            if is_stopped(js, wl):
                continue
            kind, patch = stop_patch(wl, run_id, g["nodes"])
            stopped.append("%s/%s" % (g["namespace"], g["jobset"]))
            if check_mode:
                continue
            if kind == "workload" and wl is not None:
                self.api.patch_custom(kube.WORKLOAD, g["namespace"], _meta(wl)["name"], patch)
            else:
                self.api.patch_custom(kube.JOBSET, g["namespace"], g["jobset"], patch)
        if check_mode:
            return {"changed": bool(stopped), "stopped": stopped}
        nodes = sorted({n for g in gangs for n in g["nodes"]})
        deadline = self.clock() + timeout
        while True:  # only the nodes' pods are read while waiting: a gang is gone when no live rank is left
            left = self._live_on(nodes)[1]
            if not left:
                return {"changed": bool(stopped), "stopped": stopped}
            if self.clock() >= deadline:
                raise GangError("gang stop did not finish within %ds: pods of %s are still on %s; check the Kueue "
                                "and JobSet controllers" % (int(timeout), ", ".join(
                                    "%s/%s" % key for key in left), ", ".join(nodes)),
                                stopped=stopped)
            self.sleep(interval)

    def resume(self, check_mode: bool = False) -> Dict[str, Any]:
        """Resume every gang a gpufleet run stopped whose nodes are back in service; report the others."""
        resumed: List[str] = []
        held: List[Dict[str, Any]] = []
        nodes_cache: Dict[str, Optional[Dict[str, Any]]] = {}
        for kind, gvr in (("workload", kube.WORKLOAD), ("jobset", kube.JOBSET)):
            for obj in self.api.list_custom(gvr):
                meta = _meta(obj)
                ann = meta.get("annotations") or {}
                if kube.ANN_STOPPED_BY not in ann:
                    continue
                label = "%s %s/%s" % (kind, meta.get("namespace"), meta.get("name"))
                blocking = {}
                for name in [n for n in str(ann.get(kube.ANN_STOPPED_NODES) or "").split(",") if n]:
                    if name not in nodes_cache:
                        nodes_cache[name] = self.api.find_node(name)
                    why = node_blocks(nodes_cache[name])
                    if why:
                        blocking[name] = why
                if blocking:
                    held.append({"gang": label, "stopped_by": ann[kube.ANN_STOPPED_BY], "nodes": blocking,
                                 "message": "%s stays stopped: %s" % (label, "; ".join(
                                     "%s %s" % (n, w) for n, w in sorted(blocking.items())))})
                    continue
                resumed.append(label)
                if not check_mode:
                    self.api.patch_custom(gvr, meta.get("namespace", ""), meta.get("name", ""), resume_patch(kind))
        return {"changed": bool(resumed), "resumed": resumed, "held": held}
