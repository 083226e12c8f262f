"""The security checks' pure judgements: PSA pinning, RBAC power and diff, legacy tokens, NetworkPolicies,
admission probes, the baseline's shape, PSA pin patches."""
from __future__ import annotations

import copy

import pytest

from ansible_collections.gpufleet.upgrade.plugins.module_utils import security
from ansible_collections.gpufleet.upgrade.plugins.module_utils.errors import InputError

PSA = "pod-security.kubernetes.io/"


def ns(name, **labels):
    return {"metadata": {"name": name, "labels": {PSA + k.replace("_", "-"): v for k, v in labels.items()}}}


ADMIN = {"metadata": {"name": "cluster-admin"}, "rules": [
    {"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}, {"nonResourceURLs": ["*"], "verbs": ["*"]}]}
VIEW = {"metadata": {"name": "view"}, "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}],
        "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"rbac.example/aggregate-to-view": "true"}}]}}
IMPERSONATOR = {"metadata": {"name": "impersonator"}, "rules": [
    {"apiGroups": [""], "resources": ["users", "groups"], "verbs": ["impersonate"]}]}


def autoupdate(obj):
    obj["metadata"]["annotations"] = {"rbac.authorization.kubernetes.io/autoupdate": "true"}
    return obj


def crb(name, role, *subjects):
    return {"metadata": {"name": name}, "roleRef": {"kind": "ClusterRole", "name": role},
            "subjects": [dict(s) for s in subjects]}


MASTERS = {"kind": "Group", "name": "system:masters"}
CI_SA = {"kind": "ServiceAccount", "name": "ci", "namespace": "tools"}


def state(namespaces=None, roles=None, bindings=None, secrets=None, policies=None):
    return security.snapshot(
        namespaces if namespaces is not None else [ns("training", enforce="baseline", enforce_version="v1.35")],
        roles if roles is not None else [ADMIN, VIEW, IMPERSONATOR],
        bindings if bindings is not None else [crb("cluster-admin", "cluster-admin", MASTERS)],
        secrets or [], policies if policies is not None else [NETPOL])


NETPOL = {"metadata": {"name": "deny", "namespace": "training"},
          "spec": {"podSelector": {}, "policyTypes": ["Ingress"]}}
CILIUM_OK = [{"addon": "cilium", "version": "1.19", "severity": "ok", "message": "ok", "where": "DaemonSet"}]


def failed(result):
    return sorted(c["name"] for c in result["checks"] if not c["passed"] and c["severity"] == "fail")


@pytest.mark.parametrize("labels, problem", [
    ({}, ""),
    ({"enforce": "baseline", "enforce_version": "v1.35"}, ""),
    ({"enforce": "privileged"}, ""),
    ({"enforce": "restricted"}, "without enforce-version"),
    ({"enforce": "baseline", "enforce_version": "latest"}, "latest"),
    ({"enforce": "baseline", "enforce_version": "1.35"}, "not a minor Pod Security accepts"),
    # PSA's own rule (^v1\.(0|[1-9][0-9]*)$, Go's $ the end of the text) refuses these and evaluates latest; each
    # was judged pinned before
    ({"enforce": "baseline", "enforce_version": "v1.035"}, "not a minor Pod Security accepts"),
    ({"enforce": "baseline", "enforce_version": "v1.35\n"}, "not a minor Pod Security accepts"),
    ({"enforce": "baseline", "enforce_version": "v1.\uff13\uff15"}, "not a minor Pod Security accepts"),
    ({"enforce": "baseline", "enforce_version": "v1.0"}, ""),
    ({"enforce": "strict", "enforce_version": "v1.35"}, "not one of"),
])
def test_psa_problem(labels, problem):
    found = security.psa_problem(security.psa_state([ns("a", **labels)])["a"])
    assert (problem in found) if problem else found == ""


def test_rbac_diff_flags_a_new_powerful_grant_and_records_changes():
    before = state()
    after = state(bindings=[crb("cluster-admin", "cluster-admin", MASTERS), crb("ci-admin", "cluster-admin", CI_SA)])
    diff = security.rbac_diff(before["rbac"], after["rbac"])
    assert diff["new_powerful_grants"] == [
        "ServiceAccount tools/ci: every non-resource URL (*), through ClusterRole cluster-admin (cluster), by binding "
        "ci-admin",
        "ServiceAccount tools/ci: every verb on every resource (cluster-admin), through ClusterRole cluster-admin "
        "(cluster), by binding ci-admin"]
    assert diff["bindings"]["added"] == ["ci-admin"]


def test_a_bound_role_that_becomes_powerful_is_a_new_grant():
    tame = {"metadata": {"name": "ops"}, "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]}
    wild = {"metadata": {"name": "ops"}, "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]}
    binding = [crb("ops", "ops", CI_SA)]
    diff = security.rbac_diff(state(roles=[tame], bindings=binding)["rbac"],
                              state(roles=[wild], bindings=binding)["rbac"])
    assert "ServiceAccount tools/ci: every verb on every resource (cluster-admin), through ClusterRole ops " \
        "(cluster), by binding ops" in diff["new_powerful_grants"]
    assert diff["roles"]["changed"] == ["ops"]


def test_aggregated_role_rule_change_is_recorded():
    grown = copy.deepcopy(VIEW)
    grown["rules"].append({"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]})
    diff = security.rbac_diff(state()["rbac"], state(roles=[ADMIN, grown, IMPERSONATOR])["rbac"])
    assert diff["roles"]["changed"] == ["view"]
    assert state()["rbac"]["roles"]["view"]["aggregated"] is True


def test_legacy_tokens_read_metadata_only():
    secret = {"type": security.LEGACY_TOKEN_TYPE, "metadata": {
        "name": "t", "namespace": "ci", "annotations": {"kubernetes.io/service-account.name": "robot"},
        "labels": {"kubernetes.io/legacy-token-last-used": "2026-10-01"}}, "data": {"token": "c2VjcmV0"}}
    tokens = security.legacy_tokens([secret, {"type": "Opaque", "metadata": {"name": "x", "namespace": "ci"}}])
    assert tokens == [{"namespace": "ci", "name": "t", "service_account": "robot", "last_used": "2026-10-01",
                       "invalid_since": ""}]
    assert "c2VjcmV0" not in repr(security.snapshot([], [], [], [secret], []))


def test_clean_cell_passes_with_and_without_baseline():
    now = state()
    probe = security.judge_probe({"namespace": "inference", "image": "x:1", "expect": "signed"}, 422,
                                 "ValidatingAdmissionPolicy 'signed' denied request")
    assert security.judge(now, None, [probe], CILIUM_OK)["passed"]
    result = security.judge(now, dict(now, target="v1.36.3"), [probe], CILIUM_OK)
    assert result["passed"], result["failures"]
    assert result["security"]["rbac"]["new_powerful_grants"] == []


@pytest.mark.parametrize("after, check", [
    (dict(namespaces=[ns("training", enforce="baseline", enforce_version="latest")]), "psa_pinned"),
    (dict(namespaces=[ns("training", enforce="restricted", enforce_version="v1.35")]), "psa_unchanged"),
    (dict(bindings=[crb("cluster-admin", "cluster-admin", MASTERS), crb("x", "impersonator", CI_SA)]),
     "rbac_no_new_powerful_grant"),
    (dict(secrets=[{"type": security.LEGACY_TOKEN_TYPE, "metadata": {"name": "n", "namespace": "ci"}}]),
     "legacy_tokens_not_added"),
    (dict(policies=[]), "network_policies_intact"),
    (dict(policies=[dict(NETPOL, spec={"podSelector": {"matchLabels": {"a": "b"}}})]), "network_policies_intact"),
])
def test_each_fault_fails_its_check(after, check):
    before = dict(state(), target="v1.36.3")
    result = security.judge(state(**after), before, [], CILIUM_OK)
    assert check in failed(result), result["failures"]
    assert not result["passed"]


def test_cni_without_a_documented_range_is_a_warning_not_a_pass():
    open_ended = [{"addon": "cilium", "version": "1.20", "severity": "warn", "message": "no upper bound"}]
    result = security.judge(state(), None, [], open_ended)
    (cni,) = [c for c in result["checks"] if c["name"] == "network_policy_cni"]
    assert cni["passed"] is False and cni["severity"] == "warn" and "no upper bound" in cni["detail"]


def test_cni_out_of_support_fails_and_missing_cni_warns():
    bad = [{"addon": "cilium", "version": "1.18", "severity": "block", "message": "Cilium 1.18 supports 1.30-1.33"}]
    assert failed(security.judge(state(), None, [], bad)) == ["network_policy_cni"]
    result = security.judge(state(), None, [], [])
    assert result["passed"] and any("network_policy_cni" in w for w in result["warnings"])
    quiet = security.judge(state(policies=[]), None, [], [])["checks"]
    assert not any(c["name"] == "network_policy_cni" for c in quiet)


def test_missing_baseline_fails_when_required():
    assert failed(security.judge(state(), None, [], CILIUM_OK, require_baseline=True)) == ["security_baseline"]


@pytest.mark.parametrize("status, message, passed, words", [
    (422, "ValidatingAdmissionPolicy 'signed' denied", True, "refused"),
    (201, "", False, "ADMITTED"),
    (403, "violates PodSecurity restricted", False, "not by the expected policy"),
    (404, "namespaces \"x\" not found", False, "could not probe"),
    (0, "connection refused", False, "could not probe"),
])
def test_probe_verdicts(status, message, passed, words):
    verdict = security.judge_probe({"namespace": "x", "image": "i:1", "expect": "signed"}, status, message)
    assert verdict["passed"] is passed and words in verdict["detail"]


def test_probe_pod_satisfies_restricted_psa():
    pod = security.probe_pod({"namespace": "x", "image": "i:1", "expect": "e"})
    ctx = pod["spec"]["containers"][0]["securityContext"]
    assert pod["spec"]["securityContext"]["runAsNonRoot"] and ctx["capabilities"]["drop"] == ["ALL"]
    assert ctx["allowPrivilegeEscalation"] is False


@pytest.mark.parametrize("value, words", [
    ("x", "a list"),
    ([{"namespace": "a", "image": "i"}], "[0].expect: required"),
    ([{"namespace": "A_B", "image": "i", "expect": "e"}], "not a namespace name"),
    ([{"namespace": "a", "image": "i", "expect": "e", "extra": 1}], "unknown field(s) extra"),
    (["a"], "a mapping"),
])
def test_bad_probes_name_the_field(value, words):
    with pytest.raises(InputError, match=None) as exc:
        security.parse_probes(value)
    assert words in str(exc.value) and "gpufleet_security_admission_probes" in str(exc.value)


def test_rbac_name_patterns_are_refused():
    assert security.parse_inputs(None)["rbac_accepted"] == []
    for old in (["system:*"], ["kubeadm:*"], "system:*"):
        with pytest.raises(InputError, match="gpufleet_security_rbac_expected: binding-name patterns are no longer"):
            security.parse_inputs(None, old)


def test_baseline_for_another_target_is_ignored_and_a_broken_one_refused():
    doc = dict(state(), target="v1.36.3")
    assert security.check_baseline(doc, "v1.37.0") is None
    assert security.check_baseline(doc, "v1.36.3")["target"] == "v1.36.3"
    with pytest.raises(InputError, match="unreadable"):
        security.check_baseline({"format": 99}, "v1.36.3")
    with pytest.raises(InputError, match="lacks 'rbac'"):
        security.check_baseline({k: v for k, v in doc.items() if k != "rbac"}, "v1.36.3")


def test_pin_patches_pin_unpinned_and_bump_only_when_asked():
    psa = security.psa_state([ns("a", enforce="baseline"), ns("b", enforce="baseline", enforce_version="v1.34"),
                              ns("c"), ns("d", enforce="privileged")])
    assert security.pin_patches(psa, "v1.35") == {"a": {PSA + "enforce-version": "v1.35"}}
    assert set(security.pin_patches(psa, "v1.35", bump=True)) == {"a", "b"}
    assert security.pin_patches(psa, "v1.35", ["b"]) == {}
    with pytest.raises(InputError, match="no such namespace"):
        security.pin_patches(psa, "v1.35", ["zz"])
    with pytest.raises(InputError, match="not a Kubernetes minor"):
        security.pin_patches(psa, "1.35")


class FakeKube:
    """The reads and writes security.py makes, in memory."""

    def __init__(self):
        self.ns = [ns("training", enforce="baseline"), ns("inference", enforce="restricted", enforce_version="v1.35")]
        self.cms = {}
        self.patched = []

    def rbac(self):
        return [ADMIN, VIEW], [crb("cluster-admin", "cluster-admin", MASTERS)], [], []

    def namespaces(self):
        return self.ns

    def secrets_of_type(self, secret_type):
        return []

    def network_policies(self):
        return [NETPOL]

    def workload_images(self):
        return [{"kind": "DaemonSet", "metadata": {"namespace": "kube-system", "name": "cilium"},
                 "spec": {"template": {"spec": {"containers": [{"image": "quay.io/cilium/cilium:v1.19.3"}]}}}}]

    def server_version(self):
        return "v1.35.4"

    def read_config_map(self, namespace, name):
        return self.cms.get((namespace, name))

    def put_config_map(self, namespace, name, data, labels):
        self.cms[(namespace, name)] = {"data": data, "metadata": {"labels": labels}}

    def dry_run_pod(self, namespace, body):
        return 422, "ValidatingAdmissionPolicy 'signed' denied request"

    def patch_namespace(self, name, body):
        self.patched.append((name, body))
        for n in self.ns:
            if n["metadata"]["name"] == name:
                n["metadata"]["labels"].update(body["metadata"]["labels"])


def test_baseline_is_taken_once_per_target_and_not_in_check_mode():
    kube = FakeKube()
    assert security.take_baseline(kube, "v1.36.3", "run-1", check_mode=True)["changed"] and not kube.cms
    first = security.take_baseline(kube, "v1.36.3", "run-1", check_mode=False)
    assert first["changed"] and first["baseline"]["target"] == "v1.36.3"
    again = security.take_baseline(kube, "v1.36.3", "run-2", check_mode=False)
    assert not again["changed"] and again["baseline"]["run_id"] == "run-1"
    assert security.take_baseline(kube, "v1.37.1", "run-3", check_mode=False)["changed"]  # another target


def test_check_against_the_cluster_and_pin_carries_into_the_baseline():
    kube = FakeKube()
    security.take_baseline(kube, "v1.36.3", "run-1", check_mode=False)
    probe = [{"namespace": "inference", "image": "x:1", "expect": "signed"}]
    result = security.check(kube, "v1.36.3", probe, [], True)
    assert failed(result) == ["psa_pinned"], result["failures"]  # training's enforce follows the control plane
    assert security.pin(kube, "v1.36.3", "v1.35", [], False, check_mode=True)["changed"] and not kube.patched
    pinned = security.pin(kube, "v1.36.3", "v1.35", [], False, check_mode=False)
    assert pinned["psa_changes"] == {"training": "v1.35"}
    result = security.check(kube, "v1.36.3", probe, [], True)
    assert result["passed"], result["failures"]  # the baseline moved with the pin: psa_unchanged passes
    assert [c["measured"] for c in result["checks"] if c["name"] == "network_policy_cni"] == ["cilium 1.19"]


def test_a_baseline_too_big_for_a_configmap_is_refused_with_its_counts():
    kube = FakeKube()
    kube.network_policies = lambda: [{"metadata": {"name": "p%05d-%s" % (i, "x" * 40), "namespace": "ns"},
                                      "spec": {"podSelector": {}}} for i in range(20000)]
    with pytest.raises(InputError, match="more than one ConfigMap holds .* 20000 NetworkPolicies"):
        security.take_baseline(kube, "v1.36.3", "run-1", check_mode=False)
    assert not kube.cms



@pytest.mark.parametrize("rule, why", [
    ({"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["*"], "verbs": ["*"]}, "escalates or binds roles"),
    ({"apiGroups": [""], "resources": ["*"], "verbs": ["*"]}, "reads Secrets"),
    ({"apiGroups": [""], "resources": ["secrets"], "verbs": ["list"]}, "reads Secrets"),
    ({"apiGroups": ["*"], "resources": ["*"], "verbs": ["get", "list", "create", "delete"]}, "reads Secrets"),
    ({"apiGroups": [""], "resources": ["serviceaccounts"], "verbs": ["*"]}, "impersonates"),
    ({"apiGroups": [""], "resources": ["pods/exec"], "verbs": ["create"]}, "runs commands in containers"),
    ({"apiGroups": [""], "resources": ["serviceaccounts/token"], "verbs": ["create"]}, "mints tokens"),
    ({"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["clusterrolebindings"], "verbs": ["create"]},
     "writes role bindings"),
    ({"apiGroups": ["admissionregistration.k8s.io"], "resources": ["validatingadmissionpolicybindings"],
      "verbs": ["delete"]}, "can switch admission policy off"),
])
def test_power_catches_grants_a_step_from_cluster_admin(rule, why):
    roles = security.rbac_snapshot([{"metadata": {"name": "r"}, "rules": [rule]}], [])["roles"]
    assert any(why in w for w in roles["r"]["power"]), rule


def test_power_leaves_ordinary_rules_alone():
    tame = [{"apiGroups": [""], "resources": ["pods", "configmaps"], "verbs": ["get", "list", "watch"]},
            {"nonResourceURLs": ["/healthz", "/livez"], "verbs": ["get"]}]
    assert security.rbac_snapshot([{"metadata": {"name": "r"}, "rules": tame}], [])["roles"]["r"]["power"] == {}


def test_a_binding_named_like_the_system_is_not_exempt_without_being_the_systems():
    evil = crb("system:evil", "cluster-admin", CI_SA)  # no autoupdate: not the apiserver's
    diff = security.rbac_diff(state()["rbac"], state(bindings=[crb("cluster-admin", "cluster-admin", MASTERS),
                                                               evil])["rbac"])
    assert diff["new_powerful_grants"][1] == (
        "ServiceAccount tools/ci: every verb on every resource (cluster-admin), through ClusterRole cluster-admin "
        "(cluster), by binding system:evil")


def test_power_given_to_everybody_through_a_bootstrap_role_is_caught():
    basic = autoupdate({"metadata": {"name": "system:basic-user"}, "rules": [
        {"apiGroups": ["authorization.k8s.io"], "resources": ["selfsubjectreviews"], "verbs": ["create"]}]})
    everyone = autoupdate(crb("system:basic-user", "system:basic-user", {"kind": "Group",
                                                                         "name": "system:authenticated"}))
    grown = copy.deepcopy(basic)
    grown["rules"].append({"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]})
    before = state(roles=[ADMIN, basic], bindings=[everyone])
    diff = security.rbac_diff(before["rbac"], state(roles=[ADMIN, grown], bindings=[everyone])["rbac"])
    assert diff["new_powerful_grants"] == [
        "Group system:authenticated: every verb on every resource (cluster-admin), through ClusterRole "
        "system:basic-user (cluster), by binding system:basic-user"]


def test_a_role_binding_to_cluster_admin_in_a_namespace_is_caught():
    rb = {"metadata": {"name": "ops", "namespace": "kube-system"},
          "roleRef": {"kind": "ClusterRole", "name": "cluster-admin"},
          "subjects": [{"kind": "ServiceAccount", "name": "robot"}]}  # namespace from the binding
    secret_reader = {"metadata": {"name": "peek", "namespace": "kube-system"},
                     "rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}]}
    rb2 = {"metadata": {"name": "peek", "namespace": "kube-system"}, "roleRef": {"kind": "Role", "name": "peek"},
           "subjects": [CI_SA]}
    before = security.snapshot([], [ADMIN], [], [], [])
    after = security.snapshot([], [ADMIN], [], [], [], roles=[secret_reader], role_bindings=[rb, rb2])
    diff = security.rbac_diff(before["rbac"], after["rbac"])
    assert diff["new_powerful_grants"] == [  # non-resource URLs are not a namespace's: a RoleBinding grants none
        "ServiceAccount kube-system/robot: every verb on every resource (cluster-admin), through ClusterRole "
        "cluster-admin (namespace kube-system), by binding kube-system/ops",
        "ServiceAccount tools/ci: reads Secrets (get secrets), through Role kube-system/peek (namespace kube-system), "
        "by binding kube-system/peek"]


@pytest.mark.parametrize("message", [
    'admission webhook "validate.kyverno.svc" does not support dry run',
    'pods is forbidden: User "gpufleet" cannot create resource "pods" in API group "" in the namespace "signed"',
])
def test_a_probe_that_could_not_be_judged_is_not_a_pass(message):
    verdict = security.judge_probe({"namespace": "x", "image": "i:1", "expect": "validate.kyverno"}, 400, message)
    assert verdict["passed"] is False and "could not probe" in verdict["detail"]


@pytest.mark.parametrize("expect", ["inference", "nginx", "forbidden", "gpufleet-admission-probe", "denied"])
def test_a_probe_expecting_words_any_refusal_echoes_is_refused(expect):
    with pytest.raises(InputError, match=r"\[0\]\.expect: .* is echoed in any refusal"):
        security.parse_probes([{"namespace": "inference", "image": "docker.io/nginx:1", "expect": expect}])


def test_a_pin_above_the_target_follows_the_control_plane():
    labels = security.psa_state([ns("a", enforce="baseline", enforce_version="v1.99")])["a"]
    assert "newer than v1.36" in security.psa_problem(labels, "v1.36")
    assert security.psa_problem(labels) == ""
    result = security.judge(state(namespaces=[ns("a", enforce="baseline", enforce_version="v1.99")]), None, [],
                            CILIUM_OK, target="v1.36.3")
    assert "psa_pinned" in failed(result)
    with pytest.raises(InputError, match="psa_version: v1.37 is newer than the target v1.36.3"):
        security.pin(FakeKube(), "v1.36.3", "v1.37", [], False, check_mode=True)


def test_no_probe_configured_is_a_warning():
    result = security.judge(state(), None, [], CILIUM_OK)
    assert result["passed"] and any("admission_probes" in w for w in result["warnings"])


@pytest.mark.parametrize("empty, what", [("namespaces", "Namespace"), ("roles", "ClusterRole")])
def test_nothing_read_is_a_failure_not_nothing_to_judge(empty, what):
    now = state(**{empty: []}) if empty == "namespaces" else state(roles=[])
    result = security.judge(now, None, [], CILIUM_OK)
    assert "security_read" in failed(result)
    assert any("no %s could be read" % what in f for f in result["failures"])

