"""SIMULATION of the canary workloads' containers (gpufleet's canary_workload module), which cannot run on KWOK's
pods: a pod annotated ``gpufleet-lab/workload`` is ended here, as its container would end, with its result in its
termination message (what the kubelet would copy from /dev/termination-log). KWOK's pod-complete stage leaves these
pods alone (cluster.kwok_stages).

- ``nccl`` (a rank of the training canary gang): rank 0 (JobSet job index 0) reports what the multi-node
  all-reduce measured. The lab runs its all_reduce_perf simulator on every rank's host (podman exec; the host's
  faults apply: nccl-slow, nccl-wrong, gpu-missing) with the gang's ``GPUFLEET_NCCL_ARGS`` and reports the slowest
  (a collective runs at its slowest member's speed), from the column header on as the canary contract asks. A rank
  whose run fails exits 1 with the simulator's error.
- ``latency`` (the inference canary's latency probe): the service's latency is simulated per serving host - p50
  about 42 ms, p99 about 118 ms - and six times that on a host with the ``inference-slow`` fault; the probe reports
  the worst serving host's figures as ``{"requests", "errors", "p50_ms", "p99_ms"}``. No serving pod ready: every
  request fails.
"""
from __future__ import annotations

import datetime
import json
import re
from typing import Any, Dict, List, Optional, Tuple

from kubernetes import client

from gpufleet_lab import faults, hosts, kube
from gpufleet_lab.cluster import SIMULATED_WORKLOAD
from gpufleet_lab.config import LabConfig

JOB_INDEX = "jobset.sigs.k8s.io/job-index"
ENDED = ("nccl", "latency")  # the kinds ended here; "training" (the training gang's ranks) runs until stopped
SLOW = faults.SLOW_INFERENCE


def _env(pod: Any) -> Dict[str, str]:
    return {e.name: e.value or "" for e in (pod.spec.containers[0].env or [])}


def nccl_result(cfg: LabConfig, node: str, args: List[str]) -> Tuple[int, str]:
    """(exit code, output) of the lab's all_reduce_perf simulator on ``node``."""
    if node not in cfg.gpu_hosts:
        return 1, "lab: %s is not a lab GPU host" % node
    proc = hosts.podman("exec", hosts.container(cfg, node), "all_reduce_perf", *args, check=False)
    return proc.returncode, proc.stdout if proc.returncode == 0 else (proc.stderr or proc.stdout)


RANK = re.compile(r"^#\s+Rank\s+\d+(?P<rest>\s+Group.*)$")


def gang_output(runs: List[str], slowest: str) -> str:
    """What rank 0 of the gang writes: from "# Using devices" on, with every host's rank lines (renumbered across
    the gang, as one job over all nodes prints them), then the slowest host's table and footer."""
    ranks = [m.group("rest") for text in runs for m in map(RANK.match, text.splitlines()) if m]
    lines = slowest.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith("# Using devices")), None)
    if start is None:
        return slowest
    end = start + 1
    while end < len(lines) and RANK.match(lines[end]):
        end += 1
    head = ["#  Rank %2d%s" % (i, rest) for i, rest in enumerate(ranks)]
    return "\n".join([lines[start]] + head + lines[end:]) + "\n"


def avg_busbw(text: str) -> float:
    """The run's "# Avg bus bandwidth" (-1 when it has none)."""
    for line in text.splitlines():
        if line.startswith("# Avg bus bandwidth"):
            try:
                return float(line.rsplit(":", 1)[-1])
            except ValueError:
                return -1.0
    return -1.0


def latency(cfg: LabConfig, serving: List[str]) -> Dict[str, Any]:
    if not serving:
        return {"requests": 200, "errors": 200, "p50_ms": 0.0, "p99_ms": 0.0}
    worst = max(6.0 if SLOW in faults.host_faults(cfg, n) else 1.0 for n in serving)
    return {"requests": 200, "errors": 0, "p50_ms": round(42.0 * worst, 1), "p99_ms": round(118.0 * worst, 1)}


class Workloads:
    def __init__(self, cfg: LabConfig) -> None:
        self.cfg = cfg
        self.core = client.CoreV1Api(kube.api(cfg, "lab-controller"))

    def _end(self, pod: Any, code: int, message: str) -> None:
        now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        status = {"phase": "Succeeded" if code == 0 else "Failed", "containerStatuses": [
            {"name": c.name, "image": c.image, "imageID": "", "ready": False, "restartCount": 0, "started": False,
             "state": {"terminated": {"exitCode": code if i == 0 else 0,
                                      "reason": "Completed" if code == 0 else "Error",
                                      "message": message[-4096:] if i == 0 else "", "startedAt": now,
                                      "finishedAt": now}}}
            for i, c in enumerate(pod.spec.containers)]}
        self.core.patch_namespaced_pod_status(pod.metadata.name, pod.metadata.namespace, {"status": status})

    def _gang_nodes(self, pod: Any) -> Optional[List[str]]:
        """The nodes of every rank of this pod's gang once all of them run (None while some do not)."""
        gang = (pod.metadata.labels or {}).get("gpufleet.io/canary-gang")
        pods = self.core.list_namespaced_pod(pod.metadata.namespace,
                                             label_selector="gpufleet.io/canary-gang=%s" % gang).items
        ranks = int(_env(pod).get("GPUFLEET_CANARY_RANKS") or 1)
        placed = [p.spec.node_name for p in pods if p.spec.node_name and p.status.phase in ("Running", "Succeeded")]
        return placed if len(placed) >= ranks else None

    def _serving(self, pod: Any) -> List[str]:
        service = _env(pod).get("GPUFLEET_CANARY_SERVICE", "")
        svc = kube.tolerate(404, self.core.read_namespaced_service, service, pod.metadata.namespace)
        if svc is None or not svc.spec.selector:
            return []
        selector = ",".join("%s=%s" % kv for kv in sorted(svc.spec.selector.items()))
        return [p.spec.node_name for p in self.core.list_namespaced_pod(pod.metadata.namespace,
                                                                        label_selector=selector).items
                if p.spec.node_name and any(c.type == "Ready" and c.status == "True"
                                            for c in (p.status.conditions or []))]

    def _candidates(self) -> List[Any]:
        """Running pods annotated for the lab to play, as typed objects. The list of every running pod is read
        as raw JSON (typed deserialisation of every pod at every pass was most of the lab controller's CPU), and
        only the few annotated ones are read again as objects."""
        resp = self.core.list_pod_for_all_namespaces(field_selector="status.phase=Running", _preload_content=False)
        items = json.loads(resp.data).get("items") or []
        wanted = [(i["metadata"]["namespace"], i["metadata"]["name"]) for i in items
                  if (i["metadata"].get("annotations") or {}).get(SIMULATED_WORKLOAD) in ENDED
                  and not i["metadata"].get("deletionTimestamp") and (i.get("spec") or {}).get("nodeName")]
        return [pod for pod in (kube.tolerate(404, self.core.read_namespaced_pod, name, ns) for ns, name in wanted)
                if pod is not None]

    def reconcile(self) -> None:
        for pod in self._candidates():
            kind = (pod.metadata.annotations or {}).get(SIMULATED_WORKLOAD)
            if not kind or pod.metadata.deletion_timestamp or pod.status.phase != "Running" or not pod.spec.node_name:
                continue
            if kind == "latency":
                self._end(pod, 0, json.dumps(latency(self.cfg, self._serving(pod))))
            elif kind == "nccl":
                nodes = self._gang_nodes(pod)
                if nodes is None:
                    continue  # the collective starts when every rank runs
                if (pod.metadata.labels or {}).get(JOB_INDEX) != "0":
                    self._end(pod, 0, "")
                    continue
                args = (_env(pod).get("GPUFLEET_NCCL_ARGS") or "").split()
                runs = [nccl_result(self.cfg, n, args) for n in sorted(set(nodes))]
                failed = [r for r in runs if r[0] != 0]
                if failed:
                    self._end(pod, failed[0][0], failed[0][1])
                else:
                    slowest = min(runs, key=lambda r: avg_busbw(r[1]))
                    self._end(pod, 0, gang_output([r[1] for r in runs], slowest[1]))
