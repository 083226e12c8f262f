"""Property tests of the security entry points (the harness: tests/unit/property.py): the RBAC diff, the removed-API
metrics scan and etcd's endpoint status, on real captures and the generated RBAC table, mutated the ways an
attacker, a broken proxy or a lost member would. A mutation whose verdict is known to be a failure never passes;
nothing crashes or hangs."""
from __future__ import annotations

import copy
import json
from typing import Any, Dict, List

from hypothesis import strategies as st

from ansible_collections.gpufleet.upgrade.plugins.module_utils import data_rbac, etcd, rbac, removed_apis, security
from ansible_collections.gpufleet.upgrade.plugins.module_utils.versions import parse_version
from tests.conftest import fixture_text
from tests.unit.property import check_property, json_tree, mutations, structured

TARGET = "v1.36.3"
SOURCE, TABLE = data_rbac.expected(TARGET)
OBJECTS: Dict[str, List[Dict[str, Any]]] = data_rbac.objects("1.36")
OBJECTS["RoleBinding"].append({"kind": "RoleBinding", "metadata": {"name": "team-admin", "namespace": "training"},
                               "roleRef": {"kind": "ClusterRole", "name": "admin"},
                               "subjects": [{"kind": "User", "name": "team-lead"}]})
POWERFUL = [
    {"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]},
    {"apiGroups": [""], "resources": ["*/exec"], "verbs": ["create"]},
    {"apiGroups": ["*"], "resources": ["*/attach"], "verbs": ["get"]},
    {"apiGroups": [""], "resources": ["*/proxy"], "verbs": ["get"]},
    {"apiGroups": [""], "resources": ["*/token"], "verbs": ["create"]},
    {"apiGroups": [""], "resources": ["secrets"], "verbs": ["list"], "resourceNames": ["x"]},
    {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["clusterroles"], "verbs": ["bind"]},
    {"apiGroups": ["certificates.k8s.io"], "resources": ["certificatesigningrequests/approval"], "verbs": ["patch"]},
    {"apiGroups": ["admissionregistration.k8s.io"], "resources": ["*"], "verbs": ["delete"]},
    {"apiGroups": [""], "resources": ["pods/ephemeralcontainers"], "verbs": ["*"]},
    {"nonResourceURLs": ["*"], "verbs": ["get"]},
]
NAMES = ["kubeadm:anything", "system:controller:evil", "cluster-admin", "kubeadm:cluster-admins", "system:node",
         "system:kube-controller-manager", "admin", "lab-fault", "system:masters"]
SUBJECTS = [{"kind": "User", "name": "mallory"}, {"kind": "Group", "name": "system:authenticated"},
            {"kind": "ServiceAccount", "name": "default", "namespace": "kube-system"},
            {"kind": "Group", "name": "kubeadm:cluster-admins-x"}, {"kind": "User", "name": "team-lead"}]


def _snapshot(objects):
    return security.rbac_snapshot(objects.get("ClusterRole", []), objects.get("ClusterRoleBinding", []),
                                  objects.get("Role", []), objects.get("RoleBinding", []))


BEFORE = _snapshot(OBJECTS)


def _attack(kind: int, name: str, subject: Dict[str, str], rule: Dict[str, Any], autoupdate: bool) -> Dict[str, Any]:
    """The cell after one attack that grants a new power: a binding (under any name, the table's included, with or
    without the autoupdate annotation) of a new subject to a powerful role; a new powerful ClusterRole aggregated
    into admin (whose binding exists); or the table's own binding with a subject added."""
    objects = copy.deepcopy(OBJECTS)
    note = {"annotations": {rbac.AUTOUPDATE: "true"}} if autoupdate else {}
    if kind == 0:
        objects["ClusterRole"].append({"metadata": {"name": "zz-powerful"}, "rules": [rule]})
        objects["ClusterRoleBinding"] = [b for b in objects["ClusterRoleBinding"] if b["metadata"]["name"] != name]
        objects["ClusterRoleBinding"].append({"metadata": dict({"name": name}, **note), "roleRef": {
            "kind": "ClusterRole", "name": "zz-powerful"}, "subjects": [subject]})
    elif kind == 1:
        objects["ClusterRole"].append({"metadata": {"name": name + "-grows-admin", "labels": {
            "rbac.authorization.k8s.io/aggregate-to-admin": "true"}}, "rules": [rule]})
    else:
        for binding in objects["ClusterRoleBinding"]:
            if binding["metadata"]["name"] == "cluster-admin":
                binding["subjects"] = list(binding.get("subjects") or []) + [subject]
    return objects


def _attack_passes(args) -> bool:
    objects = _attack(*args)
    judged = rbac.judge_new_grants(BEFORE, _snapshot(objects), [(SOURCE, TABLE)])
    return not judged["new"]


def _is_new_power(args) -> bool:
    """Whether the attack really grants a power: admin is bound in a namespace only (team-admin), where a
    cluster-scoped power grants nothing; a subject of system:masters gains nothing; everything else must be caught
    (a power admin already had, brought by a new ClusterRole, is a new grant too)."""
    kind, _, subject, rule, _ = args
    if kind == 1:
        reasons = rbac.power_reasons(rbac.normalize_rules([rule], "r")[0])
        return any(r.split(" (", 1)[0] not in rbac.CLUSTER_SCOPED for r in reasons)
    return not (kind == 2 and subject["name"] == "system:masters")


def test_rbac_attacks_never_pass():
    check_property("RBAC diff (attacks on the table's cell)",
                   st.tuples(st.integers(0, 2), st.sampled_from(NAMES), st.sampled_from(SUBJECTS),
                             st.sampled_from(POWERFUL), st.booleans()),
                   _attack_passes, _is_new_power)


def _garbage(args) -> bool:
    kind, where, value = args
    objects = copy.deepcopy(OBJECTS)
    target = objects[kind][where % len(objects[kind])]
    field = ["rules", "subjects", "roleRef", "metadata", "aggregationRule"][where % 5]
    target[field] = value
    return not rbac.judge_new_grants(BEFORE, _snapshot(objects), [(SOURCE, TABLE)])["new"]


def test_rbac_objects_of_any_shape_are_refused_or_judged():
    check_property("RBAC diff (objects of any shape)",
                   st.tuples(st.sampled_from(sorted(OBJECTS)), st.integers(0, 500), json_tree()), _garbage)


# -- the removed-API metrics scan ---------------------------------------------------------------------------------
METRICS = fixture_text("metrics", "real-1.35.4-deprecated-excerpt.prom")
VERSION = fixture_text("metrics", "real-1.35.4-version.json")
DEPRECATED_LINE = next(line for line in METRICS.splitlines()
                       if line.startswith("apiserver_requested_deprecated_apis{") and 'removed_release="1.3' in line)


def _metrics_clean(text: str) -> bool:
    findings = removed_apis.scan_metrics(text, VERSION, parse_version("v1.38.0"), "cp-1")
    return not any(f["blocks_target"] for f in findings)


def _evidence(text: str) -> bool:
    return DEPRECATED_LINE in text.splitlines()


def test_metrics_mutations_never_hide_a_removed_api():
    check_property("apiserver /metrics (real, a removed API in use)",
                   mutations("metrics/real-1.35.4-deprecated-excerpt.prom"), _metrics_clean, _evidence)


OTHERS = ["", "<html><body><h1>502 Bad Gateway</h1></body></html>", VERSION,
          "# HELP kube_node_info Information about a cluster node.\n# TYPE kube_node_info gauge\n"
          'kube_node_info{node="gpu-a1"} 1\n']


def _other_passes(args) -> bool:
    body, version = args
    return _metrics_clean(body) if version is None else not any(
        f["blocks_target"] for f in removed_apis.scan_metrics(body, version, parse_version("v1.38.0"), "cp-1"))


def test_a_body_that_is_not_this_apiservers_metrics_never_passes():
    """An empty body, an HTML error page, the /version JSON, another exporter's text, or the right text with
    another server's /version: each must block, naming the apiserver."""
    other_version = json.dumps(dict(json.loads(VERSION), gitVersion="v1.36.3"))
    check_property("apiserver /metrics (not this apiserver's)",
                   st.one_of(st.tuples(st.sampled_from(OTHERS), st.none()),
                             st.tuples(st.just(METRICS.replace(DEPRECATED_LINE + "\n", "")),
                                       st.sampled_from([other_version, "{}", "", "[]", "<html>"]))),
                   _other_passes, True)


# -- etcd endpoint status -----------------------------------------------------------------------------------------
STATUS = "etcd/real-3.6.16-endpoint-status-3.json"


def _etcd_passes(text: str) -> bool:
    endpoints = etcd.parse_endpoint_status(text)
    members = json.loads(fixture_text(*STATUS.split("/")))
    return etcd.judge_endpoints(endpoints, members=[m["Endpoint"] for m in members])["passed"]


def _leaderless(text: str) -> bool:
    """The leader reported is 0, missing, or not a member id that answered (or the endpoints are not the
    members)."""
    try:
        doc = json.loads(text)
        ids = {str(d["Status"]["header"]["member_id"]) for d in doc}
        leaders = {str(d["Status"].get("leader")) for d in doc}
        endpoints = sorted(d["Endpoint"] for d in doc)
    except (ValueError, KeyError, TypeError, AttributeError):
        return False
    want = sorted(m["Endpoint"] for m in json.loads(fixture_text(*STATUS.split("/"))))
    return len(leaders) != 1 or not leaders <= ids or leaders == {"0"} or endpoints != want


def test_etcd_status_without_a_proved_leader_never_passes():
    check_property("etcdctl endpoint status (real, 3 members)", st.one_of(mutations(STATUS), structured(STATUS)),
                   _etcd_passes, _leaderless)
