from __future__ import annotations

import base64
import gzip
import json

import pytest

from ansible_collections.gpufleet.upgrade.plugins.module_utils.data_removed_apis import REMOVED
from ansible_collections.gpufleet.upgrade.plugins.module_utils.errors import InputError, ParseError
from ansible_collections.gpufleet.upgrade.plugins.module_utils.removed_apis import (
    decode_helm_release, scan_helm_secrets, scan_manifest_text, scan_metrics, scan_paths, summarize_findings,
    target_version)
from tests.conftest import FIXTURES, fixture_text

V134 = target_version("v1.34.2")


def test_metrics_findings_and_blocking():
    findings = scan_metrics(fixture_text("metrics", "apiserver-cp-1.prom"), V134, "cp-1")
    by_api = {f["api_version"]: f for f in findings}
    assert set(by_api) == {"flowcontrol.apiserver.k8s.io/v1beta3", "resource.k8s.io/v1beta1"}  # storage one: no removal
    flow = by_api["flowcontrol.apiserver.k8s.io/v1beta3"]
    assert flow["blocks_target"] and flow["kind"] == "FlowSchema" and flow["source"] == "metrics:cp-1"
    assert flow["replacement"] == "flowcontrol.apiserver.k8s.io/v1"
    dra = by_api["resource.k8s.io/v1beta1"]
    assert not dra["blocks_target"] and dra["object"] == "requests to resourceclaims/status"
    assert dra["blocks_target"] is False
    assert scan_metrics(fixture_text("metrics", "apiserver-cp-1.prom"), target_version("v1.36.0"))[1]["blocks_target"]


def test_clean_metrics():
    assert scan_metrics(fixture_text("metrics", "apiserver-clean.prom"), V134) == []


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


def test_helm_secret_without_release_data():
    with pytest.raises(ParseError, match="monitoring/broken: no data.release"):
        scan_helm_secrets([{"type": "helm.sh/release.v1", "metadata": {"name": "broken", "namespace": "monitoring"},
                            "data": {}}], V134)


def test_every_table_row_is_consistent():
    for api_version, kind, resource, removed_in, replacement in REMOVED:
        assert "/" in api_version and kind[0].isupper() and resource == resource.lower()
        assert target_version(removed_in + ".0").major == 1 and replacement


def test_list_and_plain_docs():
    text = "apiVersion: batch/v1beta1\nkind: CronJob\nmetadata: {name: nightly, namespace: ops}\n---\n---\n"
    (finding,) = scan_manifest_text(text, V134, "x.yaml")
    assert finding["object"] == "CronJob ops/nightly" and finding["replacement"] == "batch/v1"


def test_target_required():
    with pytest.raises(InputError, match="target_version: required"):
        target_version("")
