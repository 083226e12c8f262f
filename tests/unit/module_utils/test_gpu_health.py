from __future__ import annotations

import pytest

from ansible_collections.gpufleet.upgrade.plugins.module_utils.errors import InputError, ParseError
from ansible_collections.gpufleet.upgrade.plugins.module_utils.gpu_health import (
    judge_health, parse_query_gpu, parse_remapped_rows, scan_xids)
from tests.conftest import fixture_text

POLICY = {"count": 8, "driver_version": "570.172.08", "persistence_mode": True}


def judge(gpu="query-gpu-8-ok.csv", remap="remapped-rows-ok.csv", log="kern-clean.log", policy=POLICY):
    return judge_health(parse_query_gpu(fixture_text("nvidia_smi", gpu)),
                        parse_remapped_rows(fixture_text("nvidia_smi", remap)),
                        scan_xids(fixture_text("nvidia_smi", log)), policy, "gpu-a1")


def test_healthy_node():
    summary = judge()
    assert summary["passed"] and summary["gpu_count"] == 8 and summary["xids"] == []


def test_parse_fields():
    gpus = parse_query_gpu(fixture_text("nvidia_smi", "query-gpu-8-ok.csv"))
    assert gpus[4]["pci.bus_id"] == "00000000:9A:00.0" and gpus[4]["name"] == "NVIDIA H100 80GB HBM3"
    assert gpus[0]["uuid"].startswith("GPU-")


def test_seven_of_eight():
    summary = judge(gpu="query-gpu-7-of-8.csv")
    assert summary["failures"][0].startswith("gpu-a1: check gpu_count: measured 7, baseline 8")


def test_old_driver():
    summary = judge(gpu="query-gpu-old-driver.csv")
    assert len(summary["failures"]) == 8
    assert summary["failures"][0] == "gpu-a1 gpu 0: check gpu_driver_version: measured 550.163.01, baseline 570.172.08"


def test_ecc_and_persistence():
    failures = judge(gpu="query-gpu-ecc-persist-off.csv")["failures"]
    assert "gpu-a1 gpu 4: check gpu_uncorrectable_ecc: measured 2, baseline 0" in failures
    assert sum("gpu_persistence_mode" in f for f in failures) == 8


def test_na_values_are_none_not_errors():
    gpus = parse_query_gpu(fixture_text("nvidia_smi", "query-gpu-na.csv"))
    assert gpus[0]["ecc.errors.uncorrected.volatile.total"] is None
    assert judge(gpu="query-gpu-na.csv")["passed"]


def test_pending_remap():
    failures = judge(remap="remapped-rows-pending.csv")["failures"]
    assert failures == ["gpu-a1 gpu 00000000:BA:00.0: check gpu_remap_pending: measured yes, baseline No "
                        "(reset the GPU to apply pending row remaps)"]


def test_xid79_fails_xid13_does_not():
    xids = scan_xids(fixture_text("nvidia_smi", "kern-xid79.log"))
    assert [(x["xid"], x["pci"]) for x in xids] == [(79, "PCI:0000:9a:00")]
    assert judge(log="kern-xid79.log")["failures"] == [
        "gpu-a1: check gpu_xid: measured XID 79 on PCI:0000:9a:00 (GPU has fallen off the bus), baseline no XID in "
        "[48, 63, 64, 74, 79, 94, 95]"]
    summary = judge(log="kern-xid13.log")
    assert summary["passed"] and summary["xids"][0]["xid"] == 13


def test_nvidia_smi_failure_is_a_parse_error():
    with pytest.raises(ParseError, match="couldn't communicate with the NVIDIA driver"):
        parse_query_gpu(fixture_text("nvidia_smi", "query-gpu-failed.txt"))


def test_field_count_mismatch():
    with pytest.raises(ParseError, match="line 1 has 7 values, expected 3"):
        parse_query_gpu(fixture_text("nvidia_smi", "query-gpu-8-ok.csv"), ("index", "uuid", "name"))


def test_header_line_is_skipped():
    text = "index, uuid, pci.bus_id, name, driver_version, persistence_mode, ecc.errors.uncorrected.volatile.total\n"
    assert len(parse_query_gpu(text + fixture_text("nvidia_smi", "query-gpu-8-ok.csv"))) == 8


def test_policy_needs_count():
    with pytest.raises(InputError, match="'count'"):
        judge_health([], [], [], {}, "n")
