from __future__ import annotations

import json

import pytest

from ansible_collections.gpufleet.upgrade.plugins.module_utils.errors import InputError, ParseError
from ansible_collections.gpufleet.upgrade.plugins.module_utils.nccl import (
    busbw_by_size, judge_runs, parse_output, parse_size)
from tests.conftest import fixture_text, pool_baseline

BASELINE = pool_baseline(nccl={"busbw_gbps": {"1G": 450.0, "8G": 470.0}, "tolerance_pct": 10, "min_runs": 3})
G = 1024 ** 3


def run(name):
    return parse_output(fixture_text("nccl", name))


def test_current_layout():
    parsed = run("allreduce-8gpu-run1.txt")
    assert parsed["format"] == "current" and parsed["ranks"] == 8 and parsed["hosts"] == ["gpu-a1"]
    assert len(parsed["rows"]) == 31 and parsed["rows"][0]["size"] == 8 and parsed["rows"][-1]["size"] == 8 * G
    last = parsed["rows"][-1]
    assert last["root"] == -1 and last["oop_busbw"] == 480.00 and last["ip_busbw"] == 475.20 and last["wrong"] == 0
    assert parsed["out_of_bounds"] == 0 and parsed["avg_busbw"] == pytest.approx(104.632)
    assert parsed["concluded"]


def test_legacy_layout():
    parsed = run("allreduce-legacy-2021.txt")
    assert parsed["format"] == "legacy"
    assert parsed["rows"][-1]["oop_busbw"] == 480.00 and parsed["rows"][-1]["root"] == -1
    assert parsed["rows"][-1]["wrong"] == 0


def test_json():
    parsed = run("allreduce-8gpu.json")
    assert parsed["format"] == "json" and parsed["ranks"] == 8 and parsed["hosts"] == ["gpu-a1"]
    assert busbw_by_size(parsed)[8 * G] == pytest.approx(480.0, rel=1e-3)
    assert parsed["out_of_bounds"] == 0


def test_three_runs_pass_on_median():
    summary = judge_runs([run("allreduce-8gpu-run%d.txt" % i) for i in (1, 2, 3)], BASELINE, "gpu-a1")
    assert summary["passed"], summary["failures"]
    assert summary["median_busbw"][str(8 * G)] == pytest.approx(480.0, abs=0.01)


def test_slow_run_fails_with_numbers():
    summary = judge_runs([run("allreduce-8gpu-slow.txt")] * 3, BASELINE, "gpu-a1")
    assert not summary["passed"]
    assert summary["failures"][-1] == ("gpu-a1 size 8G: check nccl_busbw: measured 336.00, baseline >= 423.00 GB/s "
                                       "(470.00 - 10%) (median of 3 run(s))")


def test_one_slow_run_of_three_does_not_fail_the_median():
    runs = [run("allreduce-8gpu-run1.txt"), run("allreduce-8gpu-slow.txt"), run("allreduce-8gpu-run3.txt")]
    assert judge_runs(runs, BASELINE)["passed"]


def test_wrong_elements_fail():
    summary = judge_runs([run("allreduce-8gpu-wrong.txt")] * 3, BASELINE, "gpu-a1")
    assert not summary["passed"]
    assert "gpu-a1 run 1: check nccl_wrong_elements: measured 1024, baseline 0" in summary["failures"]
    assert "gpu-a1 run 1: check nccl_out_of_bounds: measured 1, baseline 0" in summary["failures"]


def test_too_few_runs_fail():
    summary = judge_runs([run("allreduce-8gpu-run1.txt")], BASELINE, "n")
    assert summary["failures"][0].startswith("n: check nccl_runs: measured 1, baseline >= 3")


def test_nccl_error_lines():
    parsed = run("allreduce-nccl-error.txt")
    assert parsed["errors"][0]["kind"] == "NCCL" and parsed["errors"][0]["host"] == "gpu-a1"
    assert "unhandled system error" in parsed["errors"][0]["message"]
    summary = judge_runs([parsed] * 3, BASELINE, "n")
    assert not summary["passed"] and any("NCCL failure" in f for f in summary["failures"])
    assert any("not measured" in f for f in summary["failures"])


def test_truncated_is_a_clear_error():
    with pytest.raises(ParseError, match="ends before the summary footer"):
        run("allreduce-truncated.txt")


@pytest.mark.parametrize("text,message", [
    ("", "empty"),
    ("bash: all_reduce_perf: command not found", "no result table"),
    ('{"results": [{"size": "x"}]}', r"results\[0\] is malformed"),
    ("# size count type redop root time algbw busbw #wrong\n1024 256 float sum -1 1.0\n", "malformed data row"),
])
def test_malformed(text, message):
    with pytest.raises(ParseError, match=message):
        parse_output(text)


@pytest.mark.parametrize("value,expected", [(8, 8), ("8G", 8 * G), ("512M", 512 * 1024 ** 2), ("1K", 1024),
                                            ("1024", 1024), ("2GB", 2 * G)])
def test_parse_size(value, expected):
    assert parse_size(value) == expected


def test_parse_size_error_names_field():
    with pytest.raises(InputError, match="baseline.nccl.busbw_gbps key: 'lots'"):
        judge_runs([run("allreduce-8gpu-run1.txt")], dict(BASELINE, nccl=dict(BASELINE["nccl"],
                                                                               busbw_gbps={"lots": 1.0})))


@pytest.mark.parametrize("value", ["inf", "1e309", "nan"])
def test_a_bus_bandwidth_that_is_not_a_measurement_fails(value):
    text = fixture_text("nccl", "allreduce-8gpu-run1.txt")
    bad = parse_output(text.replace("480.00", value).replace("475.20", value))
    summary = judge_runs([bad] * 3, BASELINE, "n")
    assert not summary["passed"]
    assert "n size 8G: check nccl_busbw: measured not measured in 3 of 3 run(s)" in summary["failures"][0]


def test_wrong_column_na_without_data_checking_fails():
    # all_reduce_perf -c 0 prints N/A in #wrong: unmeasured, not zero
    lines = []
    for line in fixture_text("nccl", "allreduce-8gpu-run1.txt").splitlines():
        cells = line.split()
        if line.strip()[:1].isdigit():
            cells[8] = cells[12] = "N/A"
        lines.append("  ".join(cells) if line.strip()[:1].isdigit() else line)
    parsed = parse_output("\n".join(lines))
    assert all(r["wrong"] is None for r in parsed["rows"])
    summary = judge_runs([parsed] * 3, BASELINE, "n")
    assert not summary["passed"]
    assert summary["failures"][0].startswith("n run 1: check nccl_wrong_elements: measured not measured (#wrong N/A "
                                             "in 31 row(s))")


def test_json_without_nwrong_or_out_of_bounds_fails():
    doc = json.loads(fixture_text("nccl", "allreduce-8gpu.json"))
    for res in doc["results"]:
        for half in ("out_of_place", "in_place"):
            res[half].pop("nwrong", None)
    doc.pop("out_of_bounds", None)
    summary = judge_runs([parse_output(json.dumps(doc))] * 3, BASELINE, "n")
    assert not summary["passed"]
    assert any("nccl_wrong_elements: measured not measured" in f for f in summary["failures"])
    assert any("nccl_out_of_bounds: measured not reported" in f for f in summary["failures"])


def test_opt_out_judges_nothing_and_says_why():
    opted = pool_baseline(opt_out={"nccl": "single-GPU nodes: there is no collective to measure"})
    summary = judge_runs([], opted, "n")
    assert summary["passed"] and summary["opt_outs"] == [
        "n: nccl_busbw opted out: single-GPU nodes: there is no collective to measure"]


@pytest.mark.parametrize("size", ["\u0668G", "1\uff10M"])  # an Arabic-Indic eight, a full-width zero
def test_a_size_takes_ascii_digits_only(size):
    with pytest.raises(InputError, match="is not a size"):
        parse_size(size, "nccl.busbw_gbps")
