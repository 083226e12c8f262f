"""The security checks against the lab's real apiserver: a baseline, then one fault at a time - each breaks one
check, the run fails naming it, the fault is undone. Pod Security is put back by playbooks/psa_pin.yml (the
recorded step an operator uses), which also carries a deliberate bump into the baseline."""
from __future__ import annotations

import glob
import json
import os
import pathlib
import subprocess
import sys
import time

import pytest
from kubernetes import client, config

from ansible_collections.gpufleet.upgrade.plugins.module_utils import security
from gpufleet_lab import kube as lab_kube
from tests.lab.conftest import ROOT

pytestmark = pytest.mark.lab
BIN = pathlib.Path(sys.executable).parent
PSA = "pod-security.kubernetes.io/"
TARGET = "v1.36.3"


def run(lab, records, playbook, *extra):
    env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_CALLBACK_RESULT_FORMAT="json", GPUFLEET_CHANGE_RECORD_DIR=str(records),
               PATH="%s:%s" % (BIN, os.environ["PATH"]))
    return subprocess.run([str(BIN / "ansible-playbook"), playbook, "-i", str(lab.inventory),
                           "-e", "gpufleet_target_version=%s" % TARGET, *extra],
                          cwd=ROOT, env=env, capture_output=True, text=True, check=False, timeout=600)


def latest_record(records):
    return json.loads(pathlib.Path(sorted(glob.glob(str(records / "*.json")))[-1]).read_text())


def check(lab, records, *extra):
    proc = run(lab, records, "tests/lab/playbooks/security_check.yml", *extra)
    record = latest_record(records)
    failed = sorted({g["check"] for g in record["gates"] if not g["passed"] and g["severity"] == "fail"})
    return proc, record, failed


@pytest.fixture(scope="module")
def apis(lab, tmp_path_factory):
    api = config.new_client_from_config(str(lab.kubeconfig))
    records = tmp_path_factory.mktemp("security-records")
    apis = {"core": client.CoreV1Api(api), "rbac": client.RbacAuthorizationV1Api(api),
            "net": client.NetworkingV1Api(api), "apps": client.AppsV1Api(api),
            "adm": client.AdmissionregistrationV1Api(api), "records": records}
    lab_kube.ensure_security(lab)
    yield apis
    lab_kube.ensure_security(lab)
    lab_kube.tolerate(404, apis["core"].delete_namespaced_config_map, "gpufleet-security-baseline", "kube-system")


def test_baseline_then_clean(lab, apis):
    lab_kube.tolerate(404, apis["core"].delete_namespaced_config_map, "gpufleet-security-baseline", "kube-system")
    proc, record, failed = check(lab, apis["records"], "-e", "security_state=baseline")
    assert proc.returncode == 0 and failed == [], proc.stdout[-3000:]
    cm = apis["core"].read_namespaced_config_map("gpufleet-security-baseline", "kube-system")
    doc = json.loads(cm.data["baseline.json"])
    assert doc["target"] == TARGET and doc["psa"]["training"] == {"enforce": "baseline", "enforce-version": "v1.35"}
    assert doc["legacy_tokens"] == ["training/legacy-ci-token"]
    names = {g["check"] for g in record["gates"]}
    assert {"psa_pinned", "admission_refuses", "rbac_no_new_powerful_grant", "network_policies_intact",
            "network_policy_cni", "legacy_tokens", "legacy_tokens_not_added", "psa_unchanged"} <= names
    # the legacy token's data never reaches the record or the output
    token = apis["core"].read_namespaced_secret("legacy-ci-token", "training").data or {}
    assert token, "the lab's token controller did not fill the legacy token Secret"
    for value in token.values():
        assert value not in json.dumps(record) and value not in proc.stdout
    # a rerun keeps the first baseline
    taken = doc["taken"]
    check(lab, apis["records"], "-e", "security_state=baseline")
    again = apis["core"].read_namespaced_config_map("gpufleet-security-baseline", "kube-system")
    assert json.loads(again.data["baseline.json"])["taken"] == taken


def _escalate(a):
    a["rbac"].create_cluster_role_binding({"metadata": {"name": "lab-fault-escalation"}, "roleRef": {
        "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
        "subjects": [{"kind": "ServiceAccount", "name": "default", "namespace": "training"}]})


RBAC_API = "rbac.authorization.k8s.io"


def _kubeadm_named(a):
    """A binding hidden under a kubeadm-like name: listed as expected when names were trusted."""
    a["rbac"].create_cluster_role_binding({"metadata": {"name": "kubeadm:lab-fault"}, "roleRef": {
        "apiGroup": RBAC_API, "kind": "ClusterRole", "name": "cluster-admin"},
        "subjects": [{"apiGroup": RBAC_API, "kind": "User", "name": "lab-fault-user"}]})


def _exec_role(a):
    """A ClusterRole granting */exec, bound to a user: not seen as powerful when subresource wildcards were not
    matched."""
    a["rbac"].create_cluster_role({"metadata": {"name": "lab-fault-exec"}, "rules": [
        {"apiGroups": [""], "resources": ["*/exec"], "verbs": ["create"]}]})
    a["rbac"].create_cluster_role_binding({"metadata": {"name": "lab-fault-exec"}, "roleRef": {
        "apiGroup": RBAC_API, "kind": "ClusterRole", "name": "lab-fault-exec"},
        "subjects": [{"apiGroup": RBAC_API, "kind": "User", "name": "lab-fault-exec-user"}]})


def _grow_admin(a):
    """admin grown through a new aggregated ClusterRole: team-admin's lead may add ephemeral containers."""
    a["rbac"].create_cluster_role({"metadata": {"name": "lab-fault-grow-admin", "labels": {
        "rbac.authorization.k8s.io/aggregate-to-admin": "true"}}, "rules": [
        {"apiGroups": [""], "resources": ["pods/ephemeralcontainers"], "verbs": ["patch"]}]})


def _helm_lookalike(a):
    """A Role reading the device plugin's Secret and its binding to the plugin's ServiceAccount, in the release's
    namespace, made outside Helm: expected only when a Helm release revision the addons stage applied holds them,
    which none does (the chart's own Role is nvidia-device-plugin-config, from 0.17.4: lab/charts)."""
    ns = "nvidia-device-plugin"
    a["rbac"].create_namespaced_role(ns, {"metadata": {"name": "lab-fault-sharing"}, "rules": [
        {"apiGroups": [""], "resources": ["secrets"], "resourceNames": ["nvidia-device-plugin-sharing"],
         "verbs": ["get", "watch"]}]})
    a["rbac"].create_namespaced_role_binding(ns, {"metadata": {"name": "lab-fault-sharing"}, "roleRef": {
        "apiGroup": RBAC_API, "kind": "Role", "name": "lab-fault-sharing"},
        "subjects": [{"kind": "ServiceAccount", "name": "nvidia-device-plugin", "namespace": ns}]})


def _undo_rbac(a):
    ns = "nvidia-device-plugin"
    lab_kube.tolerate(404, a["rbac"].delete_namespaced_role_binding, "lab-fault-sharing", ns)
    lab_kube.tolerate(404, a["rbac"].delete_namespaced_role, "lab-fault-sharing", ns)
    for name in ("lab-fault-escalation", "kubeadm:lab-fault", "lab-fault-exec"):
        lab_kube.tolerate(404, a["rbac"].delete_cluster_role_binding, name)
    for name in ("lab-fault-exec", "lab-fault-grow-admin"):
        lab_kube.tolerate(404, a["rbac"].delete_cluster_role, name)


def _token(a):
    a["core"].create_namespaced_secret("training", {
        "metadata": {"name": "lab-fault-token", "annotations": {"kubernetes.io/service-account.name": "legacy-ci"}},
        "type": "kubernetes.io/service-account-token"})


def admission_refuses(a, refused, timeout=20.0):
    """Wait until the apiserver's admission plugin has caught up with the policy binding (it reads bindings from
    an informer), so the check sees the state the test made."""
    pod = security.probe_pod({"namespace": "inference", "image": "nginx:1", "expect": ""})  # passes restricted PSA
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            a["core"].create_namespaced_pod("inference", pod, dry_run="All")
            now = False
        except client.exceptions.ApiException as exc:
            now = exc.status == 422 and lab_kube.SIGNED_POLICY in (exc.body or "")
        if now == refused:
            return
        time.sleep(0.3)
    raise AssertionError("admission did not become %s in %.0f s" % ("refusing" if refused else "open", timeout))


def _unbind(a):
    a["adm"].delete_validating_admission_policy_binding(lab_kube.SIGNED_POLICY)
    admission_refuses(a, False)


FAULTS = {
    # fault name: (break it, check that fails, words in the failure, undo)
    "admission": (_unbind, "admission_refuses", "ADMITTED", None),
    "rbac": (_escalate, "rbac_no_new_powerful_grant",
             "ServiceAccount training/default: every verb on every resource (cluster-admin), through ClusterRole "
             "cluster-admin (cluster), by binding lab-fault-escalation", _undo_rbac),
    "rbac-kubeadm-name": (_kubeadm_named, "rbac_no_new_powerful_grant",
                          "User lab-fault-user: every verb on every resource (cluster-admin), through ClusterRole "
                          "cluster-admin (cluster), by binding kubeadm:lab-fault", _undo_rbac),
    "rbac-exec": (_exec_role, "rbac_no_new_powerful_grant",
                  "User lab-fault-exec-user: runs commands in containers (create */exec), through ClusterRole "
                  "lab-fault-exec (cluster), by binding lab-fault-exec", _undo_rbac),
    "rbac-aggregated": (_grow_admin, "rbac_no_new_powerful_grant",
                        "User lab-team-lead: adds ephemeral containers (patch pods/ephemeralcontainers), through "
                        "ClusterRole admin, the rule coming from ClusterRole lab-fault-grow-admin (namespace "
                        "training), by binding training/team-admin", _undo_rbac),
    "rbac-helm-lookalike": (_helm_lookalike, "rbac_no_new_powerful_grant",
                            "ServiceAccount nvidia-device-plugin/nvidia-device-plugin: reads Secrets (get, watch "
                            "secrets, only nvidia-device-plugin-sharing), through Role nvidia-device-plugin/lab-fault-"
                            "sharing (namespace nvidia-device-plugin), by binding nvidia-device-plugin/lab-fault-"
                            "sharing", _undo_rbac),
    "legacy_token": (_token, "legacy_tokens_not_added", "training/lab-fault-token",
                     lambda a: a["core"].delete_namespaced_secret("lab-fault-token", "training")),
    "network_policy": (lambda a: a["net"].delete_namespaced_network_policy("allow-gang", "training"),
                       "network_policies_intact", "training/allow-gang missing", None),
    "cni": (lambda a: a["apps"].patch_namespaced_daemon_set("cilium", "kube-system", {"spec": {"template": {
        "spec": {"containers": [{"name": "cilium-agent", "image": "quay.io/cilium/cilium:v1.18.6"}]}}}}),
        "network_policy_cni", "Cilium 1.18", None),
}


def test_each_fault_fails_its_check(lab, apis):
    """Every fault at once (one run, as CI's budget wants): each check fails naming its own fault; the checks'
    independence of each other is the unit tests' (tests/unit/module_utils/test_security.py)."""
    try:
        for breaks, _, _, _ in FAULTS.values():
            breaks(apis)
        proc, record, failed = check(lab, apis["records"])
        assert proc.returncode != 0 and failed == sorted({f[1] for f in FAULTS.values()}), (
            failed, proc.stdout[-3000:])
        for _, name, words, _ in FAULTS.values():
            assert any(g["check"] == name and words in str(g["measured"]) + str(g["detail"])
                       for g in record["gates"] if not g["passed"]), (name, words, record["gates"])
        assert record["outcome"] == "failed" and record["security"][-1]["passed"] is False
    finally:
        for _, _, _, undo in FAULTS.values():
            if undo:
                lab_kube.tolerate(404, undo, apis)
        lab_kube.ensure_security(lab)
        admission_refuses(apis, True)
    proc, _, failed = check(lab, apis["records"])
    assert proc.returncode == 0 and failed == [], proc.stdout[-3000:]


def test_psa_unpinned_fails_and_psa_pin_is_the_recorded_fix(lab, apis):
    apis["core"].patch_namespace("training", {"metadata": {"labels": {PSA + "enforce-version": "latest"}}})
    proc, _, failed = check(lab, apis["records"])
    assert failed == ["psa_pinned", "psa_unchanged"], (failed, proc.stdout[-3000:])
    assert "training: enforce=baseline at enforce-version=latest" in proc.stdout

    pin = run(lab, apis["records"], "playbooks/psa_pin.yml", "-e", "gpufleet_psa_version=v1.35")
    assert pin.returncode == 0, pin.stdout[-3000:]
    assert latest_record(apis["records"])["security"][-1]["psa_changes"] == {"training": "v1.35"}
    proc, _, failed = check(lab, apis["records"])
    assert proc.returncode == 0 and failed == [], proc.stdout[-3000:]

    # a deliberate bump moves the pinned namespace and the baseline with it: the check still passes
    bump = run(lab, apis["records"], "playbooks/psa_pin.yml", "-e", "gpufleet_psa_version=v1.36",
               "-e", "gpufleet_psa_bump=true", "-e", '{"gpufleet_psa_namespaces": ["training"]}')
    assert bump.returncode == 0, bump.stdout[-3000:]
    labels = apis["core"].read_namespace("training").metadata.labels
    assert labels[PSA + "enforce-version"] == "v1.36" and labels[PSA + "enforce"] == "baseline"
    proc, _, failed = check(lab, apis["records"])
    assert proc.returncode == 0 and failed == [], proc.stdout[-3000:]


def test_the_rbac_table_is_what_the_sources_give():
    """plugins/module_utils/data_rbac.py is generated, never written by hand: bin/rbac-table --check reads the lab's
    Kubernetes module sources (the apiserver's bootstrap policy) and runs kubeadm's own phases against a fake
    clientset (built once per minor, cached with the lab's builds), and the file must be exactly what they give."""
    proc = subprocess.run([sys.executable, str(ROOT / "bin" / "rbac-table"), "--check"], cwd=ROOT,
                          capture_output=True, text=True, check=False, timeout=1800)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "is current" in proc.stdout
