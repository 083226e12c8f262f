from __future__ import annotations

import base64
import gzip
import json

import pytest

from ansible_collections.gpufleet.upgrade.plugins.module_utils.data_removed_apis import REMOVED, SOURCES
from ansible_collections.gpufleet.upgrade.plugins.module_utils.errors import InputError, ParseError
from ansible_collections.gpufleet.upgrade.plugins.module_utils.removed_apis import (
    MAPPED_DESCRIPTION, decode_helm_release, encode_helm_release, plan_mappings, scan_helm_secrets,
    scan_manifest_text, scan_metrics, scan_paths, summarize_findings, target_version)
from ansible_collections.gpufleet.upgrade.plugins.module_utils.versions import parse_version
from tests.conftest import FIXTURES, fixture_text

V134 = target_version("v1.34.2")


REAL = fixture_text("metrics", "real-1.35.4-deprecated.prom.gz")  # tests/fixtures/metrics/README.md
REAL_VERSION = fixture_text("metrics", "real-1.35.4-version.json")


def test_metrics_findings_and_blocking_from_a_real_apiserver():
    findings = scan_metrics(REAL, REAL_VERSION, V134, "cp-1")
    by_api = {f["api_version"]: f for f in findings}
    assert set(by_api) == {"resource.k8s.io/v1beta1"}  # endpoints and componentstatuses: deprecated, no removal
    dra = by_api["resource.k8s.io/v1beta1"]
    assert dra["source"] == "metrics:cp-1" and dra["object"] == "requests to resourceclaims"
    assert dra["blocks_target"] is False and dra["removed_in"] == "1.38"  # the apiserver's own label
    assert scan_metrics(REAL, REAL_VERSION, target_version("v1.38.0"), "cp-1")[0]["blocks_target"]


def test_the_excerpt_is_the_captures_own_lines_in_order():
    excerpt = fixture_text("metrics", "real-1.35.4-deprecated-excerpt.prom").splitlines()
    lines = REAL.splitlines()
    at = [lines.index(line) for line in excerpt]
    assert len(excerpt) > 20 and at == sorted(at)
    assert scan_metrics("\n".join(excerpt), REAL_VERSION, target_version("v1.38.0"), "cp-1")[0]["blocks_target"]


def test_clean_metrics_from_a_real_apiserver():
    clean = "\n".join(line for line in REAL.splitlines() if "resource.k8s.io" not in line or
                      not line.startswith("apiserver_requested_deprecated_apis"))
    assert scan_metrics(clean, REAL_VERSION, target_version("v1.37.0"), "cp-1") == []


@pytest.mark.parametrize("body, why", [
    ("", "it has no kubernetes_build_info"),
    ("<html><head><title>502 Bad Gateway</title></head><body>nginx</body></html>", "not Prometheus text"),
    (REAL_VERSION, "not Prometheus text"),
    ("# HELP kube_node_info Information about a cluster node.\n# TYPE kube_node_info gauge\n"
     'kube_node_info{node="gpu-a1",kubelet_version="v1.35.4"} 1\n', "it has no kubernetes_build_info"),
    ('kubernetes_build_info{git_version="v1.35.4"} 1\n', "no apiserver_request_total"),
])
def test_a_body_that_is_not_the_apiservers_metrics_blocks_naming_it(body, why):
    """Each was "no deprecated API in use" before: an empty 200, a proxy's error page, the /version JSON,
    kube-state-metrics' text."""
    (finding,) = scan_metrics(body, REAL_VERSION, V134, "cp-1")
    assert finding["blocks_target"] and finding["unreadable"] and finding["object"] == "metrics:cp-1"
    assert why in finding["message"] and "cp-1" in finding["message"]


@pytest.mark.parametrize("version, why", [
    (json.dumps(dict(json.loads(fixture_text("metrics", "real-1.35.4-version.json")), gitVersion="v1.36.3")),
     "kubernetes_build_info{git_version} is v1.35.4, while its /version is v1.36.3"),
    ("{}", "/version has no gitVersion"),
    ("<html>", "not valid JSON"),
    ("", "output is empty"),
])
def test_metrics_must_be_the_same_servers_as_its_version(version, why):
    (finding,) = scan_metrics(REAL, version, V134, "cp-1")
    assert finding["blocks_target"] and why in finding["message"], finding["message"]


def test_manifest_directory():
    findings, scanned = scan_paths([str(FIXTURES / "manifests" / "gitops")], V134)
    assert [p.rsplit("/", 2)[-2:] for p in scanned] == [["infra", "flowschema.yml"], ["infra", "list.json"],
                                                        ["training", "pdb.yaml"]]
    objects = {f["object"]: f for f in findings}
    assert set(objects) == {"FlowSchema gpu-operator", "DeviceClass gpu.nvidia.com",
                            "PodDisruptionBudget training/llm-train-ranks"}
    assert objects["PodDisruptionBudget training/llm-train-ranks"]["removed_in"] == "1.25"
    assert objects["PodDisruptionBudget training/llm-train-ranks"]["message"] == (
        "PodDisruptionBudget training/llm-train-ranks uses policy/v1beta1 PodDisruptionBudget, removed in v1.25 "
        "(blocks the upgrade to 1.34); migrate to policy/v1")
    assert not objects["DeviceClass gpu.nvidia.com"]["blocks_target"]
    summary = summarize_findings(findings, V134)
    assert not summary["passed"] and len(summary["blocking"]) == 2


def test_broken_yaml_is_a_blocking_finding_naming_the_file_and_the_scan_goes_on(tmp_path):
    good = tmp_path / "Deploy.YAML"  # extensions match in any case
    good.write_text("apiVersion: extensions/v1beta1\nkind: Deployment\nmetadata: {name: old}\n")
    (tmp_path / "broken.yaml").write_text((FIXTURES / "manifests" / "broken.yaml").read_text())
    findings, scanned = scan_paths([str(tmp_path)], V134)
    assert len(scanned) == 2
    broken = next(f for f in findings if f.get("unreadable"))
    assert broken["blocks_target"] and "broken.yaml could not be scanned for removed APIs" in broken["message"]
    assert "not valid YAML" in broken["message"]
    assert any(f["object"] == "Deployment old" for f in findings)


def test_hostile_manifest_files_are_refused_by_name(tmp_path):
    import os
    os.mkfifo(tmp_path / "pipe.yaml")
    (tmp_path / "zero.yaml").symlink_to("/dev/zero")
    (tmp_path / "dangling.yaml").symlink_to(tmp_path / "nothing")
    (tmp_path / "loop.yaml").symlink_to(tmp_path / "loop.yaml")
    bomb = "a: &a [x,x,x,x,x,x,x,x,x,x]\n" + "".join(
        "%s: &%s [%s]\n" % (chr(98 + i), chr(98 + i), ",".join(["*" + chr(97 + i)] * 10)) for i in range(7))
    (tmp_path / "bomb.yaml").write_text(bomb)
    findings, scanned = scan_paths([str(tmp_path)], V134)
    messages = sorted(f["message"] for f in findings)
    assert len(scanned) == 5 and all(f["blocks_target"] for f in findings)
    assert any("pipe.yaml is a FIFO, not a regular file" in m for m in messages)
    assert any("zero.yaml is a device" in m for m in messages)
    assert any("dangling.yaml does not exist" in m for m in messages)
    assert any("loop.yaml is a symlink loop" in m for m in messages)
    assert any("alias bomb" in m for m in messages)


def test_missing_path():
    with pytest.raises(InputError, match="does not exist"):
        scan_paths(["/nonexistent/gitops"], V134)


def test_helm_release_secrets():
    secrets = json.loads(fixture_text("k8s", "helm-secrets.json"))
    findings = scan_helm_secrets(secrets, V134)
    assert len(findings) == 1
    f = findings[0]
    assert f["source"] == "helm:monitoring/gpu-monitoring (revision 7)"
    assert f["api_version"] == "autoscaling/v2beta2" and f["blocks_target"]
    assert "helm mapkubeapis" in f["message"]


def test_helm_decode_layers():
    payload = {"name": "x", "manifest": "apiVersion: v1\nkind: ConfigMap\n"}
    raw = gzip.compress(json.dumps(payload).encode())
    one = base64.b64encode(raw)
    two = base64.b64encode(one).decode()
    assert decode_helm_release(two)["name"] == "x"
    assert decode_helm_release(one.decode())["name"] == "x"
    with pytest.raises(ParseError, match="gzip payload is corrupt"):
        decode_helm_release(base64.b64encode(base64.b64encode(raw[:20])).decode())
    with pytest.raises(ParseError, match="not base64"):
        decode_helm_release("!!!not base64!!!")


def test_an_unreadable_helm_release_is_a_blocking_finding_and_the_others_are_still_scanned():
    good = json.loads(fixture_text("k8s", "helm-secrets.json"))
    broken = [{"type": "helm.sh/release.v1", "metadata": {"name": "broken", "namespace": "monitoring"}, "data": {}},
              {"type": "helm.sh/release.v1", "metadata": {"name": "garbled", "namespace": "ops"},
               "data": {"release": "!!!not base64!!!"}}]
    findings = scan_helm_secrets(broken + good, V134)
    unreadable = {f["object"]: f["message"] for f in findings if f.get("unreadable")}
    assert unreadable["helm release secret monitoring/broken"] == (
        "helm release secret monitoring/broken could not be scanned for removed APIs: no data.release")
    assert "not base64" in unreadable["helm release secret ops/garbled"] and len(unreadable) == 2
    assert all(f["blocks_target"] for f in findings)
    assert any(f["api_version"] == "autoscaling/v2beta2" for f in findings)  # the good release was still scanned


def test_helm_release_base64_with_newlines_decodes_as_go_does():
    payload = {"name": "wrapped", "manifest": "apiVersion: batch/v1beta1\nkind: CronJob\nmetadata: {name: c}\n"}
    inner = base64.encodebytes(gzip.compress(json.dumps(payload).encode()))  # 76-column lines, trailing newline
    assert inner.endswith(b"\n") and b"\n" in inner[:-1]
    secret = {"type": "helm.sh/release.v1", "metadata": {"name": "sh.helm.release.v1.wrapped.v1", "namespace": "a"},
              "data": {"release": base64.b64encode(inner).decode()}}
    (finding,) = scan_helm_secrets([secret], V134)
    assert finding["object"] == "CronJob c" and finding["blocks_target"]


def test_every_table_row_is_consistent_and_sourced():
    for row in REMOVED:
        assert "/" in row.api_version and row.kind[0].isupper() and row.resource == row.resource.lower()
        assert target_version(row.removed_in + ".0").major == 1 and row.replacement and row.source in SOURCES
        if row.deprecated_in:
            assert target_version(row.deprecated_in + ".0") < target_version(row.removed_in + ".0"), row
        assert not row.kind.endswith("List"), "list kinds are expanded by the scanner, not listed: %s" % (row,)
    assert len({(r.api_version, r.kind) for r in REMOVED}) == len(REMOVED)


@pytest.mark.parametrize("api_version, kind, removed_in", [
    ("rbac.authorization.k8s.io/v1alpha1", "ClusterRoleBinding", "1.22"),
    ("scheduling.k8s.io/v1alpha1", "PriorityClass", "1.17"),
    ("settings.k8s.io/v1alpha1", "PodPreset", "1.20"),
    ("batch/v2alpha1", "CronJob", "1.21"),
    ("networking.k8s.io/v1alpha1", "ClusterCIDR", "1.29"),
    ("resource.k8s.io/v1alpha2", "ResourceClaim", "1.31"),
    ("resource.k8s.io/v1alpha2", "PodSchedulingContext", "1.31"),
])
def test_older_alpha_removals_are_found(api_version, kind, removed_in):
    text = "apiVersion: %s\nkind: %s\nmetadata: {name: x}\n" % (api_version, kind)
    (finding,) = scan_manifest_text(text, V134, "old.yaml")
    assert finding["removed_in"] == removed_in and finding["blocks_target"] and finding["severity"] == "block"


def test_deprecated_but_served_at_the_target_is_a_warning_not_a_blocker():
    text = "apiVersion: flowcontrol.apiserver.k8s.io/v1beta3\nkind: FlowSchema\nmetadata: {name: fs}\n"
    (early,) = scan_manifest_text(text, target_version("v1.28.4"), "fs.yaml")
    assert not early["blocks_target"] and early["severity"] == "warn"
    assert early["message"] == ("FlowSchema fs uses flowcontrol.apiserver.k8s.io/v1beta3 FlowSchema, removed in "
                                "v1.32; migrate to flowcontrol.apiserver.k8s.io/v1")  # not deprecated yet at 1.28
    (served,) = scan_manifest_text(text, target_version("v1.30.0"), "fs.yaml")
    assert not served["blocks_target"] and served["deprecated_in"] == "1.29"
    assert "deprecated since v1.29, still served by 1.30, removed in v1.32" in served["message"]
    (gone,) = scan_manifest_text(text, target_version("v1.32.0"), "fs.yaml")
    assert gone["blocks_target"]
    summary = summarize_findings([served], target_version("v1.30.0"))
    assert summary["passed"] and summary["warnings"] == [served["message"]]
    (preset,) = scan_manifest_text("apiVersion: settings.k8s.io/v1alpha1\nkind: PodPreset\nmetadata: {name: p}\n",
                                   V134, "p.yaml")
    assert preset["message"].endswith("; none: the API and its admission plugin were dropped")


def test_typed_list_items_take_the_lists_api_version():
    text = json.dumps({"apiVersion": "policy/v1beta1", "kind": "PodDisruptionBudgetList", "metadata": {},
                       "items": [{"metadata": {"name": "a", "namespace": "t"}},
                                 {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                                  "metadata": {"name": "new"}}]})
    (finding,) = scan_manifest_text(text, V134, "pdbs.json")
    assert finding["object"] == "PodDisruptionBudget t/a" and finding["api_version"] == "policy/v1beta1"
    assert scan_manifest_text("apiVersion: batch/v1beta1\nkind: CronJobList\nitems: []\n", V134, "e.yaml") == []
    rbac = ("apiVersion: v1\nkind: List\nitems:\n- apiVersion: rbac.authorization.k8s.io/v1alpha1\n"
            "  kind: RoleList\n  items: [{metadata: {name: r, namespace: n}}]\n")
    (finding,) = scan_manifest_text(rbac, V134, "nested.yaml")
    assert finding["object"] == "Role n/r" and finding["removed_in"] == "1.22"


def test_list_and_plain_docs():
    text = "apiVersion: batch/v1beta1\nkind: CronJob\nmetadata: {name: nightly, namespace: ops}\n---\n---\n"
    (finding,) = scan_manifest_text(text, V134, "x.yaml")
    assert finding["object"] == "CronJob ops/nightly" and finding["replacement"] == "batch/v1"


def test_target_required():
    with pytest.raises(InputError, match="target_version: required"):
        target_version("")


def test_a_broken_manifest_is_reported_without_quoting_its_text(monkeypatch):
    """PyYAML's own error message quotes the line around the problem; a release's values may be secrets."""
    import yaml

    from ansible_collections.gpufleet.upgrade.plugins.module_utils import textparse
    monkeypatch.setattr(textparse, "_yaml_loader", lambda: (yaml, yaml.SafeLoader))  # the loader that quotes
    payload = {"name": "leaky", "manifest": 'kind: Secret\nstringData: {password: "hunter2-SUPER-SECRET" trailing\n'}
    data = base64.b64encode(base64.b64encode(gzip.compress(json.dumps(payload).encode()))).decode()
    (finding,) = scan_helm_secrets([{"type": "helm.sh/release.v1", "metadata": {"name": "leaky", "namespace": "a"},
                                     "data": {"release": data}}], V134)
    assert finding["unreadable"] and "not valid YAML" in finding["message"] and "line 2, column" in finding["message"]
    assert "hunter2" not in finding["message"]


# -- mapping a release's stored APIs (helm-mapkubeapis) ---------------------------------------------------------------
OLD_PDB = ("---\n# Source: app/templates/pdb.yaml\napiVersion: policy/v1beta1\nkind: PodDisruptionBudget\nmetadata:\n"
           "  name: app\nspec:\n  minAvailable: 1\n---\n# Source: app/templates/deploy.yaml\napiVersion: apps/v1\n"
           "kind: Deployment\nmetadata:\n  name: app\n")


def release_secret(manifest, revision=3, name="app", namespace="web", status="deployed"):
    release = {"name": name, "namespace": namespace, "version": revision, "manifest": manifest,
               "info": {"status": status, "description": "Upgrade complete"},
               "chart": {"metadata": {"name": "app", "version": "1.2.0"}}, "config": {"password": "s3cret"}}
    return {"type": "helm.sh/release.v1",
            "metadata": {"name": "sh.helm.release.v1.%s.v%d" % (name, revision), "namespace": namespace,
                         "labels": {"name": name, "owner": "helm", "status": status, "version": str(revision),
                                    "modifiedAt": "1700000000"}},
            "data": {"release": encode_helm_release(release)}}


V136 = parse_version("v1.36.3")
CLEAN = OLD_PDB.replace("policy/v1beta1", "policy/v1")


def test_a_release_that_records_a_removed_api_is_mapped_as_helm_mapkubeapis_does():
    secret = release_secret(OLD_PDB)
    assert decode_helm_release(secret["data"]["release"])["manifest"] == OLD_PDB  # the encoding round-trips
    (plan,) = plan_mappings([release_secret(CLEAN, revision=2, status="superseded"), secret], V136, "2026-12-04")
    assert plan["mapped"] == [{"object": "PodDisruptionBudget app", "from": "policy/v1beta1", "to": "policy/v1",
                               "removed_in": "1.25"}]
    assert (plan["revision"], plan["new_revision"]) == (3, 4)
    new = decode_helm_release(plan["secret"]["data"]["release"])
    assert new["manifest"] == CLEAN
    assert (new["version"], new["info"]["status"], new["info"]["description"]) == (4, "deployed", MAPPED_DESCRIPTION)
    assert new["config"] == {"password": "s3cret"} and new["chart"]["metadata"]["version"] == "1.2.0"  # unchanged
    assert plan["secret"]["metadata"]["name"] == "sh.helm.release.v1.app.v4"
    assert plan["secret"]["metadata"]["labels"] == {"name": "app", "owner": "helm", "status": "deployed",
                                                    "version": "4"}
    (old,) = plan["supersede"]  # only the deployed revision: the superseded one stays as it is
    assert old["name"] == "sh.helm.release.v1.app.v3" and old["patch"]["metadata"]["labels"] == {
        "status": "superseded"}
    was = decode_helm_release(old["patch"]["data"]["release"])
    assert (was["version"], was["info"]["status"], was["manifest"]) == (3, "superseded", OLD_PDB)
    # after the mapping: nothing to map (a rerun), and the scan passes it
    after = [release_secret(CLEAN, revision=2, status="superseded"), release_secret(OLD_PDB, status="superseded"),
             dict(plan["secret"], type="helm.sh/release.v1")]
    assert plan_mappings(after, V136, "now") == []
    assert [f["severity"] for f in scan_helm_secrets(after, V136)] == ["warn"]
    assert plan_mappings([release_secret(CLEAN)], V136, "now") == []
    assert plan_mappings([secret], V136, "now", only=["web/other"]) == []


def test_the_revision_helm_upgrades_from_decides_and_the_new_one_follows_the_highest():
    # deployed v4 with the old API, v5 failed with the new one: Helm upgrades from v4
    stuck = [release_secret(OLD_PDB, revision=4), release_secret(CLEAN, revision=5, status="failed")]
    (finding,) = scan_helm_secrets(stuck, V136)
    assert finding["severity"] == "block" and finding["source"] == "helm:web/app (revision 4)"
    (plan,) = plan_mappings(stuck, V136, "now")
    assert (plan["revision"], plan["new_revision"]) == (4, 6)
    # a release left between two deployed revisions (a mapping cut short): the newest decides, both are superseded
    twice = [release_secret(OLD_PDB, revision=4), release_secret(OLD_PDB, revision=5)]
    (plan,) = plan_mappings(twice, V136, "now")
    assert plan["revision"] == 5 and [o["name"][-2:] for o in plan["supersede"]] == ["v4", "v5"]
    busy = scan_helm_secrets([release_secret(CLEAN, revision=2), release_secret(CLEAN, revision=3,
                                                                               status="pending-upgrade")], V136)
    assert [f["severity"] for f in busy] == ["block"] and "latest revision 3 is pending-upgrade" in busy[0]["message"]


def test_what_cannot_be_mapped_is_refused_naming_it():
    assert plan_mappings([release_secret(OLD_PDB)], parse_version("v1.24.9"), "now") == []  # served until 1.25
    psp = "apiVersion: policy/v1beta1\nkind: PodSecurityPolicy\nmetadata:\n  name: restricted\n"
    with pytest.raises(InputError, match="PodSecurityPolicy restricted uses policy/v1beta1, removed in v1.25, with "
                                         "no API to map it to"):
        plan_mappings([release_secret(psp)], V136, "now")
    old_psp = "apiVersion: extensions/v1beta1\nkind: PodSecurityPolicy\nmetadata:\n  name: old\n"
    with pytest.raises(InputError, match="whose replacement policy/v1beta1 is removed by 1.36 too"):
        plan_mappings([release_secret(old_psp)], V136, "now")
    flow = "{apiVersion: policy/v1beta1, kind: PodDisruptionBudget, metadata: {name: x}}\n"
    with pytest.raises(InputError, match="not a plain top-level 'apiVersion: policy/v1beta1'"):
        plan_mappings([release_secret(flow)], V136, "now")
    listed = ("apiVersion: v1\nkind: List\nitems:\n- apiVersion: policy/v1beta1\n  kind: PodDisruptionBudget\n"
              "  metadata: {name: y}\n")
    with pytest.raises(InputError, match="PodDisruptionBudget y uses policy/v1beta1 inside a list document"):
        plan_mappings([release_secret(listed)], V136, "now")
    unlabelled = release_secret(OLD_PDB)
    del unlabelled["metadata"]["labels"]["version"]
    with pytest.raises(ParseError, match="not labelled as Helm labels its release Secrets"):
        plan_mappings([unlabelled], V136, "now")


def test_only_the_revision_helm_upgrades_from_blocks():
    old, new = release_secret(OLD_PDB, revision=3, status="superseded"), release_secret(CLEAN, revision=4)
    findings = scan_helm_secrets([old, new], V136)
    assert [f["severity"] for f in findings] == ["warn"]
    assert "revision 3 is not the one Helm upgrades from (4): only a rollback to it would fail" in findings[0][
        "message"]
    (alone,) = scan_helm_secrets([release_secret(OLD_PDB)], V136)
    assert alone["severity"] == "block" and "playbooks/helm_mapkubeapis.yml" in alone["message"]
