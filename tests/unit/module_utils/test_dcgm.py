from __future__ import annotations

import json

import pytest

from ansible_collections.gpufleet.upgrade.plugins.module_utils.dcgm import judge_diag, parse_diag
from ansible_collections.gpufleet.upgrade.plugins.module_utils.errors import ParseError
from tests.conftest import fixture_text, pool_baseline

POLICY = pool_baseline(dcgm={"required_tests": ["software", "memory", "pcie"], "allowed_skip": ["nvlink"],
                             "warnings_fail": False})


PASS, FAIL, SKIP, WARNING = ("synthetic-4.2.3-%s.json" % n for n in ("r1-pass", "r1-fail", "r1-skip", "r2-warning"))
REAL_GB10 = "real-4.2.3-gb10-r1.json"


def policy(**dcgm):
    return dict(POLICY, dcgm=dict(POLICY["dcgm"], **dcgm))


def load(name, **kw):
    return parse_diag(fixture_text("dcgm", name), **kw)


def test_pass_dcgm4():
    diag = load(PASS)
    assert diag["format"] == "dcgm4" and diag["version"] == "4.2.3" and diag["driver_version"] == "570.172.08"
    assert len(diag["gpus"]) == 8 and len(diag["results"]) == 3 * 8
    summary = judge_diag(diag, POLICY, "gpu-a1")
    assert summary["passed"] and summary["failures"] == [] and summary["tests"] == ["memory", "pcie", "software"]


def test_warning_reported_as_fail_is_a_warning_by_severity():
    diag = load(WARNING)
    pcie3 = next(r for r in diag["results"] if r["test"] == "pcie" and r["gpu"] == "3")
    assert pcie3["status"] == "Fail" and pcie3["outcome"] == "warn"
    summary = judge_diag(diag, POLICY, "gpu-a1")
    assert summary["passed"]
    assert summary["warnings"] == ["gpu-a1 gpu 3 pcie: check dcgm_test: measured Warn, baseline Pass (GPU 3: PCIe "
                                   "replay counter 102 exceeded threshold 80 (monitor))"]
    strict = judge_diag(diag, policy(warnings_fail=True), "gpu-a1")
    assert not strict["passed"]
    # with a stricter severity cut-off the same result is a failure
    assert next(r for r in load(WARNING, warning_max_severity=0)["results"]
                if r["test"] == "pcie" and r["gpu"] == "3")["outcome"] == "fail"


def test_real_failure_names_gpu_test_and_text():
    summary = judge_diag(load(FAIL), POLICY, "gpu-a1")
    assert not summary["passed"]
    assert summary["failures"] == ["gpu-a1 gpu 5 memory: check dcgm_test: measured Fail, baseline Pass (GPU 5: Memory "
                                   "test failed: DBE detected (isolate))"]


def test_skip_allowed_or_not():
    diag = load(SKIP)
    assert judge_diag(diag, POLICY)["passed"]
    summary = judge_diag(diag, policy(allowed_skip=[]), "n")
    assert not summary["passed"] and "nvlink" in summary["failures"][0]


def test_required_test_missing():
    summary = judge_diag(load(PASS), policy(required_tests=["software", "targeted_stress"]), "n")
    assert summary["failures"] == ["n targeted_stress: check dcgm_test_present: measured False, baseline True "
                                   "(required test missing from the report (or skipped); run a higher -r level?)"]


def test_required_test_skipped_fails_even_if_allowed():
    summary = judge_diag(load(SKIP), policy(required_tests=["nvlink"], allowed_skip=[]), "n")
    assert not summary["passed"]


def test_runtime_error():
    diag = load("synthetic-4.2.3-runtime-error.json")
    assert diag["runtime_error"].startswith("Unable to connect")
    summary = judge_diag(diag, POLICY, "gpu-a1")
    assert not summary["passed"] and "nv-hostengine" in summary["failures"][0]


def test_dcgm3_format_reads_the_identity_beside_the_results():
    diag = load("synthetic-3.3.7-r2-fail.json")
    assert (diag["format"], diag["version"], diag["driver_version"]) == ("dcgm3", "3.3.7", "535.183.01")
    assert diag["gpus"][:2] == [{"id": "0", "serial": "165422000000", "device_id": "2330"},
                                {"id": "1", "serial": "165422000001", "device_id": "2330"}]
    assert len(diag["gpus"]) == 8
    # a Deployment (level-one) test names no GPU unless it failed on one, and then carries its text under "warnings"
    assert [r["gpu"] for r in diag["results"] if r["test"] == "Denylist"] == ["all"]
    summary = judge_diag(diag, policy(required_tests=["PCIe"], allowed_skip=[]), "old-node")
    assert summary["failures"] == [
        "old-node: check dcgm_driver_version: measured 535.183.01, baseline 570.172.08 (the driver DCGM ran on "
        "('Driver Version Detected'))",
        "old-node gpu 1 Persistence Mode: check dcgm_test: measured Fail, baseline Pass (Persistence mode for GPU 1 "
        "is currently disabled. NVVS requires persistence mode to be enabled. Enable persistence mode by running (as "
        "root): nvidia-smi -i 1 -pm 1)",
        "old-node gpu 2 PCIe: check dcgm_test: measured Fail, baseline Pass (GPU 2: Error detected, PCIe bandwidth "
        "below threshold)"]


def test_real_dcgm4_report_fills_version_driver_and_gpus():
    """The report dcgmi 4.2.3 printed on a GB10 (tests/fixtures/dcgm/README.md): version, driver and GPU list sit
    beside "DCGM Diagnostic", not in it."""
    diag = load(REAL_GB10)
    assert (diag["format"], diag["version"], diag["driver_version"]) == ("dcgm4", "4.2.3", "580.82.09")
    assert diag["gpus"] == [{"id": "0", "serial": "<<<NOT_SUPPORTED>>>", "device_id": "2e12"}]
    assert diag["results"] == [{
        "category": "Deployment", "test": "software", "gpu": "0", "status": "Fail", "outcome": "fail",
        "warnings": [{"text": 'Persistence Mode: Persistence mode for GPU 0 is disabled. Enable persistence mode by '
                              'running "nvidia-smi -i <gpuId> -pm 1 " as root.', "error_id": "29", "severity": 5}]}]


def test_real_dcgm4_report_is_judged_on_its_driver_and_gpus():
    gb10 = pool_baseline(gpu={"count": 1, "driver_version": "580.82.09"},
                         dcgm={"required_tests": ["software"], "allowed_skip": []})
    summary = judge_diag(load(REAL_GB10), gb10, "spark-1")
    assert summary["failures"] == [
        "spark-1 gpu 0 software: check dcgm_test: measured Fail, baseline Pass (Persistence Mode: Persistence mode "
        'for GPU 0 is disabled. Enable persistence mode by running "nvidia-smi -i <gpuId> -pm 1 " as root.)']
    assert [c["measured"] for c in summary["checks"] if c["name"] in ("dcgm_driver_version", "dcgm_gpu_count")] == [
        "580.82.09", 1]
    other_driver = judge_diag(load(REAL_GB10), dict(gb10, gpu=dict(gb10["gpu"], driver_version="570.172.08")), "s")
    assert other_driver["failures"][0] == ("s: check dcgm_driver_version: measured 580.82.09, baseline 570.172.08 "
                                           "(the driver DCGM ran on ('Driver Version Detected'))")


def v4(**top):
    """A DCGM 4.x document as dcgmi prints it, from the synthetic pass report, with top-level keys replaced."""
    doc = json.loads(fixture_text("dcgm", PASS))
    doc.update(top)
    return {k: v for k, v in doc.items() if v is not None}


def test_a_report_without_a_driver_fails():
    doc = v4(metadata={"version": "4.2.3"})  # dcgmi leaves the key out when it read no driver
    summary = judge_diag(parse_diag(json.dumps(doc)), POLICY, "n")
    assert summary["failures"] == ["n: check dcgm_driver_version: measured not reported, baseline 570.172.08 (the "
                                   "report does not say which driver it ran on)"]


def test_a_report_listing_no_gpu_fails():
    summary = judge_diag(parse_diag(json.dumps(v4(entity_groups=None))), POLICY, "n")
    assert summary["failures"] == ["n: check dcgm_gpu_count: measured 0, baseline 8 (the report lists no GPU "
                                   "('entity_groups' / 'GPU Device IDs'): it does not say what it ran on)"]


def test_a_failing_test_summary_is_not_lost():
    doc = json.loads(fixture_text("dcgm", PASS))
    tests = doc["DCGM Diagnostic"]["test_categories"][0]["tests"]
    tests[0]["test_summary"] = {"status": "Fail"}  # every result passed, the summary did not
    summary = judge_diag(parse_diag(json.dumps(doc)), POLICY, "n")
    assert summary["failures"] == ["n gpu all software: check dcgm_test: measured Fail, baseline Pass (test_summary "
                                   "says Fail but no result of the test does)"]
    # errors that name no entity are printed in the summary only
    tests[0]["test_summary"] = {"status": "Fail", "warnings": [
        {"warning": "Fabric manager not running", "error_id": 63, "error_category": 8, "error_severity": 5}]}
    summary = judge_diag(parse_diag(json.dumps(doc)), POLICY, "n")
    assert summary["failures"] == ["n gpu all software: check dcgm_test: measured Fail, baseline Pass (Fabric "
                                   "manager not running)"]


@pytest.mark.parametrize("doc,message", [
    # the layout this parser used to expect: identity nested inside "DCGM Diagnostic"; dcgmi never prints it
    ({"DCGM Diagnostic": {"test_categories": [], "entity_groups": [],
                          "metadata": {"version": "4.2.3", "Driver Version Detected": "570.172.08"}}},
     "'DCGM Diagnostic' without a 'metadata' object beside it"),
    (v4(metadata={"Driver Version Detected": "570.172.08"}), "no DCGM version at metadata.version"),
    (v4(metadata={"version": "5.0.1"}), "the DCGM 4.x layout reports version '5.0.1'"),
    (v4(errors=[]), "'DCGM Diagnostic' with unknown key\\(s\\) beside it: errors"),
    ({"DCGM GPU Diagnostic": {"test_categories": [], "version": "3.3.7"}}, "no DCGM version at version"),
    ({"DCGM GPU Diagnostic": {"test_categories": []}, "version": "4.2.3"}, "the DCGM 3.x layout reports version"),
])
def test_an_unknown_layout_names_the_tool_the_layouts_and_the_keys(doc, message):
    with pytest.raises(ParseError, match=message) as err:
        parse_diag(json.dumps(doc))
    assert err.value.msg.startswith("dcgmi diag: ")
    assert "understood: DCGM 4.x ('DCGM Diagnostic' with 'metadata' and 'entity_groups' beside it) and DCGM 3.x" in \
        err.value.msg
    assert err.value.msg.endswith("top-level keys found: " + ", ".join(repr(k) for k in sorted(doc)))


def test_runtime_error_dcgm3():
    diag = parse_diag(json.dumps({"DCGM GPU Diagnostic": {"version": "3.3.7", "runtime_error": "Error: Diagnostic "
                                                          "could not be run while DCGM is paused."}}))
    assert (diag["format"], diag["version"], diag["gpus"]) == ("dcgm3", "3.3.7", [])
    assert not judge_diag(diag, POLICY, "n")["passed"]


def test_wrong_gpu_count():
    summary = judge_diag(load(PASS), dict(POLICY, gpu=dict(POLICY["gpu"], count=4)), "n")
    assert summary["failures"] == [
        "n: check dcgm_gpu_count: measured 8, baseline 4 (GPUs the report lists)",
        "n: check dcgm_gpu_coverage: measured 8 GPU(s): 0,1,2,3,4,5,6,7, baseline 4 GPU(s), from gpu.count (GPUs "
        "named by per-GPU results)"]


def test_a_report_with_no_tests_fails():
    doc = v4(**{"DCGM Diagnostic": {"test_categories": []}})
    summary = judge_diag(parse_diag(json.dumps(doc)), POLICY, "n")
    assert not summary["passed"]
    assert summary["failures"][0] == ("n: check dcgm_results: measured 0, baseline at least one test result (the "
                                      "report holds no test results: nothing was diagnosed)")


def test_a_report_covering_gpu_0_only_fails():
    doc = json.loads(fixture_text("dcgm", PASS))
    for category in doc["DCGM Diagnostic"]["test_categories"]:
        for test in category["tests"]:
            test["results"] = [r for r in test["results"] if r.get("entity_id") == 0]
    summary = judge_diag(parse_diag(json.dumps(doc)), POLICY, "n")
    assert summary["failures"] == ["n: check dcgm_gpu_coverage: measured 1 GPU(s): 0, baseline 8 GPU(s), from "
                                   "gpu.count (GPUs named by per-GPU results)"]


def test_a_report_naming_no_gpu_fails():
    doc = json.loads(fixture_text("dcgm", PASS))
    for category in doc["DCGM Diagnostic"]["test_categories"]:
        for test in category["tests"]:
            test["results"] = [{"status": "Pass"}]
    failures = judge_diag(parse_diag(json.dumps(doc)), POLICY, "n")["failures"]
    assert failures == ["n: check dcgm_gpu_coverage: measured 0 GPU(s), baseline 8 GPU(s), from gpu.count (no "
                        "result names a GPU: the report does not say what it diagnosed)"]


@pytest.mark.parametrize("text,message", [
    ("", "empty"),
    ("Error: unable to establish a connection to the specified host: localhost",
     "not JSON; it starts with 'Error: unable to establish"),
    ('{"something": 1}', "neither 'DCGM Diagnostic' nor 'DCGM GPU Diagnostic' at the top level \\(was -j given\\?\\); "
                         "understood: DCGM 4.x .* top-level keys found: 'something'"),
    ('{"DCGM Diagnostic": {"test_categories": [{"category": "x"}]}, "metadata": {"version": "4.2.3"}}',
     "has no tests list"),
    ('{"DCGM Diagnostic": {"test_categories": [{"category": "x", "tests": [{"name": "t", "results": '
     '[{"entity_id": 0, "status": "Maybe"}]}]}]}, "metadata": {"version": "4.2.3"}}', "status 'Maybe'"),
    ('{"DCGM Diagnostic": {"test_categories": [{"category": "x", "tests": [{"name": "t", "results": [], '
     '"test_summary": {"result": "Pass"}}]}]}, "metadata": {"version": "4.2.3"}}',
     "x/t test_summary has no status among Pass, Skip, Fail, Warn"),
])
def test_malformed(text, message):
    with pytest.raises(ParseError, match=message):
        parse_diag(text)


def test_truncated():
    with pytest.raises(ParseError, match="not valid JSON"):
        load("synthetic-4.2.3-truncated.json")
