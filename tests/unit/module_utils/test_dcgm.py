from __future__ import annotations

import json

import pytest

from ansible_collections.gpufleet.upgrade.plugins.module_utils.dcgm import judge_diag, parse_diag
from ansible_collections.gpufleet.upgrade.plugins.module_utils.errors import ParseError
from tests.conftest import fixture_text, pool_baseline

POLICY = pool_baseline(dcgm={"required_tests": ["software", "memory", "pcie"], "allowed_skip": ["nvlink"],
                             "warnings_fail": False})


def policy(**dcgm):
    return dict(POLICY, dcgm=dict(POLICY["dcgm"], **dcgm))


def load(name, **kw):
    return parse_diag(fixture_text("dcgm", name), **kw)


def test_pass_dcgm4():
    diag = load("diag-r1-pass.json")
    assert diag["format"] == "dcgm4" and diag["version"] == "4.2.3" and diag["driver_version"] == "570.172.08"
    assert len(diag["gpus"]) == 8 and len(diag["results"]) == 3 * 8
    summary = judge_diag(diag, POLICY, "gpu-a1")
    assert summary["passed"] and summary["failures"] == [] and summary["tests"] == ["memory", "pcie", "software"]


def test_warning_reported_as_fail_is_a_warning_by_severity():
    diag = load("diag-r2-warning.json")
    pcie3 = next(r for r in diag["results"] if r["test"] == "pcie" and r["gpu"] == "3")
    assert pcie3["status"] == "Fail" and pcie3["outcome"] == "warn"
    summary = judge_diag(diag, POLICY, "gpu-a1")
    assert summary["passed"]
    assert summary["warnings"] == ["gpu-a1 gpu 3 pcie: check dcgm_test: measured Warn, baseline Pass (GPU 3: PCIe "
                                   "replay counter 102 exceeded threshold 80 (monitor))"]
    strict = judge_diag(diag, policy(warnings_fail=True), "gpu-a1")
    assert not strict["passed"]
    # with a stricter severity cut-off the same result is a failure
    assert next(r for r in load("diag-r2-warning.json", warning_max_severity=0)["results"]
                if r["test"] == "pcie" and r["gpu"] == "3")["outcome"] == "fail"


def test_real_failure_names_gpu_test_and_text():
    summary = judge_diag(load("diag-r1-fail.json"), POLICY, "gpu-a1")
    assert not summary["passed"]
    assert summary["failures"] == ["gpu-a1 gpu 5 memory: check dcgm_test: measured Fail, baseline Pass (GPU 5: Memory "
                                   "test failed: DBE detected (isolate))"]


def test_skip_allowed_or_not():
    diag = load("diag-r1-skip.json")
    assert judge_diag(diag, POLICY)["passed"]
    summary = judge_diag(diag, policy(allowed_skip=[]), "n")
    assert not summary["passed"] and "nvlink" in summary["failures"][0]


def test_required_test_missing():
    summary = judge_diag(load("diag-r1-pass.json"), policy(required_tests=["software", "targeted_stress"]), "n")
    assert summary["failures"] == ["n targeted_stress: check dcgm_test_present: measured False, baseline True "
                                   "(required test missing from the report (or skipped); run a higher -r level?)"]


def test_required_test_skipped_fails_even_if_allowed():
    summary = judge_diag(load("diag-r1-skip.json"), policy(required_tests=["nvlink"], allowed_skip=[]), "n")
    assert not summary["passed"]


def test_runtime_error():
    diag = load("diag-runtime-error.json")
    assert diag["runtime_error"].startswith("Unable to connect")
    summary = judge_diag(diag, POLICY, "gpu-a1")
    assert not summary["passed"] and "nv-hostengine" in summary["failures"][0]


def test_dcgm3_format():
    diag = load("diag-dcgm3-fail.json")
    assert diag["format"] == "dcgm3" and diag["version"] == "3.3.7" and len(diag["gpus"]) == 8
    deny = [r for r in diag["results"] if r["test"] == "Denylist"]
    assert [r["gpu"] for r in deny] == [str(i) for i in range(8)]
    summary = judge_diag(diag, policy(required_tests=["PCIe"], allowed_skip=[]), "old-node")
    assert summary["failures"] == ["old-node gpu 2 PCIe: check dcgm_test: measured Fail, baseline Pass (GPU 2: Error "
                                   "detected, PCIe bandwidth below threshold)"]


def test_wrong_gpu_count():
    summary = judge_diag(load("diag-r1-pass.json"), dict(POLICY, gpu=dict(POLICY["gpu"], count=4)), "n")
    assert summary["failures"] == [
        "n: check dcgm_gpu_count: measured 8, baseline 4 (GPUs the report lists)",
        "n: check dcgm_gpu_coverage: measured 8 GPU(s): 0,1,2,3,4,5,6,7, baseline 4 GPU(s), from gpu.count (GPUs "
        "named by per-GPU results)"]


def test_a_report_with_no_tests_fails():
    doc = {"DCGM Diagnostic": {"test_categories": [], "entity_groups": []}}
    summary = judge_diag(parse_diag(json.dumps(doc)), POLICY, "n")
    assert not summary["passed"]
    assert summary["failures"][0] == ("n: check dcgm_results: measured 0, baseline at least one test result (the "
                                      "report holds no test results: nothing was diagnosed)")


def test_a_report_covering_gpu_0_only_fails():
    doc = json.loads(fixture_text("dcgm", "diag-r1-pass.json"))
    for category in doc["DCGM Diagnostic"]["test_categories"]:
        for test in category["tests"]:
            test["results"] = [r for r in test["results"] if r.get("entity_id") == 0]
    doc["DCGM Diagnostic"].pop("entity_groups", None)
    summary = judge_diag(parse_diag(json.dumps(doc)), POLICY, "n")
    assert summary["failures"] == ["n: check dcgm_gpu_coverage: measured 1 GPU(s): 0, baseline 8 GPU(s), from "
                                   "gpu.count (GPUs named by per-GPU results)"]


def test_a_report_naming_no_gpu_fails():
    doc = json.loads(fixture_text("dcgm", "diag-r1-pass.json"))
    for category in doc["DCGM Diagnostic"]["test_categories"]:
        for test in category["tests"]:
            test["results"] = [{"status": "Pass"}]
    doc["DCGM Diagnostic"].pop("entity_groups", None)
    failures = judge_diag(parse_diag(json.dumps(doc)), POLICY, "n")["failures"]
    assert failures == ["n: check dcgm_gpu_coverage: measured 0 GPU(s), baseline 8 GPU(s), from gpu.count (no "
                        "result names a GPU: the report does not say what it diagnosed)"]


@pytest.mark.parametrize("text,message", [
    ("", "empty"),
    ("Error: unable to establish a connection to the specified host: localhost",
     "not JSON; it starts with 'Error: unable to establish"),
    ('{"something": 1}', "neither 'DCGM Diagnostic'"),
    ('{"DCGM Diagnostic": {"test_categories": [{"category": "x"}]}}', "has no tests list"),
    ('{"DCGM Diagnostic": {"test_categories": [{"category": "x", "tests": [{"name": "t", "results": '
     '[{"entity_id": 0, "status": "Maybe"}]}]}]}}', "status 'Maybe'"),
])
def test_malformed(text, message):
    with pytest.raises(ParseError, match=message):
        parse_diag(text)


def test_truncated():
    with pytest.raises(ParseError, match="not valid JSON"):
        load("diag-truncated.json")
