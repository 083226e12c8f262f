from __future__ import annotations

import datetime

import pytest
import yaml

from ansible_collections.gpufleet.upgrade.plugins.module_utils.baseline import (
    fatal_xids, load_file, opt_outs, validate)
from ansible_collections.gpufleet.upgrade.plugins.module_utils.data_xids import FATAL_XIDS
from ansible_collections.gpufleet.upgrade.plugins.module_utils.errors import BaselineError, InputError
from ansible_collections.gpufleet.upgrade.plugins.module_utils.support_calendar import support_status
from tests.conftest import FIXTURES

GOOD = FIXTURES / "baselines" / "h100-train.yml"


def test_good_baseline_fills_defaults():
    doc = load_file(str(GOOD))
    assert doc["gpu"]["count"] == 8 and sorted(fatal_xids(doc)) == sorted(FATAL_XIDS)
    assert {48, 63, 64, 74, 79, 94, 95, 119, 120, 149, 154}.issubset(fatal_xids(doc)) and 13 not in fatal_xids(doc)
    assert doc["gpu"]["benign_xids"] == {}
    assert doc["nccl"]["tolerance_pct"] == 10.0 and isinstance(doc["nccl"]["tolerance_pct"], float)
    assert doc["node"]["allocatable_gpus"] == 8  # defaults to gpu.count
    assert doc["dcgm"]["warning_max_severity"] == 1 and doc["dcgm"]["canary_level"] == 3
    assert doc["opt_out"] == {"xids": {}} and opt_outs(doc) == []
    assert validate(doc, "again") == doc  # validating a validated baseline changes nothing


def mutate(path_keys, value, delete=False):
    doc = yaml.safe_load(GOOD.read_text())
    cursor = doc
    for key in path_keys[:-1]:
        cursor = cursor[key]
    if delete:
        del cursor[path_keys[-1]]
    else:
        cursor[path_keys[-1]] = value
    return doc


@pytest.mark.parametrize("keys,value,delete,message", [
    (["gpu", "count"], None, True, "pool.yml: field gpu.count is missing: expected an integer"),
    (["gpu", "count"], "eight", False, "pool.yml: field gpu.count: expected an integer, got str ('eight')"),
    (["gpu", "count"], True, False, "field gpu.count: expected an integer, got bool"),
    (["nccl", "tolerance_pct"], "ten", False, "field nccl.tolerance_pct: expected a number, got str"),
    (["nccl", "busbw_gbps"], {"8G": "fast"}, False, "field nccl.busbw_gbps: expected a mapping of size: GB/s"),
    (["dcgm", "required_tests"], "memory", False, "field dcgm.required_tests: expected a list of strings"),
    (["gpu", "drivr_version"], "1", False, "field gpu.drivr_version is not a baseline field"),
    (["gpu"], None, True, "field gpu is missing: expected a section"),
    (["nccl"], None, True, "field nccl is missing: expected a section"),
    (["dcgm"], None, True, "field dcgm is missing: expected a section"),
    # values that would switch a gate off are out of bounds, each with the reason
    (["gpu", "count"], 0, False, "field gpu.count: 0 is out of bounds, expected from 1 to 64: GPUs per node: 0 "
                                 "would switch every GPU gate off"),
    (["nccl", "tolerance_pct"], 100, False, "field nccl.tolerance_pct: 100 is out of bounds, expected from 0 to 50: "
                                            "above 50% a halved bus bandwidth would pass"),
    (["nccl", "min_runs"], 0, False, "field nccl.min_runs: 0 is out of bounds, expected from 1 to 20"),
    (["dcgm", "warning_max_severity"], 6, False, "field dcgm.warning_max_severity: 6 is out of bounds, expected "
                                                  "from 0 to 1: severity 2 and above"),
    (["dcgm", "required_tests"], [], False, "field dcgm.required_tests: needs at least 1 item(s)"),
    (["nccl", "busbw_gbps"], {"8G": float("inf")}, False, "field nccl.busbw_gbps: expected a mapping of size: GB/s"),
    (["nccl", "busbw_gbps"], {"8G": 0}, False, "field nccl.busbw_gbps.8G: 0 is out of bounds"),
    (["nccl", "busbw_gbps"], {"huge": 1.0}, False, "field nccl.busbw_gbps.huge: 'huge' is not a size"),
    (["nccl", "args"], ["-b", "8", "-c", "0"], False, "field nccl.args: -b 8 -c 0 turns data checking off"),
    (["gpu", "driver_version"], "latest", False, "field gpu.driver_version: 'latest' is not valid"),
    (["gpu", "fatal_xids"], [], False, "field gpu.fatal_xids is not a baseline field; the fatal XID list is "
                                       "NVIDIA's catalogue"),
    (["gpu", "persistence_mode"], False, False, "persistence mode is always required; to skip the check set "
                                                "opt_out.persistence_mode"),
    (["etcd"], {"max_quota_ratio": 0.6}, False, "field etcd is not a baseline field; etcd thresholds are per cell"),
    (["opt_out"], {"ecc": "no"}, False, "field opt_out.ecc: 'no' is too short (at least 10 characters)"),
    (["opt_out"], {"xids": {13: "application faults are not in the list anyway"}}, False,
     "field opt_out.xids.13 is not on the default fatal list: NVIDIA's catalogue gives XID 13 the action RESTART_APP, "
     "so it does not fail the gate (nothing to opt out of)"),
    (["opt_out"], {"xids": {173: "a new code the driver logs at every boot here"}}, False,
     "field opt_out.xids.173 is not on the default fatal list: XID 173 is not in NVIDIA's catalogue; an XID the pool "
     "knows to be harmless goes in gpu.benign_xids with the reason"),
    (["gpu", "benign_xids"], {79: "we do not care about this one at all"}, False,
     "field gpu.benign_xids.79: XID 79 is in NVIDIA's catalogue (GPU has fallen off the bus, action RESTART_BM); "
     "gpu.benign_xids is for XIDs the catalogue does not know; take a fatal one out with opt_out.xids: {XID: "
     "reason}"),
    (["gpu", "benign_xids"], {13: "application faults are harmless here"}, False,
     "field gpu.benign_xids.13: XID 13 is in NVIDIA's catalogue (Graphics Engine Exception, action RESTART_APP); "
     "gpu.benign_xids is for XIDs the catalogue does not know; this one does not fail the gate"),
    (["gpu", "benign_xids"], {173: "ok"}, False, "field gpu.benign_xids.173: the reason 'ok' is too short"),
    (["gpu", "benign_xids"], {"x1": "a reason that is long enough"}, False,
     "field gpu.benign_xids.x1 is not an XID: XIDs are numbers from 1 to 9999"),
    (["gpu", "benign_xids"], [173], False, "field gpu.benign_xids: expected a mapping of key: reason, got list"),
    (["dcgm", "allowed_skip"], ["memory"], False, "field dcgm.allowed_skip: memory is also a required test"),
    (["name"], None, True, "field name is missing: expected a string"),
])
def test_baseline_errors_name_file_field_and_type(keys, value, delete, message):
    with pytest.raises(BaselineError) as err:
        validate(mutate(keys, value, delete), "pool.yml")
    assert message in err.value.msg


def test_missing_and_invalid_files(tmp_path):
    with pytest.raises(BaselineError, match="baseline file not found"):
        load_file(str(tmp_path / "nope.yml"))
    bad = tmp_path / "bad.yml"
    bad.write_text("gpu: [\n")
    with pytest.raises(BaselineError, match="bad.yml: not valid YAML"):
        load_file(str(bad))
    empty = tmp_path / "empty.yml"
    empty.write_text("")
    with pytest.raises(BaselineError, match="empty.yml: the document must be a mapping"):
        load_file(str(empty))


def test_opt_outs_are_named_with_reasons_and_nccl_may_then_be_left_out():
    doc = mutate(["opt_out"], {"nccl": "single-GPU inference nodes: no collective",
                               "xids": {74: "PCIe-only nodes: no NVLink on this pool"}})
    del doc["nccl"]
    out = validate(doc, "pool.yml")
    assert opt_outs(out) == [{"check": "nccl", "reason": "single-GPU inference nodes: no collective"},
                             {"check": "xid 74", "reason": "PCIe-only nodes: no NVLink on this pool"}]
    assert 74 not in fatal_xids(out) and 79 in fatal_xids(out)


def test_extra_fatal_xids_are_added():
    assert 92 in fatal_xids(validate(mutate(["gpu", "fatal_xids_extra"], [92]), "pool.yml"))


def test_benign_xids_are_recorded_like_opt_outs_and_validate_twice():
    doc = validate(mutate(["gpu", "benign_xids"], {173: "driver 590 logs it at every boot on these boards"}), "p.yml")
    assert doc["gpu"]["benign_xids"] == {"173": "driver 590 logs it at every boot on these boards"}
    assert opt_outs(doc) == [{"check": "xid 173 (benign, not in NVIDIA's catalogue)",
                              "reason": "driver 590 logs it at every boot on these boards"}]
    assert validate(doc, "again") == doc
    both = mutate(["gpu", "benign_xids"], {173: "driver 590 logs it at every boot on these boards"})
    both["gpu"]["fatal_xids_extra"] = [173]
    with pytest.raises(BaselineError, match="field gpu.benign_xids.173: XID 173 is also in gpu.fatal_xids_extra"):
        validate(both, "p.yml")


@pytest.mark.parametrize("text,message", [
    ("a: &a [x,x,x,x,x,x,x,x,x,x]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b,*b]\n"
     "d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c,*c]\ne: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d,*d]\n"
     "f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e,*e]\nname: [*f,*f,*f,*f,*f,*f,*f,*f,*f,*f]\n", "alias bomb"),
    ("name: " + "[" * 200 + "]" * 200 + "\n", "nests deeper than 64 levels"),
    ("name: &x [*x]\n", "recursive document"),
])
def test_hostile_yaml_is_refused(tmp_path, text, message):
    path = tmp_path / "pool.yml"
    path.write_text(text)
    with pytest.raises(BaselineError, match=message):
        load_file(str(path))


def test_non_regular_files_are_refused(tmp_path):
    import os
    os.mkfifo(tmp_path / "fifo.yml")
    (tmp_path / "zero.yml").symlink_to("/dev/zero")
    (tmp_path / "loop.yml").symlink_to(tmp_path / "loop.yml")
    (tmp_path / "dangling.yml").symlink_to(tmp_path / "gone.yml")
    for name, message in (("fifo.yml", "is a FIFO, not a regular file"), ("zero.yml", "is a device"),
                          ("loop.yml", "is a symlink loop"), ("dangling.yml", "baseline file not found")):
        with pytest.raises(BaselineError, match=message):
            load_file(str(tmp_path / name))


@pytest.mark.parametrize("version,today,status,days", [
    ("v1.34.2", "2026-11-30", "out-of-support", -34),
    ("v1.35.0", "2026-11-30", "supported", 90),
    ("v1.35.0", "2026-12-30", "last-60-days", 60),
    ("v1.35.0", "2027-02-28", "last-60-days", 0),
    ("1.36", "2026-11-30", "supported", 210),
    ("v1.40.0", "2026-11-30", "unknown", None),
])
def test_support_status(version, today, status, days):
    out = support_status(version, datetime.date.fromisoformat(today))
    assert out["status"] == status and out["days_to_eol"] == days
    assert "kubernetes.io/releases" in out["source"]


def test_support_status_bad_date():
    with pytest.raises(InputError, match="today"):
        support_status("v1.34.0", "2026-11-30")  # type: ignore[arg-type]


# -- whole values only (issue 33): `$` matched before a trailing newline, isdigit() took Unicode digits ------------
@pytest.mark.parametrize("keys, value, message", [
    (["name"], "h100-train\n", "field name: 'h100-train\\n' is not valid"),
    (["gpu", "driver_version"], "570.172.08\n", "field gpu.driver_version: '570.172.08\\n' is not valid"),
    (["opt_out"], {"xids": {"\u0667\u0669": "the Arabic-Indic 79: isdigit() and int() took it"}},
     "field opt_out.xids.\u0667\u0669 is not an XID"),
    (["gpu", "benign_xids"], {"\u0661\u0667\u0663": "the Arabic-Indic 173: isdigit() and int() take it"},
     "field gpu.benign_xids.\u0661\u0667\u0663 is not an XID"),
])
def test_a_baseline_value_with_a_trailing_newline_or_unicode_digits_is_refused(keys, value, message):
    with pytest.raises(BaselineError) as err:
        validate(mutate(keys, value, False), "pool.yml")
    assert message in err.value.msg
