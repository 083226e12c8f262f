"""RBAC by identity (plugins/module_utils/rbac.py): rules matched as Kubernetes RBAC matches them, aggregation
resolved, a grant per (subject, scope, role, reason), and expected grants known by exact binding and subject from
the generated table (data_rbac.py) - never by a name pattern. The attacker cases of issue 33 are regression tests
here: each passed on the code before."""
from __future__ import annotations

import pytest

from ansible_collections.gpufleet.upgrade.plugins.module_utils import data_rbac, rbac, security
from ansible_collections.gpufleet.upgrade.plugins.module_utils.errors import InputError

AGG_ADMIN = "rbac.authorization.k8s.io/aggregate-to-admin"


def rule(groups, resources, verbs, names=None, urls=None):
    out = {"apiGroups": groups, "resources": resources, "verbs": verbs}
    if names:
        out["resourceNames"] = names
    if urls:
        out = {"nonResourceURLs": urls, "verbs": verbs}
    return rbac.normalize_rules([out], "test")[0]


def cr(name, *rules, labels=None, aggregate=None):
    obj = {"kind": "ClusterRole", "metadata": {"name": name}, "rules": list(rules)}
    if labels:
        obj["metadata"]["labels"] = labels
    if aggregate:
        obj["aggregationRule"] = {"clusterRoleSelectors": [{"matchLabels": aggregate}]}
    return obj


def crb(name, role, *subjects, annotations=None):
    obj = {"metadata": {"name": name}, "roleRef": {"kind": "ClusterRole", "name": role, "apiGroup": rbac.RBAC},
           "subjects": list(subjects)}
    if annotations:
        obj["metadata"]["annotations"] = annotations
    return obj


def rb(namespace, name, role, *subjects, kind="ClusterRole"):
    return {"metadata": {"name": name, "namespace": namespace}, "roleRef": {"kind": kind, "name": role},
            "subjects": list(subjects)}


USER = {"kind": "User", "name": "mallory"}
ALICE = {"kind": "User", "name": "alice"}
MASTERS = {"kind": "Group", "name": "system:masters"}
ADMIN_ALL = {"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}
AUTOUPDATE = {rbac.AUTOUPDATE: "true"}


# -- rules as Kubernetes RBAC matches them ----------------------------------------------------------------------
@pytest.mark.parametrize("given, reason", [
    (rule([""], ["*/exec"], ["get", "create"]), "runs commands in containers (create, get */exec)"),
    (rule([""], ["pods/exec"], ["create"]), "runs commands in containers (create pods/exec)"),
    (rule(["*"], ["*/attach"], ["get"]), "attaches to containers (get */attach)"),
    (rule([""], ["*/proxy"], ["get"]), "proxies to pods, services or nodes (get */proxy)"),
    (rule([""], ["*/proxy"], ["get"]), "reaches kubelets through nodes/proxy (get */proxy)"),
    (rule([""], ["services/proxy"], ["get"]), "proxies to pods, services or nodes (get services/proxy)"),
    (rule([""], ["*/token"], ["create"]), "mints tokens (create */token)"),
    (rule([""], ["serviceaccounts/token"], ["create"]), "mints tokens (create serviceaccounts/token)"),
    (rule([""], ["*/portforward"], ["create"]), "port-forwards into pods (create */portforward)"),
])
def test_subresource_wildcards_are_powerful(given, reason):
    """A ClusterRole granting */exec, */attach, */proxy or */token was not seen as powerful."""
    assert reason in rbac.power_reasons(given)


@pytest.mark.parametrize("given, reason", [
    (rule(["*"], ["*"], ["*"]), "every verb on every resource (cluster-admin)"),
    (rule([""], ["*"], ["get"]), "reads Secrets (get *)"),
    (rule([""], ["*"], ["get"]), "every resource of core (get)"),
    (rule(["apps"], ["deployments"], ["*"]), "every verb on apps/deployments"),
    (rule(["apps"], ["deployments"], ["*"]), "runs workloads as any service account of the namespace (* deployments)"),
    (rule([""], ["secrets"], ["list"], names=["db"]), "reads Secrets (list secrets, only db)"),
    (rule([rbac.RBAC], ["clusterroles"], ["escalate"]), "escalates or binds roles (escalate clusterroles)"),
    (rule(["authentication.k8s.io"], ["userextras/scopes"], ["impersonate"]),
     "impersonates (impersonate userextras/scopes)"),
    (rule(["*"], ["*/scopes"], ["impersonate"]), "impersonates (impersonate */scopes)"),
    (rule([""], ["pods/ephemeralcontainers"], ["patch"]), "adds ephemeral containers (patch pods/ephemeralcontainers)"),
    (rule(["certificates.k8s.io"], ["certificatesigningrequests/approval"], ["update"]),
     "approves certificate requests (update certificatesigningrequests/approval)"),
    (rule(["certificates.k8s.io"], ["signers"], ["approve"], names=["kubernetes.io/kube-apiserver-client"]),
     "approves certificates for a signer (approve signers, only kubernetes.io/kube-apiserver-client)"),
    (rule(["admissionregistration.k8s.io"], ["validatingwebhookconfigurations"], ["delete"]),
     "can switch admission policy off (delete validatingwebhookconfigurations)"),
    (rule(["apiregistration.k8s.io"], ["apiservices"], ["update"]), "re-routes an API group (update apiservices)"),
    (rule([""], ["persistentvolumes"], ["create"]),
     "writes PersistentVolumes, hostPath ones included (create persistentvolumes)"),
    (rule([""], ["namespaces"], ["patch"]), "relabels nodes or namespaces (patch namespaces)"),
    (rule([], [], ["*"], urls=["*"]), "every non-resource URL (*)"),
    (rule([], [], ["get"], urls=["/*"]), "every non-resource URL (get)"),
])
def test_power_reasons(given, reason):
    assert reason in rbac.power_reasons(given)


def test_a_grant_that_grows_is_a_new_reason():
    """Impersonating service accounts (edit's) and impersonating users (cluster-admin's, through system:masters)
    are not one power; get and list on Secrets neither."""
    assert rbac.power_reasons(rule([""], ["serviceaccounts"], ["impersonate"])) != \
        rbac.power_reasons(rule([""], ["users", "groups"], ["impersonate"]))
    assert rbac.power_reasons(rule([""], ["secrets"], ["get"])) != rbac.power_reasons(rule([""], ["secrets"],
                                                                                           ["get", "list"]))


@pytest.mark.parametrize("given", [
    rule([""], ["pods", "pods/log"], ["get", "list", "watch"]),
    rule([""], ["secrets"], ["create"]),  # writing a Secret reads nothing
    rule(["apps"], ["deployments/exec"], []),  # no verb matches nothing
    rule([""], ["configmaps"], ["get"], names=["kube-proxy"]),
    rule([], [], ["get"], urls=["/healthz", "/version"]),
    rule([""], ["nodes"], ["get"]),  # nodes, not nodes/proxy
])
def test_ordinary_rules_are_not_powerful(given):
    assert rbac.power_reasons(given) == []


# -- aggregation --------------------------------------------------------------------------------------------------
def test_aggregation_is_resolved_and_the_contributor_named():
    admin = cr("admin", aggregate={AGG_ADMIN: "true"})
    edit = cr("system:aggregate-to-edit", {"apiGroups": [""], "resources": ["pods/exec"], "verbs": ["create"]},
              labels={AGG_ADMIN: "true"})
    grown = cr("gpu-debug", {"apiGroups": [""], "resources": ["nodes/proxy"], "verbs": ["get"]},
               labels={AGG_ADMIN: "true"})
    powers = rbac.role_powers([admin, edit, grown])
    assert powers["admin"]["runs commands in containers (create pods/exec)"] == ["system:aggregate-to-edit"]
    assert powers["admin"]["reaches kubelets through nodes/proxy (get nodes/proxy)"] == ["gpu-debug"]
    assert "reaches kubelets through nodes/proxy (get nodes/proxy)" not in rbac.role_powers([admin, edit])["admin"]


def test_match_expressions_and_an_empty_selector():
    """As LabelSelectorAsSelector reads them: In/NotIn/Exists/DoesNotExist, and an empty selector matches every
    ClusterRole."""
    picky = {"kind": "ClusterRole", "metadata": {"name": "picky"}, "aggregationRule": {"clusterRoleSelectors": [
        {"matchExpressions": [{"key": "team", "operator": "In", "values": ["gpu"]}]}]}}
    everything = {"kind": "ClusterRole", "metadata": {"name": "everything"},
                  "aggregationRule": {"clusterRoleSelectors": [{}]}}
    gpu = cr("gpu", ADMIN_ALL, labels={"team": "gpu"})
    other = cr("other", ADMIN_ALL, labels={"team": "web"})
    powers = rbac.role_powers([picky, everything, gpu, other])
    assert powers["picky"]["every verb on every resource (cluster-admin)"] == ["gpu"]
    assert powers["everything"]["every verb on every resource (cluster-admin)"] == ["gpu", "other"]
    with pytest.raises(InputError, match="values must be a list of strings"):
        bad = {"kind": "ClusterRole", "metadata": {"name": "bad"}, "aggregationRule": {"clusterRoleSelectors": [
            {"matchExpressions": [{"key": "team", "operator": "In", "values": "gpu"}]}]}}
        rbac.role_powers([bad, gpu])
    with pytest.raises(InputError, match="operator 'Is' is not In"):
        bad = {"kind": "ClusterRole", "metadata": {"name": "bad"}, "aggregationRule": {"clusterRoleSelectors": [
            {"matchExpressions": [{"key": "team", "operator": "Is"}]}]}}
        rbac.role_powers([bad, gpu])


# -- new grants, expected only by identity -------------------------------------------------------------------------
TABLE = ("the v1.36 apiserver and kubeadm (test)", rbac.expected_snapshot({
    "ClusterRole": [cr("cluster-admin", ADMIN_ALL), cr("system:node", {"apiGroups": [""], "resources": ["nodes"],
                                                                        "verbs": ["get"]})],
    "ClusterRoleBinding": [crb("cluster-admin", "cluster-admin", MASTERS),
                           crb("kubeadm:cluster-admins", "cluster-admin", {"kind": "Group",
                                                                           "name": "kubeadm:cluster-admins"}),
                           crb("system:node", "system:node")]}))


def snap(roles, bindings, role_bindings=()):
    return security.rbac_snapshot(roles, bindings, (), role_bindings)


ROLES = [cr("cluster-admin", ADMIN_ALL), cr("system:node", {"apiGroups": [""], "resources": ["nodes"],
                                                            "verbs": ["get"]})]
BEFORE = snap(ROLES, [crb("cluster-admin", "cluster-admin", MASTERS)])


def judged(after, accepted=()):
    return rbac.judge_new_grants(BEFORE, after, [TABLE], accepted)


def test_a_kubeadm_named_binding_of_a_user_to_cluster_admin_is_new():
    """Listed as expected before: its name matched kubeadm:*."""
    after = snap(ROLES, [crb("cluster-admin", "cluster-admin", MASTERS), crb("kubeadm:anything", "cluster-admin",
                                                                              USER)])
    assert judged(after)["new"] == [
        "User mallory: every verb on every resource (cluster-admin), through ClusterRole cluster-admin (cluster), "
        "by binding kubeadm:anything"]


def test_a_system_named_autoupdate_binding_is_new_unless_its_identity_is_the_tables():
    after = snap(ROLES, [crb("cluster-admin", "cluster-admin", MASTERS),
                         crb("system:controller:sneaky", "cluster-admin", USER, annotations=AUTOUPDATE)])
    assert [g.split(" by ")[-1] for g in judged(after)["new"]] == ["binding system:controller:sneaky"]
    # the table's own binding, another subject added: the subject is new
    after = snap(ROLES, [crb("cluster-admin", "cluster-admin", MASTERS, USER)])
    assert judged(after)["new"][0].startswith("User mallory: every verb on every resource")


def test_the_tables_exact_binding_is_expected():
    after = snap(ROLES, [crb("cluster-admin", "cluster-admin", MASTERS),
                         crb("kubeadm:cluster-admins", "cluster-admin", {"kind": "Group",
                                                                         "name": "kubeadm:cluster-admins"})])
    out = judged(after)
    assert out["new"] == []
    assert out["expected"] == ["Group kubeadm:cluster-admins: every verb on every resource (cluster-admin), "
                               "through ClusterRole cluster-admin (cluster), by kubeadm:cluster-admins (the v1.36 "
                               "apiserver and kubeadm (test))"]


def test_a_table_binding_whose_role_grew_past_the_table_is_new():
    grown = [ROLES[0], cr("system:node", {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]},
                          {"apiGroups": [""], "resources": ["secrets"], "verbs": ["list"]})]
    nodes = {"kind": "Group", "name": "system:nodes"}
    before = snap(ROLES, [crb("cluster-admin", "cluster-admin", MASTERS), crb("system:node", "system:node", nodes)])
    after = snap(grown, [crb("cluster-admin", "cluster-admin", MASTERS), crb("system:node", "system:node", nodes)])
    assert rbac.judge_new_grants(before, after, [TABLE])["new"] == [
        "Group system:nodes: reads Secrets (list secrets), through ClusterRole system:node (cluster), by binding "
        "system:node"]


def test_admin_grown_by_a_new_aggregated_clusterrole_is_a_new_grant_naming_it():
    admin = cr("admin", aggregate={AGG_ADMIN: "true"})
    edit = cr("system:aggregate-to-edit", {"apiGroups": [""], "resources": ["pods/exec"], "verbs": ["create"]},
              labels={AGG_ADMIN: "true"})
    team = rb("team-a", "alice-admin", "admin", ALICE)
    before = snap([admin, edit], [], [team])
    added = cr("gpu-debug", {"apiGroups": [""], "resources": ["pods/ephemeralcontainers"], "verbs": ["patch"]},
               labels={AGG_ADMIN: "true"})
    after = snap([admin, edit, added], [], [team])
    assert rbac.judge_new_grants(before, after, [TABLE])["new"] == [
        "User alice: adds ephemeral containers (patch pods/ephemeralcontainers), through ClusterRole admin, the rule "
        "coming from ClusterRole gpu-debug (namespace team-a), by binding team-a/alice-admin"]
    assert rbac.judge_new_grants(before, snap([admin, edit], [], [team]), [TABLE])["new"] == []
    # the same power admin already had, from another ClusterRole: a new grant too (what it brings may grow)
    again = cr("more-exec", {"apiGroups": [""], "resources": ["pods/exec"], "verbs": ["create"]},
               labels={AGG_ADMIN: "true"})
    assert rbac.judge_new_grants(before, snap([admin, edit, again], [], [team]), [TABLE])["new"] == [
        "User alice: runs commands in containers (create pods/exec), through ClusterRole admin, the rule coming from "
        "ClusterRole more-exec (namespace team-a), by binding team-a/alice-admin"]
    # a cluster-scoped power through a RoleBinding grants nothing there
    kubelets = cr("kubelets", {"apiGroups": [""], "resources": ["nodes/proxy"], "verbs": ["get"]},
                  labels={AGG_ADMIN: "true"})
    assert not any("reaches kubelets" in g for g in rbac.judge_new_grants(
        before, snap([admin, edit, kubelets], [], [team]), [TABLE])["new"])


def test_a_new_aggregated_clusterrole_of_a_table_is_expected():
    """A minor (or an applied chart) that adds an aggregate-to-admin ClusterRole grows every admin binding: expected
    because the table holds that ClusterRole with the power."""
    admin = cr("admin", aggregate={AGG_ADMIN: "true"})
    team = rb("team-a", "alice-admin", "admin", ALICE)
    added = cr("system:aggregate-to-admin-new", {"apiGroups": [""], "resources": ["pods/ephemeralcontainers"],
                                                 "verbs": ["patch"]}, labels={AGG_ADMIN: "true"})
    table = ("the table", rbac.expected_snapshot({"ClusterRole": [admin, added]}))
    out = rbac.judge_new_grants(snap([admin], [], [team]), snap([admin, added], [], [team]), [table])
    assert out["new"] == [] and len(out["expected"]) == 1 and "(the table)" in out["expected"][0]


def test_the_operator_accepts_one_binding_and_subject_exactly_with_a_reason():
    after = snap(ROLES, [crb("cluster-admin", "cluster-admin", MASTERS), crb("break-glass", "cluster-admin", USER)])
    accepted = rbac.parse_accepted([{"binding": "break-glass", "role": "cluster-admin", "subject": "User mallory",
                                     "reason": "INC-42 recovery, removed after the window"}])
    out = judged(after, accepted)
    assert out["new"] == [] and out["accepted"] == [
        "User mallory: every verb on every resource (cluster-admin), through ClusterRole cluster-admin (cluster), "
        "by break-glass: accepted by the operator: INC-42 recovery, removed after the window"]
    other = rbac.parse_accepted([{"binding": "break-glass", "role": "cluster-admin", "subject": "User alice",
                                  "reason": "x"}])
    assert len(judged(after, other)["new"]) == 1
    # the binding made again to another role is not what was accepted
    narrow = rbac.parse_accepted([{"binding": "break-glass", "role": "view", "subject": "User mallory",
                                   "reason": "reads app-tls"}])
    assert len(judged(after, narrow)["new"]) == 1


@pytest.mark.parametrize("value, words", [
    ([{"binding": "kubeadm:*", "role": "r", "subject": "User a", "reason": "r"}], "exact names, not patterns"),
    ([{"binding": "b", "role": "r", "subject": "alice", "reason": "r"}], "must read KIND NAME"),
    ([{"binding": "b", "role": "r", "subject": "ServiceAccount x", "reason": "r"}], "must read KIND NAME"),
    ([{"binding": "b", "role": "r", "subject": "User a"}], "reason: required"),
    ([{"binding": "b", "subject": "User a", "reason": "r"}], "role: required"),
    ([{"binding": "b", "role": "r", "subject": "User a", "reason": "r", "pattern": "x"}], "unknown field(s) pattern"),
    ([{"binding": "b\n", "role": "r", "subject": "User a", "reason": "r"}], "binding: required, one line"),
    ("b", "a list of {binding, role, subject, reason}"),
])
def test_accepted_is_refused_unless_exact(value, words):
    with pytest.raises(InputError, match=words.replace("(", r"\(").replace(")", r"\)").replace("*", r"\*")):
        rbac.parse_accepted(value)


def test_the_old_name_patterns_are_refused_with_the_replacement():
    with pytest.raises(InputError, match="gpufleet_security_rbac_accepted"):
        security.parse_inputs([], ["system:*"])


@pytest.mark.parametrize("bad, words", [
    ({"metadata": {"name": "x"}, "roleRef": {"kind": "Role", "name": "r"}}, "roleRef must name a ClusterRole"),
    ({"metadata": {"name": "x"}, "roleRef": {"kind": "ClusterRole", "name": "r"}, "subjects": "alice"},
     "subjects must be a list"),
    ({"metadata": {"name": "x"}, "roleRef": {"kind": "ClusterRole", "name": "r"}, "subjects": [{"name": "a"}]},
     "kind User, Group or ServiceAccount"),
    ({"metadata": {}, "roleRef": {}}, "without metadata.name"),
])
def test_malformed_bindings_are_clear_errors(bad, words):
    with pytest.raises(InputError, match=words):
        rbac.binding_snapshot([bad])


# -- the generated table --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("target", ["v1.35.4", "v1.36.3", "v1.37.2"])
def test_the_table_knows_what_the_apiserver_and_kubeadm_create(target):
    source, table = data_rbac.expected(target)
    assert "kubeadm" in source
    bindings = table["bindings"]
    assert bindings["cluster-admin"]["subjects"] == ["Group system:masters"]
    assert bindings["kubeadm:cluster-admins"]["subjects"] == ["Group kubeadm:cluster-admins"]
    assert bindings["kubeadm:node-proxier"]["subjects"] == ["ServiceAccount kube-system/kube-proxy"]
    assert bindings["kubeadm:kubelet-bootstrap"]["role"] == "system:node-bootstrapper"
    assert "every verb on every resource (cluster-admin)" in table["roles"]["cluster-admin"]["power"]
    assert "runs commands in containers (create pods/exec)" in table["roles"]["admin"]["power"]  # aggregated
    assert not any(key.startswith("kubeadm:anything") for key in bindings)


def test_a_minor_without_a_table_is_a_clear_error():
    with pytest.raises(InputError, match="no RBAC table for Kubernetes v1.99.0"):
        data_rbac.expected("v1.99.0")


# -- addon RBAC: only what the applied Helm release revision holds ---------------------------------------------
MANIFEST = """---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: plugin-config, namespace: gpu}
rules: [{apiGroups: [""], resources: [secrets], resourceNames: [sharing], verbs: [get]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: plugin-config, namespace: gpu}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: plugin-config}
subjects: [{kind: ServiceAccount, name: plugin, namespace: gpu}]
"""


def helm_secret(version, status, manifest, chart="1.1.0", namespace="gpu"):
    from ansible_collections.gpufleet.upgrade.plugins.module_utils.removed_apis import encode_helm_release
    return {"metadata": {"name": "sh.helm.release.v1.plugin.v%d" % version, "namespace": namespace,
                         "labels": {"owner": "helm", "name": "plugin", "version": str(version), "status": status}},
            "data": {"release": encode_helm_release({"name": "plugin", "manifest": manifest,
                                                     "chart": {"metadata": {"version": chart}}})}}


def test_addon_rbac_is_expected_only_from_the_deployed_helm_revision():
    role = {"kind": "Role", "metadata": {"name": "plugin-config", "namespace": "gpu"},
            "rules": [{"apiGroups": [""], "resources": ["secrets"], "resourceNames": ["sharing"], "verbs": ["get"]}]}
    binding = rb("gpu", "plugin-config", "plugin-config", {"kind": "ServiceAccount", "name": "plugin"}, kind="Role")
    before = security.rbac_snapshot([], [], [], [])
    after = security.rbac_snapshot([], [], [role], [binding])
    deployed = security.helm_rbac([helm_secret(1, "superseded", "---\n"), helm_secret(2, "deployed", MANIFEST),
                                   helm_secret(9, "deployed", "---\n", namespace="other")], "gpu/plugin", "1.1.0")
    assert deployed[0] == "Helm release gpu/plugin revision 2 (chart 1.1.0)"
    out = rbac.judge_new_grants(before, after, [TABLE, deployed])
    assert out["new"] == [] and out["expected"] == [
        "ServiceAccount gpu/plugin: reads Secrets (get secrets, only sharing), through Role gpu/plugin-config "
        "(namespace gpu), by gpu/plugin-config (Helm release gpu/plugin revision 2 (chart 1.1.0))"]
    # the deployed revision without it (the same objects made outside Helm): new
    older = security.helm_rbac([helm_secret(1, "deployed", "---\n")], "gpu/plugin", "1.1.0")
    assert len(rbac.judge_new_grants(before, after, [TABLE, older])["new"]) == 1
    # a deployed revision of another chart version than the addons stage applies: none of its RBAC is expected
    assert security.helm_rbac([helm_secret(2, "deployed", MANIFEST, chart="1.0.9")], "gpu/plugin", "1.1.0") is None
    # a chart's Role without a namespace is the release's, as Helm installs it
    bare = security.helm_rbac([helm_secret(2, "deployed", MANIFEST.replace(", namespace: gpu", ""))], "gpu/plugin",
                              "1.1.0")
    assert rbac.judge_new_grants(before, after, [bare])["new"] == []
    # another subject on the chart's binding: new
    other = rb("gpu", "plugin-config", "plugin-config", {"kind": "ServiceAccount", "name": "intruder"}, kind="Role")
    assert rbac.judge_new_grants(before, security.rbac_snapshot([], [], [role], [other]), [deployed])["new"]
    with pytest.raises(InputError, match="Helm release gpu/plugin: 0 deployed revision"):
        security.helm_rbac([helm_secret(1, "failed", MANIFEST)], "gpu/plugin", "1.1.0")


def test_aggregation_through_an_aggregated_role_and_a_cycle():
    """edit aggregates into admin while itself aggregated: admin gets edit's sources' rules, named after them; two
    roles aggregating each other end."""
    admin = cr("admin", aggregate={AGG_ADMIN: "true"})
    edit = cr("edit", aggregate={"x/aggregate-to-edit": "true"}, labels={AGG_ADMIN: "true"})
    leaf = cr("leaf", {"apiGroups": [""], "resources": ["pods/exec"], "verbs": ["create"]},
              labels={"x/aggregate-to-edit": "true"})
    assert rbac.role_powers([admin, edit, leaf])["admin"] == {"runs commands in containers (create pods/exec)": [
        "leaf"]}
    a = cr("a", ADMIN_ALL, aggregate={"b": "true"}, labels={"a": "true"})
    b = cr("b", aggregate={"a": "true"}, labels={"b": "true"})
    assert rbac.role_powers([a, b])["b"] == {"every verb on every resource (cluster-admin)": ["a"]}
