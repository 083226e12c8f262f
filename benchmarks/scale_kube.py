#!/usr/bin/env python3
"""Benchmark: the node ledger, gang and drain modules against a lab cell grown to hundreds of API-only GPU nodes
(not a test; prints figures and writes out/bench/scale-kube.json).

Usage: bin/lab up; python benchmarks/scale_kube.py [--sizes 48,200,500] [--pods-per-node 6] [--wave 4] [--keep]
(or `make bench-scale`, which brings the lab up).

Per cell size (the cell grows from one size to the next; nothing is rebuilt):
- it adds KWOK nodes ``scale-NNNN`` (8 GPUs each, tainted so no lab workload lands there; the lab's KWOK keeps them
  Ready, its DaemonSets put their pods on each), a filler Deployment per 50 nodes with a PodDisruptionBudget
  (maxUnavailable 10%, unhealthy pods always evictable) placed by the lab's real scheduler (``--pods-per-node``
  minus one a node, on average), and one training gang per ``--wave`` nodes: a JobSet, its Kueue Workload and one
  8-GPU rank pod on each node;
- it runs one wave's maintenance on the last ``--wave`` nodes added, each step through the module's own main() (in
  this process, so Ansible's start-up is not in the figures) with the arguments the roles pass: cordon, gang stop
  (checkpoint, then stop), drain, mark drained, then per node read the ledger and uncordon, then resume. Per step:
  wall time, time spent waiting on the apiserver, requests by verb, resource and scope (refused ones too: a 429 or
  404 is a request), and the bytes sent back.
Refused before anything changes: sizes that are not rising multiples of the wave, and a gang a gpufleet run left
stopped outside the bench (the resume step would resume it).

SIMULATION (benchmark only): this script plays the JobSet controller, Kueue and the training framework for the
wave's gang (its JobSets are labelled ``gpufleet-lab/simulated-by: benchmark``, which the lab controller leaves
alone): it answers a checkpoint request after ``--checkpoint-seconds``, deletes a gang's pods when its Workload is
deactivated and puts them back when it is reactivated. Everything else is the lab's real apiserver, etcd, scheduler
and controllers. Wall times include the modules' poll intervals (2 s for the gang, 1 s while evicted pods end).
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import pathlib
import signal
import sys
import threading
import time
from typing import Any, Dict, List, Tuple

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "collections"))
sys.path.insert(0, str(ROOT / "lab"))

from ansible.module_utils.testing import patch_module_args
from kubernetes import client, dynamic
from kubernetes.client import rest

from ansible_collections.gpufleet.upgrade.plugins.modules import gang, node_drain, node_state
from gpufleet_lab import config as lab_config
from gpufleet_lab import kube as lab_kube

from benchlib import revision

NS = "gpufleet-scale"
MARK = {"gpufleet-lab/simulated-by": "benchmark"}
TAINT = {"key": "gpufleet.io/scale-bench", "value": "true", "effect": "NoSchedule"}
TOLERATE = [{"key": TAINT["key"], "operator": "Exists", "effect": "NoSchedule"}]
JOBSET_LABEL = "jobset.sigs.k8s.io/jobset-name"
GROUP = 50  # nodes per filler Deployment
REQ, DONE, LAST = ("gpufleet.io/checkpoint-requested", "gpufleet.io/checkpoint-completed",
                   "gpufleet.io/last-checkpoint-time")


# -- counting what the modules ask the apiserver -----------------------------------------------------------------
class Meter:
    """Counts the requests made from the main thread (the modules), not the simulator's: answered or refused
    (a 429 or 404 is still a request), by verb and by resource with its scope, the bytes sent back and the time
    spent waiting for them."""

    def __init__(self) -> None:
        self.main = threading.get_ident()
        self.reset()
        original = rest.RESTClientObject.request
        meter = self

        def request(rest_self: Any, method: str, url: str, *args: Any, **kwargs: Any) -> Any:
            if threading.get_ident() != meter.main:
                return original(rest_self, method, url, *args, **kwargs)
            start, data, status = time.perf_counter(), b"", 0
            try:
                response = original(rest_self, method, url, *args, **kwargs)
                data, status = getattr(response, "data", b"") or b"", response.status
                return response
            except rest.ApiException as exc:
                data, status = exc.body or b"", exc.status
                raise
            finally:
                meter.api_seconds += time.perf_counter() - start
                meter.bytes += len(data) if isinstance(data, (bytes, str)) else 0
                key = "%s %s" % (method, resource_of(url, kwargs.get("query_params")))
                meter.calls[key] = meter.calls.get(key, 0) + 1
                if status >= 400:
                    meter.refused[str(status)] = meter.refused.get(str(status), 0) + 1

        rest.RESTClientObject.request = request  # type: ignore[method-assign]

    def reset(self) -> None:
        self.calls: Dict[str, int] = {}
        self.refused: Dict[str, int] = {}
        self.bytes, self.api_seconds = 0, 0.0


def resource_of(url: str, query: Any = None) -> str:
    """'pods/ns' for /api/v1/namespaces/NS/pods, 'pods/all' for /api/v1/pods (every namespace; 'pods/node' when
    selected by spec.nodeName), 'nodes/one' for one object: what a request reads or writes, and how much of the
    cluster."""
    if any(k == "fieldSelector" and str(v).startswith("spec.nodeName=") for k, v in (query or [])):
        return "pods/node"
    path = url.split("://", 1)[-1].split("/", 1)[-1].split("?", 1)[0]
    parts = path.split("/")
    parts = parts[2:] if parts[0] == "api" else parts[3:]  # drop api/v1 or apis/GROUP/VERSION
    if len(parts) >= 3 and parts[0] == "namespaces":
        return "%s/%s" % ("/".join([parts[2]] + parts[4:5]), "ns" if len(parts) == 3 else "one")
    if parts and parts[0]:
        return "%s/%s" % ("/".join([parts[0]] + parts[2:3]), "all" if len(parts) == 1 else "one")
    return path


def run_module(module: Any, args: Dict[str, Any]) -> Dict[str, Any]:
    """A module's main() as Ansible runs it, in this process; its JSON result (failures raise)."""
    out = io.StringIO()
    with patch_module_args(args), contextlib.redirect_stdout(out):
        try:
            module.main()
        except SystemExit:
            pass
    result = json.loads(out.getvalue())
    if result.get("failed"):
        raise SystemExit("%s failed: %s" % (module.__name__, result.get("msg")))
    return result


# -- the cell, grown -----------------------------------------------------------------------------------------------
def node_name(i: int) -> str:
    return "scale-%04d" % i


def node_body(i: int) -> Dict[str, Any]:
    name = node_name(i)
    capacity = {"cpu": "224", "memory": "2Ti", "pods": "110", "nvidia.com/gpu": "8"}
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "type": "kwok",
                                                  "gpufleet.io/pool": "scale", "gpufleet.io/scale-bench": "true",
                                                  "gpufleet.io/scale-group": "g%d" % (i // GROUP)},
                         "annotations": {"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"}},
            "spec": {"taints": [TAINT]},
            "status": {"capacity": capacity, "allocatable": dict(capacity),
                       "nodeInfo": {"kubeletVersion": "v1.35.4", "kubeProxyVersion": "v1.35.4",
                                    "containerRuntimeVersion": "containerd://1.7.27", "operatingSystem": "linux",
                                    "architecture": "amd64", "kernelVersion": "6.8.0-85-generic",
                                    "osImage": "Debian GNU/Linux 12 (bookworm)", "bootID": "b-%s" % name,
                                    "machineID": "m-%s" % name, "systemUUID": "u-%s" % name}}}


def rank_pod(jobset: Dict[str, Any], index: int, node: str) -> Dict[str, Any]:
    name = jobset["metadata"]["name"]
    return {"metadata": {"name": "%s-workers-%d" % (name, index), "namespace": NS,
                         "labels": {JOBSET_LABEL: name, "gpufleet-bench/rank": str(index)},
                         "ownerReferences": [{"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
                                              "name": name, "uid": jobset["metadata"]["uid"], "controller": True}]},
            "spec": {"nodeName": node, "tolerations": TOLERATE, "restartPolicy": "Never",
                     "containers": [{"name": "trainer", "image": "registry.invalid/llm-pretrain:1",
                                     "resources": {"limits": {"nvidia.com/gpu": "8"},
                                                   "requests": {"nvidia.com/gpu": "8"}}}]}}


class Cell:
    def __init__(self, cfg: Any) -> None:
        self.api = lab_kube.api(cfg)
        self.core = client.CoreV1Api(self.api)
        self.apps = client.AppsV1Api(self.api)
        self.policy = client.PolicyV1Api(self.api)
        dyn = dynamic.DynamicClient(self.api)
        self.jobsets = dyn.resources.get(api_version="jobset.x-k8s.io/v1alpha2", kind="JobSet")
        self.workloads = dyn.resources.get(api_version="kueue.x-k8s.io/v1beta2", kind="Workload")
        self.size = 0
        self.readied = 0  # pods marked Ready again (see _ready_again)

    def _gone(self, timeout: float = 300) -> None:
        """Wait for the bench's namespace of an earlier run to finish terminating."""
        deadline = time.time() + timeout
        while lab_kube.tolerate(404, self.core.read_namespace, NS) is not None:
            if time.time() > deadline:
                raise SystemExit("namespace %s still terminating after %ds" % (NS, timeout))
            time.sleep(1)

    def stopped_elsewhere(self) -> List[str]:
        """Gangs outside the bench that a gpufleet run left stopped: the resume step would resume them too."""
        return ["%s %s/%s" % (kind, o.metadata.namespace, o.metadata.name)
                for kind, res in (("Workload", self.workloads), ("JobSet", self.jobsets)) for o in res.get().items
                if o.metadata.namespace != NS and "gpufleet.io/stopped-by" in (o.metadata.annotations or {})]

    def grow(self, size: int, pods_per_node: int, wave: int) -> None:
        if not self.size:  # start from a lab without an earlier run's nodes (one cut short, or --keep)
            self.remove()
        lab_kube.tolerate(409, self.core.create_namespace, {"metadata": {"name": NS}})
        for i in range(self.size, size):
            lab_kube.tolerate(409, self.core.create_node, node_body(i))
        for g in range(self.size // GROUP, (size + GROUP - 1) // GROUP):
            self._filler(g, min(GROUP, size - g * GROUP) * (pods_per_node - 1))
        for start in range(self.size, size, wave):
            nodes = [node_name(i) for i in range(start, min(start + wave, size))]
            self._gang("gang-%04d" % start, nodes)
        self.size = size

    def _filler(self, group: int, replicas: int) -> None:
        name = "filler-g%d" % group
        labels = {"app": name}
        body = {"metadata": {"name": name, "namespace": NS},
                "spec": {"replicas": replicas, "selector": {"matchLabels": labels},
                         "template": {"metadata": {"labels": labels},
                                      "spec": {"nodeSelector": {"gpufleet.io/scale-group": "g%d" % group},
                                               "tolerations": TOLERATE,
                                               "containers": [{"name": "app", "image": "registry.invalid/app:1",
                                                               "resources": {"requests": {"cpu": "100m"}}}]}}}}
        try:
            self.apps.create_namespaced_deployment(NS, body)
        except rest.ApiException as exc:
            if exc.status != 409:
                raise
            self.apps.patch_namespaced_deployment(name, NS, {"spec": {"replicas": replicas}})
        lab_kube.tolerate(409, self.policy.create_namespaced_pod_disruption_budget, NS, {
            "metadata": {"name": name, "namespace": NS},
            "spec": {"maxUnavailable": "10%", "selector": {"matchLabels": labels},
                     # pods a late KWOK lease left NotReady (see settle) must not block every eviction
                     "unhealthyPodEvictionPolicy": "AlwaysAllow"}})

    def _gang(self, name: str, nodes: List[str]) -> None:
        container = {"name": "trainer", "image": "registry.invalid/llm-pretrain:1",
                     "resources": {"limits": {"nvidia.com/gpu": "8"}, "requests": {"nvidia.com/gpu": "8"}}}
        js = {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
              "metadata": {"name": name, "namespace": NS, "labels": dict(MARK),
                           "annotations": {"gpufleet-bench/nodes": ",".join(nodes)}},
              "spec": {"suspend": False, "replicatedJobs": [{"name": "workers", "replicas": len(nodes), "template": {
                  "spec": {"parallelism": 1, "completions": 1, "template": {"spec": {
                      "containers": [container], "restartPolicy": "Never", "tolerations": TOLERATE}}}}}]}}
        created = lab_kube.tolerate(409, self.jobsets.create, body=js, namespace=NS)
        obj = (created or self.jobsets.get(name=name, namespace=NS)).to_dict()
        lab_kube.tolerate(409, self.workloads.create, namespace=NS, body={
            "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
            "metadata": {"name": "jobset-" + name, "namespace": NS,
                         "labels": dict(MARK, **{JOBSET_LABEL: name, "kueue.x-k8s.io/job-uid": obj["metadata"]["uid"]}),
                         "ownerReferences": [{"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
                                              "name": name, "uid": obj["metadata"]["uid"], "controller": True}]},
            "spec": {"active": True, "queueName": "training",
                     "podSets": [{"name": "workers", "count": len(nodes),
                                  "template": {"spec": {"containers": [container]}}}]}})
        for index, node in enumerate(nodes):
            lab_kube.tolerate(409, self.core.create_namespaced_pod, NS, rank_pod(obj, index, node))

    def settle(self, timeout: float = 900) -> Dict[str, int]:
        """Wait until every node of the bench is Ready, every Deployment and DaemonSet has all its pods ready,
        every gang all its ranks, and every pod on the bench's nodes is Running; their counts."""
        deadline, last = time.time() + timeout, -1
        while True:
            if not self._rolled_out():
                if time.time() > deadline:
                    raise SystemExit("the bench cell did not settle in %ds: Deployments, DaemonSets or gangs "
                                     "short of pods" % timeout)
                time.sleep(2)
                continue
            nodes = self.core.list_node(label_selector="gpufleet.io/scale-bench=true").items
            ready = sum(1 for n in nodes if any(c.type == "Ready" and c.status == "True"
                                                for c in (n.status.conditions or [])))
            names = {n.metadata.name for n in nodes}
            pods = [p for p in self.core.list_pod_for_all_namespaces(resource_version="0").items
                    if p.spec.node_name in names or p.metadata.namespace == NS]
            running = sum(1 for p in pods if p.status.phase == "Running" and not p.metadata.deletion_timestamp)
            # every node with as many DaemonSet pods as the others, and the same count as the last look (a
            # DaemonSet controller that has not seen the new nodes yet)
            daemons: Dict[str, int] = {n: 0 for n in names}
            for pod in pods:
                if any(r.kind == "DaemonSet" for r in pod.metadata.owner_references or []):
                    daemons[pod.spec.node_name] += 1
            if ready == len(nodes) == self.size and running == len(pods) == last and \
                    len(set(daemons.values())) <= 1:
                self._ready_again([p for p in pods if p.metadata.namespace == NS])
                return {"nodes": len(nodes), "pods": len(pods)}
            last = len(pods) if running == len(pods) else -1
            if time.time() > deadline:
                raise SystemExit("the bench cell did not settle in %ds: %d/%d nodes Ready, %d/%d pods Running"
                                 % (timeout, ready, len(nodes), running, len(pods)))
            time.sleep(2)

    def _ready_again(self, pods: List[Any]) -> None:
        """SIMULATION of a kubelet's next status sync: a Running pod whose containers are ready but which the node
        lifecycle controller marked NotReady while its node's KWOK lease was late (setting up hundreds of nodes on
        2 cores) is marked Ready again, as a real kubelet would; KWOK never does, and the PDBs would then refuse
        every eviction of the wave for a reason no real cell has."""
        for pod in pods:
            conds = {c.type: c.status for c in pod.status.conditions or []}
            if pod.status.phase == "Running" and conds.get("ContainersReady") == "True" and \
                    conds.get("Ready") == "False":
                self.core.patch_namespaced_pod_status(pod.metadata.name, NS, {"status": {"conditions": [
                    {"type": "Ready", "status": "True",
                     "lastTransitionTime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}]}})
                self.readied += 1

    def _rolled_out(self) -> bool:
        if client.BatchV1Api(self.api).list_namespaced_job(NS).items:
            raise SystemExit("the lab controller made child Jobs for the bench's JobSets: it runs code from before "
                             "it left them alone (gpufleet-lab/simulated-by); restart it: bin/lab down && bin/lab up")
        # every filler pod made (Running is checked per pod; Ready is not waited for: on a loaded 2-core machine the
        # node lifecycle controller marks pods NotReady when a KWOK lease is late, and KWOK never marks them back)
        for d in self.apps.list_namespaced_deployment(NS).items:
            if (d.status.replicas or 0) != d.spec.replicas or (d.status.updated_replicas or 0) != d.spec.replicas \
                    or d.status.observed_generation != d.metadata.generation:
                return False
        ranks = self.core.list_namespaced_pod(NS, label_selector="gpufleet-bench/rank").items
        return len(ranks) == self.size

    def cluster_counts(self) -> Dict[str, int]:
        return {"nodes": len(self.core.list_node(resource_version="0").items),
                "pods": len(self.core.list_pod_for_all_namespaces(resource_version="0").items),
                "jobsets": len(self.jobsets.get().items), "workloads": len(self.workloads.get().items)}

    def remove(self) -> None:
        """Delete the bench's namespace (its pods end while KWOK still plays their nodes), then its nodes, then force
        the DaemonSet pods left bound to them (no kubelet will ever confirm their end)."""
        if lab_kube.tolerate(404, self.core.read_namespace, NS) is not None:
            for d in self.apps.list_namespaced_deployment(NS).items:  # no replacement pods while they go
                self.apps.patch_namespaced_deployment(d.metadata.name, NS, {"spec": {"replicas": 0}})
            self.core.delete_collection_namespaced_pod(NS, grace_period_seconds=0)
        lab_kube.tolerate(404, self.core.delete_namespace, NS)
        self._gone(900)
        names = {n.metadata.name for n in self.core.list_node(label_selector="gpufleet.io/scale-bench=true").items}
        self.core.delete_collection_node(label_selector="gpufleet.io/scale-bench=true")
        for pod in self.core.list_pod_for_all_namespaces(resource_version="0").items:
            if pod.spec.node_name in names:
                lab_kube.tolerate(404, self.core.delete_namespaced_pod, pod.metadata.name, pod.metadata.namespace,
                                  grace_period_seconds=0)


# -- SIMULATION: the JobSet controller, Kueue and the training framework for the bench's gangs --------------------
class Player(threading.Thread):
    def __init__(self, cell: Cell, checkpoint_seconds: float) -> None:
        super().__init__(daemon=True)
        self.cell, self.delay = cell, checkpoint_seconds
        self.seen: Dict[str, float] = {}
        self.gangs: List[str] = []  # the JobSets it plays: the wave's (the others only run)
        self.stopping = threading.Event()
        self.error: List[str] = []

    def run(self) -> None:
        while not self.stopping.is_set():
            try:
                self.step()
            except Exception as exc:  # reported between the steps, which then stop
                self.error.append(repr(exc))
            time.sleep(0.3)

    def _patch(self, name: str, body: Dict[str, Any]) -> None:
        self.cell.jobsets.patch(name=name, namespace=NS, body=body, content_type="application/merge-patch+json")

    def step(self) -> None:
        for name in list(self.gangs):
            js = self.cell.jobsets.get(name=name, namespace=NS)
            ann = dict(js.metadata.annotations or {})
            token = ann.get(REQ)
            if token and ann.get(DONE) != token:
                first = self.seen.setdefault(name + token, time.time())
                if time.time() - first >= self.delay:
                    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
                    self._patch(name, {"metadata": {"annotations": {DONE: token, LAST: now}}})
            wl = self.cell.workloads.get(name="jobset-" + name, namespace=NS)
            if wl.spec.active is False and not js.spec.suspend:
                self._patch(name, {"spec": {"suspend": True}})
                for pod in self.cell.core.list_namespaced_pod(NS, label_selector="%s=%s" % (JOBSET_LABEL,
                                                                                            name)).items:
                    lab_kube.tolerate(404, self.cell.core.delete_namespaced_pod, pod.metadata.name, NS,
                                      grace_period_seconds=0)
            elif wl.spec.active is not False and js.spec.suspend:
                self._patch(name, {"spec": {"suspend": False}})
                obj = js.to_dict()
                for index, node in enumerate(ann["gpufleet-bench/nodes"].split(",")):
                    lab_kube.tolerate(409, self.cell.core.create_namespaced_pod, NS, rank_pod(obj, index, node))


# -- one wave's maintenance, step by step --------------------------------------------------------------------------
def wave_steps(kubeconfig: str, nodes: List[str], target: str, run_id: str) -> List[Tuple[str, Any, List[Dict]]]:
    """The module calls of one wave with the arguments roles/drain and roles/uncordon pass at their defaults: one
    call for the wave, or one per node where the role runs per host."""
    auth = {"kubeconfig": kubeconfig}
    return [
        ("cordon", node_state, [dict(auth, nodes=nodes, state="cordoned", target=target)]),
        ("gang stop", gang, [dict(auth, nodes=nodes, state="stopped", run_id=run_id, checkpoint_timeout=600,
                                  stop_timeout=300, skip_checkpoint=False)]),
        ("drain", node_drain, [dict(auth, nodes=nodes, timeout=600, retry_interval=5, disable_eviction=False,
                                    force=False)]),
        ("mark", node_state, [dict(auth, nodes=nodes, state="marked", phase="drained", target=target)]),
        ("read ledger", node_state, [dict(auth, nodes=[n], target=target) for n in nodes]),
        ("uncordon", node_state, [dict(auth, nodes=[n], state="uncordoned", target=target) for n in nodes]),
        ("resume", gang, [dict(auth, state="resumed")]),
    ]


def check_sizes(sizes: List[int], wave: int) -> None:
    """Refused before the lab is touched: sizes rising, each a multiple of the wave, its last group of nodes (one
    filler Deployment's) at least twice the wave, so the wave's drained pods have somewhere to go."""
    for before, size in zip([0] + sizes, sizes):
        if size <= before or size % wave or 0 < size % GROUP < 2 * wave:
            raise SystemExit("--sizes %s: each size must be larger than the one before, a multiple of --wave (%d), "
                             "and leave 0 or at least %d nodes in its last group of %d (e.g. 48,200,500)" % (
                                 ",".join(map(str, sizes)), wave, 2 * wave, GROUP))


def interrupted(*_: Any) -> None:
    raise KeyboardInterrupt  # a killed make (SIGTERM) still cleans the lab up


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="48,200,500")
    parser.add_argument("--pods-per-node", type=int, default=6, help="filler pods per node, plus one")
    parser.add_argument("--wave", type=int, default=4)
    parser.add_argument("--checkpoint-seconds", type=float, default=1.0)
    parser.add_argument("--keep", action="store_true", help="leave the bench's nodes and pods in the lab")
    parser.add_argument("--out", default=str(ROOT / "out" / "bench" / "scale-kube.json"))
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    check_sizes(sizes, args.wave)
    signal.signal(signal.SIGTERM, interrupted)
    cfg = lab_config.load()
    cell = Cell(cfg)
    elsewhere = cell.stopped_elsewhere()
    if elsewhere:
        raise SystemExit("gangs a gpufleet run left stopped outside the bench: %s; the bench's resume step would "
                         "resume them. Resume or reset them first (bin/lab reset)" % ", ".join(elsewhere))
    meter = Meter()
    player = Player(cell, args.checkpoint_seconds)
    player.start()
    rows: List[Dict[str, Any]] = []
    out = pathlib.Path(args.out)
    try:
        for size in sizes:
            began = time.time()
            cell.grow(size, args.pods_per_node, args.wave)
            bench = cell.settle()
            counts = cell.cluster_counts()
            print("scale_kube: %d bench nodes ready, %d pods on them, cluster %d nodes %d pods %d JobSets "
                  "(set up in %.0f s; %d pods marked Ready again so far)" % (
                      size, bench["pods"], counts["nodes"], counts["pods"], counts["jobsets"], time.time() - began,
                      cell.readied), flush=True)
            # the wave: the last nodes added (full of filler pods; an earlier wave's nodes were emptied by its drain)
            wave = [node_name(i) for i in range(size - args.wave, size)]
            player.gangs = ["gang-%04d" % (size - args.wave)]
            on_wave = sum(len(cell.core.list_pod_for_all_namespaces(field_selector="spec.nodeName=" + n).items)
                          for n in wave)
            for step, module, margs in wave_steps(str(cfg.kubeconfig), wave, cfg.to_version,
                                                  "bench-%d" % size):
                meter.reset()
                start = time.perf_counter()
                results = [run_module(module, one) for one in margs]
                seconds = time.perf_counter() - start
                if player.error:
                    raise SystemExit("the gang simulator failed: %s" % player.error[:3])
                row = {"cell_nodes": counts["nodes"], "cell_pods": counts["pods"], "bench_nodes": size,
                       "wave_pods": on_wave, "step": step, "module_calls": len(margs), "seconds": round(seconds, 3),
                       "api_seconds": round(meter.api_seconds, 3), "requests": sum(meter.calls.values()),
                       "refused": dict(sorted(meter.refused.items())), "kib_read": round(meter.bytes / 1024, 1),
                       "by_resource": dict(sorted(meter.calls.items())),
                       "changed": any(r.get("changed") for r in results)}
                if step == "drain":
                    row["evicted"] = len(results[0].get("evicted") or [])
                if step == "gang stop":
                    row["gangs"] = len(results[0].get("stopped") or [])
                rows.append(row)
                print("scale_kube: %5d nodes %6d pods  %-11s %6.2f s (%5.2f s in %3d requests%s) %7.1f KiB  %s" % (
                    row["cell_nodes"], row["cell_pods"], step, seconds, row["api_seconds"], row["requests"],
                    "".join(", %s %s" % (n, c) for c, n in row["refused"].items()), row["kib_read"],
                    " ".join("%s=%d" % kv for kv in row["by_resource"].items())), flush=True)
            cell.settle()
    finally:
        player.stopping.set()
        player.join(timeout=10)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps({"revision": revision(), "wave_nodes": args.wave, "pods_per_node": args.pods_per_node,
                                   "checkpoint_seconds": args.checkpoint_seconds, "rows": rows}, indent=2) + "\n")
        if not args.keep:
            cell.remove()
    print("scale_kube: figures in %s" % out)


if __name__ == "__main__":
    main()
