"""SIMULATION of what has no running controller in the lab: the JobSet controller (the child Jobs of a JobSet),
Kueue's reaction to Workload.spec.active, and a training framework's checkpoint-and-yield protocol.

Every JobSet gets what the real JobSet controller makes: one batch/v1 Job per replicated job and index, owned by
the JobSet as its controller and labelled as JobSet labels them; the lab's real job controller and scheduler then
create and place their pods, so kubectl, the eviction API and gpufleet's drain meet the owner chain a real cluster
has (pod -> Job -> JobSet). A JobSet outside the ``training`` namespace (gpufleet's canary gang) is marked Completed
when every Job completed (Failed when one failed). The ``training`` namespace's gang runs until stopped: its Jobs
have ``backoffLimit: 0`` (a rank that dies fails its Job), and the protocol below plays the rest.

Protocol (what gpufleet's drain role asks, what the job answers):
- gpufleet sets annotation ``gpufleet.io/checkpoint-requested: <token>`` on the JobSet;
- after ``gpufleet-lab/checkpoint-seconds`` (default 5) the job writes a checkpoint and answers
  ``gpufleet.io/checkpoint-completed: <token>`` plus ``gpufleet.io/last-checkpoint-time`` (RFC 3339) - unless a
  node it runs on has the ``checkpoint-never`` fault (``lab fault HOST checkpoint-never``);
- the job also checkpoints on its own every ``gpufleet-lab/checkpoint-interval-seconds`` (default 600).
- Workload ``spec.active=false`` (Kueue): the JobSet and its child Jobs are suspended (the job controller deletes
  their pods, as it does for a suspended Job); the Workload gets condition Evicted/Deactivated; the work lost
  (seconds x GPUs) is recorded in ``run/lost-work.jsonl`` and on the JobSet (``gpufleet-lab/lost-gpu-seconds``),
  counted from the later of the last checkpoint and the gang's last start from it (``gpufleet-lab/restarted-at``),
  so work redone and lost again is counted once. ``active=true``: the JobSet and
  its Jobs unsuspended; the job controller recreates the pods and the scheduler places them on schedulable nodes.
- A rank that dies alone while the gang is active (a per-node drain, an eviction; or a child Job failed) restarts
  the whole gang as the JobSet controller's failure policy does: every child Job is deleted and made again, the
  JobSet's ``status.restarts`` counts one more, and the work since the last checkpoint is recorded as lost - what
  gpufleet's gang stop exists to avoid.
"""
from __future__ import annotations

import datetime
import json
import time
from typing import Any, Dict, List, Optional, Set

from kubernetes import client, dynamic
from kubernetes.client.rest import ApiException

from gpufleet_lab import faults, kube
from gpufleet_lab.cluster import SIMULATED_WORKLOAD
from gpufleet_lab.config import LabConfig

NS = "training"
REQ = "gpufleet.io/checkpoint-requested"
DONE = "gpufleet.io/checkpoint-completed"
LAST = "gpufleet.io/last-checkpoint-time"
LOST = "gpufleet-lab/lost-gpu-seconds"
DELAY = "gpufleet-lab/checkpoint-seconds"
INTERVAL = "gpufleet-lab/checkpoint-interval-seconds"
STARTED = "gpufleet-lab/computing-since"  # when every rank last ran (its start, a restart, a readmit): fractional s
RANKS = "gpufleet-lab/ranks"  # the rank pods of the gang while it computes (every rank Running); "" otherwise
JOBSET_LABEL = "jobset.sigs.k8s.io/jobset-name"
SIMULATED_BY = "gpufleet-lab/simulated-by"  # "benchmark": benchmarks/scale_kube.py plays these JobSets itself


def now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def rfc3339(when: datetime.datetime) -> str:
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(text: str) -> datetime.datetime:
    return datetime.datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.UTC)


def jobset_gpus(jobset: Dict[str, Any]) -> int:
    """The GPUs a JobSet's ranks hold (limits x replicas x parallelism), from its object as a dict."""
    total = 0
    for rj in jobset["spec"]["replicatedJobs"]:
        job = rj["template"]["spec"]
        per_pod = sum(int(((c.get("resources") or {}).get("limits") or {}).get("nvidia.com/gpu", 0))
                      for c in job["template"]["spec"]["containers"])
        total += per_pod * int(rj.get("replicas", 1)) * int(job.get("parallelism") or 1)
    return total


def _live(pod: Any) -> bool:
    return not getattr(pod.metadata, "deletion_timestamp", None) and \
        getattr(pod.status, "phase", None) not in ("Failed", "Succeeded")


def _running(pod: Any) -> bool:
    return _live(pod) and getattr(pod.status, "phase", None) == "Running"


class Training:
    def __init__(self, cfg: LabConfig) -> None:
        self.cfg = cfg
        self.api = kube.api(cfg, "lab-controller")
        self.core = client.CoreV1Api(self.api)
        self.batch = client.BatchV1Api(self.api)
        dyn = dynamic.DynamicClient(self.api)
        self.jobsets = dyn.resources.get(api_version="jobset.x-k8s.io/v1alpha2", kind="JobSet")
        self.workloads = dyn.resources.get(api_version="kueue.x-k8s.io/v1beta2", kind="Workload")
        self.pending: Dict[str, float] = {}  # jobset -> when its checkpoint request was first seen

    # -- helpers ---------------------------------------------------------------------------------------------------
    def _faulted_nodes(self, fault: str) -> List[str]:
        return [host for host in self.cfg.hosts if fault in faults.host_faults(self.cfg, host)]

    def _pods(self, name: str) -> List[Any]:
        return self.core.list_namespaced_pod(NS, label_selector="%s=%s" % (JOBSET_LABEL, name)).items

    def _patch_jobset(self, name: str, body: Dict[str, Any]) -> None:
        self.jobsets.patch(name=name, namespace=NS, body=body, content_type="application/merge-patch+json")

    def _gpus(self, js: Any) -> int:
        return jobset_gpus(js.to_dict())

    def _record_loss(self, js: Any, kind: str, reason: str) -> Dict[str, str]:
        """Log the work lost by a gang that computed until now (``kind``: "stop" - gpufleet stopped it, "restart" -
        a rank died): the seconds since the later of its last checkpoint and the time it last started computing
        (what was redone after a restart and lost again counts once) x its GPUs. Returns the annotations to set."""
        ann = js.metadata.annotations or {}
        checkpoint = parse_time(ann.get(LAST) or js.metadata.creationTimestamp).timestamp()
        started = float(ann.get(STARTED) or 0.0)
        at = time.time()
        seconds = max(at - max(checkpoint, started), 0.0)
        gpus = self._gpus(js)
        entry = {"time": rfc3339(now()), "at": round(at, 3), "jobset": js.metadata.name, "kind": kind,
                 "reason": reason, "last_checkpoint": round(checkpoint, 3), "computing_since": round(started, 3),
                 "seconds_since_checkpoint": round(seconds, 1), "gpus": gpus,
                 "lost_gpu_seconds": round(seconds * gpus, 1)}
        with open(self.cfg.run / "lost-work.jsonl", "a") as handle:
            handle.write(json.dumps(entry) + "\n")
        return {LOST: "%.1f" % (float(ann.get(LOST, "0")) + seconds * gpus)}

    # -- JobSets with real child Jobs -----------------------------------------------------------------------------
    def _jobs(self, ns: str, name: str) -> List[Any]:
        return self.batch.list_namespaced_job(ns, label_selector="%s=%s" % (JOBSET_LABEL, name)).items

    def _create_jobs(self, js: Any, have: Set[str], backoff_limit: Optional[int] = None,
                     pod_annotations: Optional[Dict[str, str]] = None) -> None:
        """Create the child Jobs of ``js`` missing from ``have`` (names of its Jobs), as the JobSet controller
        names, labels and owns them (``controller: true``: the Job's pods' controller is the Job, the Job's is the
        JobSet)."""
        ns, name = js.metadata.namespace, js.metadata.name
        for rj in js.spec.replicatedJobs:
            for index in range(rj.replicas):
                job = "%s-%s-%d" % (name, rj.name, index)
                if job in have:
                    continue
                labels = {JOBSET_LABEL: name, "jobset.sigs.k8s.io/replicatedjob-name": rj.name,
                          "jobset.sigs.k8s.io/job-index": str(index)}
                spec = rj.template.spec.to_dict()
                if backoff_limit is not None:
                    spec["backoffLimit"] = backoff_limit
                meta = spec["template"].setdefault("metadata", {})
                meta["labels"] = dict(meta.get("labels") or {}, **labels)
                if pod_annotations:
                    meta["annotations"] = dict(meta.get("annotations") or {}, **pod_annotations)
                body = {"metadata": {"name": job, "labels": labels, "ownerReferences": [
                    {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "name": name,
                     "uid": js.metadata.uid, "controller": True}]}, "spec": spec}
                kube.tolerate(409, self.batch.create_namespaced_job, ns, body)

    def _suspend_jobs(self, jobs: List[Any], suspend: bool) -> None:
        for job in jobs:
            if bool(job.spec.suspend) != suspend:
                kube.tolerate(404, self.batch.patch_namespaced_job, job.metadata.name, job.metadata.namespace,
                              {"spec": {"suspend": suspend}})

    def reconcile_child_jobs(self, jobsets: List[Any]) -> None:
        """The canary gangs (every namespace but ``training``): Jobs made, the JobSet ended when they end."""
        for js in jobsets:
            ns, name = js.metadata.namespace, js.metadata.name
            if ns == NS or js.spec.suspend or (js.metadata.labels or {}).get(SIMULATED_BY) == "benchmark":
                continue
            done = {c.type for c in ((js.status.conditions if js.status else None) or []) if c.status == "True"}
            if done & {"Completed", "Failed"}:
                continue
            jobs = self._jobs(ns, name)
            self._create_jobs(js, {j.metadata.name for j in jobs})
            wanted = sum(rj.replicas for rj in js.spec.replicatedJobs)
            states = [{c.type for c in (j.status.conditions or []) if c.status == "True"} for j in jobs]
            if any("Failed" in s for s in states):
                self._jobset_condition(ns, name, "Failed", "a child Job failed")
            elif len(jobs) >= wanted and all("Complete" in s for s in states):
                self._jobset_condition(ns, name, "Completed", "every child Job completed")

    def _jobset_condition(self, ns: str, name: str, kind: str, message: str) -> None:
        cond = {"type": kind, "status": "True", "reason": "AllJobsCompleted" if kind == "Completed" else "FailedJobs",
                "message": message, "lastTransitionTime": rfc3339(now())}
        self.jobsets.subresources["status"].patch(name=name, namespace=ns, body={"status": {"conditions": [cond]}},
                                                  content_type="application/merge-patch+json")

    # -- one reconcile pass ---------------------------------------------------------------------------------------
    def reconcile(self) -> None:
        """One pass over every JobSet: a list of the JobSets (every namespace), of the Workloads and of each gang's
        pods - three requests a pass for the lab's one computing gang (its Jobs are listed only when it starts,
        stops or loses a rank), since every lab cell runs this whenever one of its Pods, JobSets or Workloads changes
        (controller.watch_training)."""
        try:
            every = self.jobsets.get().items
        except ApiException as exc:
            if exc.status == 404:
                return
            raise
        self.reconcile_child_jobs(every)
        jobsets = [js for js in every if js.metadata.namespace == NS]
        workloads = {w.metadata.labels.get(JOBSET_LABEL): w for w in self.workloads.get(namespace=NS).items
                     if w.metadata.labels}
        never = set(self._faulted_nodes("checkpoint-never"))
        notes = {js.metadata.name: js.metadata.annotations or {} for js in jobsets}
        asked = {name for name, ann in notes.items() if ann.get(REQ) and ann.get(REQ) != ann.get(DONE)}
        for name in set(self.pending) - asked:  # deleted, or its request withdrawn, before it was confirmed
            self.pending.pop(name)
        for js in jobsets:
            if (js.metadata.labels or {}).get(SIMULATED_BY) == "benchmark":
                continue
            name = js.metadata.name
            ann = dict(js.metadata.annotations or {})
            wl = workloads.get(name)
            # the gang runs while its Workload is active (Kueue); a JobSet without one, while it is not suspended
            if wl is not None:
                admitted = bool(wl.spec.active) if wl.spec.active is not None else True
            else:
                admitted = not js.spec.suspend
            pods = self._pods(name)
            computing = bool(ann.get(RANKS))
            # checkpoint-and-yield
            token = ann.get(REQ)
            if token and ann.get(DONE) != token:
                first = self.pending.setdefault(name, time.time())
                on_never = any(getattr(p.spec, "node_name", None) in never for p in pods)
                if not on_never and time.time() - first >= float(ann.get(DELAY, "5")):
                    self._patch_jobset(name, {"metadata": {"annotations": {DONE: token, LAST: rfc3339(now())}}})
                    self.pending.pop(name, None)
            elif admitted and computing:
                last = ann.get(LAST)
                interval = float(ann.get(INTERVAL, "600"))
                if not last or (now() - parse_time(last)).total_seconds() >= interval:
                    self._patch_jobset(name, {"metadata": {"annotations": {LAST: rfc3339(now())}}})
            if not admitted:
                if computing or not js.spec.suspend or any(_live(p) for p in pods):
                    self._stop(js, wl, computing)
            elif js.spec.suspend:
                self._readmit(js, wl)
            else:
                self._run(js, pods)

    def _stop(self, js: Any, wl: Any, computing: bool) -> None:
        """Kueue deactivated the Workload (or the JobSet was suspended): the gang stops as a unit - its Jobs
        suspended first (the job controller deletes their pods), then the JobSet, the commit point; a pass that
        failed in between is finished by the next one."""
        name = js.metadata.name
        annotations = {RANKS: ""}
        if computing:
            annotations.update(self._record_loss(js, "stop", "workload deactivated" if wl is not None
                                                 else "JobSet suspended"))
        self._suspend_jobs(self._jobs(NS, name), True)
        self._patch_jobset(name, {"metadata": {"annotations": annotations}, "spec": {"suspend": True}})
        self._set_evicted(wl, True)

    def _readmit(self, js: Any, wl: Any) -> None:
        """Kueue admits the Workload again: its Jobs unsuspended first, then the JobSet."""
        self._suspend_jobs(self._jobs(NS, js.metadata.name), False)
        self._patch_jobset(js.metadata.name, {"spec": {"suspend": False}})
        self._set_evicted(wl, False)

    def _run(self, js: Any, pods: List[Any]) -> None:
        """An admitted gang. It computes once every rank runs (its rank pods are noted on the JobSet, with the
        time); a noted rank gone, or a child Job failed, restarts it from its last checkpoint, as the JobSet
        controller's failure policy does: every child Job deleted (foreground: their pods go first, so no pod of
        the old Jobs is taken for a rank of the new ones) and made again. Missing Jobs are made; Jobs a readmit
        cut short left suspended are resumed. In the steady state (every noted rank running) a pass reads
        nothing more."""
        name = js.metadata.name
        ann = js.metadata.annotations or {}
        noted = {n for n in (ann.get(RANKS) or "").split(",") if n}
        wanted = sum(rj.replicas * (rj.template.spec.parallelism or 1) for rj in js.spec.replicatedJobs)
        if noted and {p.metadata.name for p in pods if _running(p)} == noted and len(noted) == wanted:
            return
        jobs = self._jobs(NS, name)
        current = {j.metadata.uid for j in jobs if not j.metadata.deletion_timestamp}
        ranks = {p.metadata.name for p in pods if _running(p) and any(
            r.controller and r.uid in current for r in (p.metadata.owner_references or []))}
        gone = sorted(noted - ranks)
        failed = [j.metadata.name for j in jobs if not j.metadata.deletion_timestamp and any(
            c.type == "Failed" and c.status == "True" for c in (j.status.conditions or []))]
        if gone or failed:
            annotations = {RANKS: ""}
            if noted:
                annotations.update(self._record_loss(
                    js, "restart", "rank %s died" % gone[0] if gone else "child Job %s failed" % failed[0]))
                restarts = int(getattr(js.status, "restarts", 0) or 0) + 1 if js.status else 1
                self.jobsets.subresources["status"].patch(
                    name=name, namespace=NS, body={"status": {"restarts": restarts}},
                    content_type="application/merge-patch+json")
            self._patch_jobset(name, {"metadata": {"annotations": annotations}})
            for job in jobs:
                kube.tolerate(404, self.batch.delete_namespaced_job, job.metadata.name, NS,
                              propagation_policy="Foreground")
            self._delete_pods(pods)
            return
        if len(current) < len(jobs):
            return  # the last restart's Jobs are still being deleted
        self._suspend_jobs(jobs, False)
        # the ranks run until stopped: KWOK's pod-complete stage, which ends every Job pod at once, leaves them
        self._create_jobs(js, {j.metadata.name for j in jobs}, backoff_limit=0,
                          pod_annotations={SIMULATED_WORKLOAD: "training"})
        if len(ranks) == wanted and ranks != noted:
            self._patch_jobset(name, {"metadata": {"annotations": {RANKS: ",".join(sorted(ranks)),
                                                                   STARTED: "%.3f" % time.time()}}})

    def _delete_pods(self, pods: List[Any]) -> None:
        for pod in pods:
            kube.tolerate(404, self.core.delete_namespaced_pod, pod.metadata.name, NS, grace_period_seconds=0)

    def _set_evicted(self, wl: Any, evicted: bool) -> None:
        if wl is None:
            return
        cond = {"type": "Evicted", "status": "True" if evicted else "False",
                "reason": "Deactivated" if evicted else "Reactivated",
                "message": "The workload is deactivated" if evicted else "The workload is active",
                "lastTransitionTime": rfc3339(now())}
        admitted = {"type": "Admitted", "status": "False" if evicted else "True",
                    "reason": "NoReservation" if evicted else "Admitted", "message": "lab simulation",
                    "lastTransitionTime": rfc3339(now())}
        self.workloads.subresources["status"].patch(
            name=wl.metadata.name, namespace=NS, body={"status": {"conditions": [cond, admitted]}},
            content_type="application/merge-patch+json")


def sample_objects(gpus_per_node: int) -> List[Dict[str, Any]]:
    """The lab's training gang: a JobSet of 2 ranks x 8 GPUs, and the Kueue Workload that admits it."""
    container = {"name": "trainer", "image": "registry.invalid/llm-pretrain:1",
                 "resources": {"limits": {"nvidia.com/gpu": str(gpus_per_node)},
                               "requests": {"nvidia.com/gpu": str(gpus_per_node)}}}
    jobset = {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
              "metadata": {"name": "llm-pretrain", "namespace": NS,
                           "labels": {"kueue.x-k8s.io/queue-name": "training"},
                           "annotations": {INTERVAL: "600", DELAY: "3"}},
              "spec": {"suspend": False, "replicatedJobs": [{"name": "workers", "replicas": 2, "template": {
                  "spec": {"parallelism": 1, "completions": 1, "template": {"spec": {
                      "containers": [container], "restartPolicy": "Never"}}}}}]}}
    workload = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
                "metadata": {"name": "jobset-llm-pretrain", "namespace": NS,
                             "labels": {JOBSET_LABEL: "llm-pretrain"}},
                "spec": {"active": True, "queueName": "training", "podSets": [
                    {"name": "workers", "count": 2, "template": {"spec": {"containers": [container]}}}]}}
    return [jobset, workload]
