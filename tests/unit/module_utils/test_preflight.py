"""Preflight findings from API objects, and the version inventory report."""
from __future__ import annotations

import pytest

from ansible_collections.gpufleet.upgrade.plugins.module_utils.cluster_checks import (
    crd_findings, pdb_findings, summarize_findings, webhook_findings)
from ansible_collections.gpufleet.upgrade.plugins.module_utils.errors import InputError
from ansible_collections.gpufleet.upgrade.plugins.module_utils.preflight_report import (
    render_markdown, version_inventory)


def webhook_config(name, svc, policy="Fail"):
    hook = {"name": name + ".example.com", "clientConfig": {"service": {"namespace": "gatekeeper", "name": svc}}}
    if policy:
        hook["failurePolicy"] = policy
    return {"kind": "ValidatingWebhookConfiguration", "metadata": {"name": name}, "webhooks": [hook]}


def slice_(svc, ready=True, ns="gatekeeper"):
    return {"metadata": {"namespace": ns, "labels": {"kubernetes.io/service-name": svc}},
            "endpoints": [{"addresses": ["10.0.0.9"], "conditions": {"ready": ready}}]}


def test_dead_fail_webhook_blocks_and_ignore_webhook_warns():
    configs = [webhook_config("gk", "gk-svc"), webhook_config("soft", "soft-svc", "Ignore"),
               webhook_config("alive", "alive-svc"), webhook_config("default-policy", "dead", None)]
    found = webhook_findings(configs, [], [slice_("gk-svc", ready=False), slice_("alive-svc")])
    subjects = {c.subject: c for c in found}
    assert set(subjects) == {"ValidatingWebhookConfiguration gk / gk.example.com",
                             "ValidatingWebhookConfiguration soft / soft.example.com",
                             "ValidatingWebhookConfiguration default-policy / default-policy.example.com"}
    assert subjects["ValidatingWebhookConfiguration soft / soft.example.com"].severity == "warn"
    summary = summarize_findings(found, [], [], ["webhook"])
    assert not summary["passed"] and len(summary["blocking"]) == 2
    assert "service gatekeeper/gk-svc has no ready endpoint" in summary["blocking"][0]["message"]


def test_conversion_webhook_and_unserved_stored_versions():
    crd = {"metadata": {"name": "widgets.example.com"},
           "spec": {"versions": [{"name": "v1", "served": True}, {"name": "v1beta1", "served": False}],
                    "conversion": {"strategy": "Webhook", "webhook": {"clientConfig": {
                        "service": {"namespace": "widgets", "name": "conv"}}}}},
           "status": {"storedVersions": ["v1beta1", "v1"]}}
    conv = webhook_findings([], [crd], [])
    assert [c.name for c in conv] == ["conversion-webhook"]
    stored = crd_findings([crd])
    assert stored[0].measured == "stored v1beta1,v1, served v1" and "remove v1beta1" in stored[0].detail
    ok = dict(crd, status={"storedVersions": ["v1"]})
    assert crd_findings([ok]) == []


def test_pdbs_at_zero_are_warnings():
    pdbs = [{"metadata": {"namespace": "web", "name": "strict"}, "spec": {"maxUnavailable": 0},
             "status": {"disruptionsAllowed": 0, "expectedPods": 3, "currentHealthy": 3}},
            {"metadata": {"namespace": "web", "name": "fine"}, "spec": {"minAvailable": 1},
             "status": {"disruptionsAllowed": 1, "expectedPods": 2}},
            {"metadata": {"namespace": "web", "name": "empty"}, "spec": {"minAvailable": 1},
             "status": {"disruptionsAllowed": 0, "expectedPods": 0}}]
    found = pdb_findings(pdbs)
    assert [c.subject for c in found] == ["PodDisruptionBudget web/strict"] and found[0].severity == "warn"
    assert summarize_findings([], [], found, ["pdb"])["passed"]  # a warning never blocks


HOSTS = {
    "cp-1": {"role": "control-plane", "kernel": "6.8.0-85-generic", "apiserver": "v1.35.4",
             "packages": {"kubeadm": [{"version": "1.35.4-1.1"}], "kubelet": [{"version": "1.35.4-1.1"}],
                          "kubectl": [{"version": "1.35.4-1.1"}]},
             "node": {"kubeletVersion": "v1.35.4", "osImage": "Ubuntu 24.04.3 LTS",
                      "containerRuntimeVersion": "containerd://1.7.27"}},
    "gpu-a1": {"role": "gpu", "kernel": "6.8.0-85-generic",
               "packages": {"kubelet": [{"version": "1.35.4-1.1"}], "nvidia-driver-570-server": [
                   {"version": "570.172.08-0ubuntu1"}], "nvidia-fabricmanager-570": [{"version": "570.172.08-1"}],
                   "datacenter-gpu-manager-4-core": [{"version": "1:4.2.3-1"}]},
               "node": {"kubeletVersion": "v1.35.4"}},
}


def test_version_inventory_rows():
    rows = version_inventory(HOSTS, "v1.36.3")
    by = {(r["node"], r["component"]): r for r in rows}
    assert by[("cp-1", "kube-apiserver")]["target"] == "v1.36.3" and by[("cp-1", "kube-apiserver")]["changes"]
    assert "etcd snapshot" in by[("cp-1", "kube-apiserver")]["rollback"]
    assert by[("gpu-a1", "kubelet")]["current"] == "v1.35.4"
    assert by[("gpu-a1", "nvidia-driver")]["current"] == "570.172.08-0ubuntu1"
    assert by[("gpu-a1", "nvidia-driver")]["target"] == "unchanged" and not by[("gpu-a1", "nvidia-driver")]["changes"]
    assert by[("gpu-a1", "dcgm")]["current"] == "1:4.2.3-1"
    assert ("gpu-a1", "nvidia-container-toolkit") not in by  # not installed: no row
    assert ("gpu-a1", "kube-apiserver") not in by
    rows = version_inventory(HOSTS, "v1.36.3", {"nvidia-driver": "580.95.05"})
    assert {(r["node"], r["component"]): r for r in rows}[("gpu-a1", "nvidia-driver")]["changes"]


def test_markdown_says_blocked_and_lists_rows():
    report = {"cluster": "cell1", "target": "v1.36.3", "blockers": ["webhook: gk is dead"], "warnings": [],
              "plan": {"current": "v1.35.4", "control_plane_path": ["v1.36.3"]},
              "inventory": version_inventory(HOSTS, "v1.36.3")}
    text = render_markdown(report)
    assert "BLOCKED - nothing was changed" in text and "- webhook: gk is dead" in text
    assert "| gpu-a1 | nvidia-driver | 570.172.08-0ubuntu1 | unchanged |" in text
    assert "v1.35.4 -> v1.36.3" in text


def test_markdown_lists_the_addons_in_upgrade_order():
    report = {"cluster": "cell1", "target": "v1.36.3", "blockers": [], "warnings": [], "inventory": [],
              "addons": {"upgrade_order": [{"addon": "coredns", "name": "CoreDNS"},
                                           {"addon": "kueue", "name": "Kueue"}],
                         "findings": [{"name": "Kueue", "version": "0.17", "severity": "warn",
                                       "where": "Deployment kueue-system/kueue-controller-manager image k:v0.17.0"},
                                      {"name": "CoreDNS", "version": "", "raw_version": "sha256:ab",
                                       "severity": "ok", "where": "Deployment kube-system/coredns"}]}}
    text = render_markdown(report)
    assert "## Addons (in upgrade order: CoreDNS, Kueue)" in text
    assert "| Kueue | 0.17 | Deployment kueue-system/kueue-controller-manager image k:v0.17.0 | warn |" in text
    assert "| CoreDNS | sha256:ab | Deployment kube-system/coredns | ok |" in text


# -- hostile values (issue 33): a wrong type anywhere is a clear error naming the object and the field -----------
def _pdb(**status):
    return {"metadata": {"namespace": "web", "name": "strict"}, "spec": {"maxUnavailable": 0},
            "status": dict({"disruptionsAllowed": 0, "expectedPods": 3, "currentHealthy": 3}, **status)}


def _crd(**spec):
    return {"metadata": {"name": "widgets.example.com"},
            "spec": dict({"versions": [{"name": "v1", "served": True}]}, **spec),
            "status": {"storedVersions": ["v1"]}}


@pytest.mark.parametrize("call, message", [
    (lambda: webhook_findings([dict(webhook_config("gk", "svc"), webhooks="x")], [], []),
     "ValidatingWebhookConfiguration gk: webhooks: expected a list"),
    (lambda: webhook_findings([{"kind": "ValidatingWebhookConfiguration", "metadata": {"name": "gk"},
                                "webhooks": [{"name": "a.example.com", "clientConfig": []}]}], [], []),
     r"ValidatingWebhookConfiguration gk: webhooks\[0\].clientConfig: expected a mapping, got list"),
    (lambda: webhook_findings([{"metadata": {"name": "gk"}, "webhooks": [
        {"name": "a", "clientConfig": {"service": {"namespace": "ns", "name": 7}}}]}], [], []),
     r"webhooks\[0\].clientConfig.service.name: expected a string, got int"),
    (lambda: webhook_findings([{"metadata": {"name": "gk"}, "webhooks": [
        {"name": "a", "failurePolicy": ["Ignore"], "clientConfig": {"service": {"namespace": "n", "name": "s"}}}]}],
        [], []), r"webhooks\[0\].failurePolicy: expected a string"),
    (lambda: webhook_findings(["x"], [], []), r"webhook_configurations\[0\]: expected a mapping"),
    (lambda: webhook_findings([{"metadata": [], "webhooks": []}], [], []), r"metadata: expected a mapping"),
    (lambda: webhook_findings([], [_crd(conversion={"strategy": "Webhook", "webhook": "x"})], []),
     "CustomResourceDefinition widgets.example.com: spec.conversion.webhook: expected a mapping"),
    (lambda: crd_findings([_crd(versions=5)]),
     "CustomResourceDefinition widgets.example.com: spec.versions: expected a list, got int"),
    (lambda: crd_findings([_crd(versions=[{"name": "v1", "served": "yes"}])]),
     r"CustomResourceDefinition widgets.example.com: spec.versions\[0\].served: expected true or false, got str"),
    (lambda: crd_findings([dict(_crd(), status={"storedVersions": "v1"})]),
     "status.storedVersions: expected a list"),
    (lambda: crd_findings([dict(_crd(), status={"storedVersions": [None]})]),
     r"status.storedVersions\[0\]: expected a string"),
    (lambda: webhook_findings([webhook_config("gk", "svc")], [], [dict(slice_("svc"), endpoints=[None])]),
     r"EndpointSlice gatekeeper/\?: endpoints\[0\]: expected a mapping, got NoneType"),
    (lambda: webhook_findings([webhook_config("gk", "svc")], [], [
        dict(slice_("svc"), endpoints=[{"conditions": "x"}])]), r"endpoints\[0\].conditions: expected a mapping"),
    (lambda: webhook_findings([webhook_config("gk", "svc")], [], [
        dict(slice_("svc"), endpoints=[{"conditions": {"ready": "false"}}])]),
     r"endpoints\[0\].conditions.ready: expected true or false"),
    (lambda: webhook_findings([webhook_config("gk", "svc")], [], [
        {"metadata": {"namespace": "gatekeeper", "labels": "x"}}]), "metadata.labels: expected a mapping"),
    (lambda: pdb_findings([dict(_pdb(), spec={"maxUnavailable": {}})]),
     "PodDisruptionBudget web/strict: spec.maxUnavailable: expected a number or a percentage, got dict"),
    (lambda: pdb_findings([_pdb(disruptionsAllowed="0")]), "status.disruptionsAllowed: expected an integer"),
    (lambda: pdb_findings([_pdb(expectedPods=[])]), "status.expectedPods: expected an integer"),
    (lambda: pdb_findings([dict(_pdb(), status="x")]), "PodDisruptionBudget web/strict: status: expected a mapping"),
])
def test_a_wrong_type_in_an_api_object_is_a_clear_error_naming_the_object_and_field(call, message):
    with pytest.raises(InputError, match=message):
        call()


def test_odd_but_well_typed_objects_still_judge():
    """Optional fields absent (an old client's CRD, a slice without conditions) are not errors."""
    assert crd_findings([{"metadata": {"name": "old.example.com"}}]) == []
    assert webhook_findings([webhook_config("gk", "svc")], [], [
        {"metadata": {"namespace": "gatekeeper", "labels": {"kubernetes.io/service-name": "svc"}},
         "endpoints": [{"addresses": ["10.0.0.1"]}]}]) == []  # no conditions: ready (the API's meaning)
    assert pdb_findings([{"metadata": {"namespace": "w", "name": "p"}}]) == []  # not reconciled yet
    url_hook = {"metadata": {"name": "ext"}, "webhooks": [{"name": "e", "clientConfig": {"url": "https://x"}}]}
    assert webhook_findings([url_hook], [], []) == []
