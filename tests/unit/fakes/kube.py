"""An in-memory cluster with the methods of module_utils.kube.Kube, for the pure drain/gang/ledger logic: pods
go away when evicted unless a PodDisruptionBudget with no disruption allowed selects them (HTTP 429, the
apiserver's own message); a JobSet's job answers a checkpoint request after ``answer_after`` reads unless it is
marked never to; Workload active=false deletes the gang's pods, as Kueue does."""
from __future__ import annotations

import copy
from typing import Any, Dict, List, Tuple

from ansible_collections.gpufleet.upgrade.plugins.module_utils import kube

MSG_429 = "Cannot evict pod as it would violate the pod's disruption budget."


def pdb_guards(pdb: Dict[str, Any], pod: Dict[str, Any]) -> bool:
    """Whether the apiserver would count the pod under the PDB, written apart from the product's drain.selects so
    a wrong reading there cannot hide here: policy/v1 turns the selector into requirements
    (LabelSelectorAsSelector: matchLabels k=v is "k In (v)"), a pod matches when every requirement does, a null
    selector selects nothing and an empty one everything; an unknown operator is an error, never a match."""
    selector = pdb["spec"].get("selector")
    if selector is None:
        return False
    labels = pod["metadata"].get("labels") or {}
    requirements = [(k, "In", [v]) for k, v in sorted((selector.get("matchLabels") or {}).items())]
    requirements += [(e["key"], e["operator"], e.get("values") or []) for e in selector.get("matchExpressions") or []]
    tests = {"In": lambda k, vs: k in labels and labels[k] in vs,
             "NotIn": lambda k, vs: k not in labels or labels[k] not in vs,
             "Exists": lambda k, vs: k in labels,
             "DoesNotExist": lambda k, vs: k not in labels}
    for key, operator, values in requirements:
        if operator not in tests:
            raise ValueError("%r is not a valid label selector operator" % operator)
        if not tests[operator](key, values):
            return False
    return True


def merge(into: Dict[str, Any], patch: Dict[str, Any]) -> None:
    """JSON merge patch (RFC 7386): None deletes."""
    for key, value in patch.items():
        if value is None:
            into.pop(key, None)
        elif isinstance(value, dict) and isinstance(into.get(key), dict):
            merge(into[key], value)
        else:
            into[key] = copy.deepcopy(value)


def pod(name, node, ns="default", owner=("ReplicaSet", "web-1"), labels=None, phase="Running", annotations=None):
    meta = {"name": name, "namespace": ns, "uid": "uid-" + name, "labels": dict(labels or {}),
            "annotations": dict(annotations or {})}
    if owner:
        meta["ownerReferences"] = [{"kind": owner[0], "name": owner[1], "controller": True}]
    return {"metadata": meta, "spec": {"nodeName": node}, "status": {"phase": phase}}


def node(name, unschedulable=False, annotations=None, ready=True):
    return {"metadata": {"name": name, "annotations": dict(annotations or {})},
            "spec": {"unschedulable": True} if unschedulable else {},
            "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


class FakeKube:
    def __init__(self) -> None:
        self.nodes: Dict[str, Dict[str, Any]] = {}
        self.pods: List[Dict[str, Any]] = []
        self.pdb_list: List[Dict[str, Any]] = []
        self.custom: Dict[Tuple[str, str, str], List[Dict[str, Any]]] = {kube.JOBSET: [], kube.WORKLOAD: []}
        self.calls: List[Tuple[str, ...]] = []  # writes
        self.read_calls: List[Tuple[str, ...]] = []  # reads of custom objects (gangs)
        self.answer_after = 2
        self.never: set = set()
        self.reads: Dict[str, int] = {}
        self.configz: Dict[str, str] = {}  # node -> its kubelet's /configz answer (text), as the proxy gives it

    def node_configz(self, name):
        if name not in self.configz:
            raise kube.KubeError("the kubelet of %s did not answer /configz through the apiserver (the apiserver "
                                 "could not reach the node's kubelet): HTTP 503 error trying to reach service" % name,
                                 status=503)
        return self.configz[name]

    # nodes
    def get_node(self, name):
        return copy.deepcopy(self.nodes[name])

    def find_node(self, name):
        return copy.deepcopy(self.nodes[name]) if name in self.nodes else None

    def patch_node(self, name, body):
        self.calls.append(("patch_node", name))
        merge(self.nodes[name], body)
        return copy.deepcopy(self.nodes[name])

    # pods
    def pods_on_node(self, name):
        return [copy.deepcopy(p) for p in self.pods if p["spec"]["nodeName"] == name]

    def pdbs(self, namespace, _record=True):
        if _record:
            self.read_calls.append(("pdbs", namespace))
        return [copy.deepcopy(p) for p in self.pdb_list if p["metadata"]["namespace"] == namespace]

    def _find(self, ns, name):
        return next((p for p in self.pods if p["metadata"]["namespace"] == ns and p["metadata"]["name"] == name), None)

    def evict(self, ns, name, grace):
        self.calls.append(("evict", ns, name))
        p = self._find(ns, name)
        if p is None:
            return 404, "not found"
        for pdb in self.pdbs(ns, _record=False):
            if pdb_guards(pdb, p) and int(pdb["status"]["disruptionsAllowed"]) == 0:
                return 429, MSG_429
        self.pods.remove(p)
        return 201, ""

    def delete_pod(self, ns, name, grace):
        self.calls.append(("delete", ns, name))
        p = self._find(ns, name)
        if p is None:
            return 404, "not found"
        self.pods.remove(p)
        return 200, ""

    def pod_exists(self, ns, name, uid):
        p = self._find(ns, name)
        return p is not None and p["metadata"]["uid"] == uid

    # custom resources
    def list_custom(self, gvr, namespace=None, label_selector=""):
        self.read_calls.append(("list_custom", gvr[2], namespace or "") + ((label_selector,) if label_selector else ()))
        wanted = dict(term.split("=", 1) for term in label_selector.split(",") if term)
        return [copy.deepcopy(o) for o in self.custom[gvr]
                if (namespace is None or o["metadata"]["namespace"] == namespace)
                and all((o["metadata"].get("labels") or {}).get(k) == v for k, v in wanted.items())]

    def _custom(self, gvr, ns, name):
        return next(o for o in self.custom[gvr] if o["metadata"]["namespace"] == ns and o["metadata"]["name"] == name)

    def get_custom(self, gvr, ns, name):
        self.read_calls.append(("get_custom", gvr[2], ns, name))
        if not any(o["metadata"]["namespace"] == ns and o["metadata"]["name"] == name for o in self.custom[gvr]):
            raise kube.KubeError("read %s %s/%s: HTTP 404 not found" % (gvr[2], ns, name), status=404)
        obj = self._custom(gvr, ns, name)
        ann = obj["metadata"].setdefault("annotations", {})
        if gvr == kube.JOBSET and ann.get(kube.ANN_CHECKPOINT_REQ) and name not in self.never:
            self.reads[name] = self.reads.get(name, 0) + 1
            if self.reads[name] >= self.answer_after:
                ann[kube.ANN_CHECKPOINT_DONE] = ann[kube.ANN_CHECKPOINT_REQ]
                ann[kube.ANN_LAST_CHECKPOINT] = "2026-11-30T12:00:00Z"
        return copy.deepcopy(obj)

    def patch_custom(self, gvr, ns, name, body):
        self.calls.append(("patch_custom", gvr[2], ns, name))
        obj = self._custom(gvr, ns, name)
        merge(obj, body)
        if gvr == kube.WORKLOAD and (obj.get("spec") or {}).get("active") is False:
            meta = obj["metadata"]
            js = (meta.get("labels") or {}).get(kube.JOBSET_NAME_LABEL) or next(
                r["name"] for r in meta.get("ownerReferences") or [] if r["kind"] == "JobSet")
            self.pods = [p for p in self.pods if p["metadata"]["labels"].get(kube.JOBSET_NAME_LABEL) != js]
        return copy.deepcopy(obj)

    # builders
    def add_gang(self, name, nodes, ns="training", workload=True):
        self.custom[kube.JOBSET].append({"metadata": {"name": name, "namespace": ns, "uid": "js-" + name,
                                                      "annotations": {}}, "spec": {"suspend": False}})
        if workload:
            self.custom[kube.WORKLOAD].append({"metadata": {"name": "jobset-" + name, "namespace": ns,
                                                            "labels": {kube.JOBSET_NAME_LABEL: name}},
                                               "spec": {"active": True}})
        for i, n in enumerate(nodes):
            self.pods.append(pod("%s-workers-%d" % (name, i), n, ns=ns, owner=("Job", name + "-workers"),
                                 labels={kube.JOBSET_NAME_LABEL: name}))

    def add_pdb(self, name, ns, labels, allowed, min_available=1):
        self.pdb_list.append({"metadata": {"name": name, "namespace": ns},
                              "spec": {"minAvailable": min_available, "selector": {"matchLabels": labels}},
                              "status": {"disruptionsAllowed": allowed, "currentHealthy": 1, "expectedPods": 1}})


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds
