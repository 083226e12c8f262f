from __future__ import annotations

import datetime

import pytest
import yaml

from ansible_collections.gpufleet.upgrade.plugins.module_utils.baseline import load_file, validate
from ansible_collections.gpufleet.upgrade.plugins.module_utils.errors import BaselineError, InputError
from ansible_collections.gpufleet.upgrade.plugins.module_utils.support_calendar import support_status
from tests.conftest import FIXTURES

GOOD = FIXTURES / "baselines" / "h100-train.yml"


def test_good_baseline_fills_defaults():
    doc = load_file(str(GOOD))
    assert doc["gpu"]["count"] == 8 and doc["gpu"]["fatal_xids"] == [48, 63, 64, 74, 79, 94, 95]
    assert doc["nccl"]["tolerance_pct"] == 10.0 and isinstance(doc["nccl"]["tolerance_pct"], float)
    assert doc["node"]["allocatable_gpus"] == 8  # defaults to gpu.count
    assert doc["dcgm"]["warning_max_severity"] == 1


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
