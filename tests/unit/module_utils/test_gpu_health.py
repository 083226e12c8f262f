from __future__ import annotations

import pytest

from ansible_collections.gpufleet.upgrade.plugins.module_utils.errors import ParseError
from ansible_collections.gpufleet.upgrade.plugins.module_utils.gpu_health import (
    judge_health, parse_query_gpu, parse_remapped_rows, scan_kernel_log)
from tests.conftest import fixture_text, pool_baseline

POLICY = pool_baseline()


def judge(gpu="query-gpu-8-ok.csv", remap="remapped-rows-ok.csv", log="kern-clean.log", policy=POLICY,
          log_text=None, remap_text=None):
    return judge_health(parse_query_gpu(fixture_text("nvidia_smi", gpu)),
                        parse_remapped_rows(fixture_text("nvidia_smi", remap) if remap_text is None else remap_text),
                        scan_kernel_log(fixture_text("nvidia_smi", log) if log_text is None else log_text), policy,
                        "gpu-a1")


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


def test_ecc_na_is_unmeasured_and_fails_unless_opted_out():
    gpus = parse_query_gpu(fixture_text("nvidia_smi", "query-gpu-na.csv"))
    assert gpus[0]["ecc.errors.uncorrected.volatile.total"] is None
    assert judge(gpu="query-gpu-na.csv")["failures"] == [
        "gpu-a1 gpu 0: check gpu_uncorrectable_ecc: measured not reported ([N/A]), baseline 0 (ECC is off or "
        "unsupported: enable it, or set opt_out.ecc in the baseline with the reason)"]
    opted = pool_baseline(opt_out={"ecc": "these GPUs run with ECC off by the vendor's design"})
    summary = judge(gpu="query-gpu-na.csv", policy=opted)
    assert summary["passed"] and len(summary["opt_outs"]) == 8
    assert summary["opt_outs"][0] == ("gpu-a1 gpu 0: gpu_uncorrectable_ecc opted out: these GPUs run with ECC off by "
                                      "the vendor's design")


@pytest.mark.parametrize("remap_text,measured", [
    ("", "no remapped-rows line"),
    ("00000000:18:00.0, GPU-x, [N/A], [N/A], [N/A], [N/A]\n", "not reported"),
])
def test_remapped_rows_missing_or_na_fail(remap_text, measured):
    failures = judge(remap_text=remap_text)["failures"]
    assert failures and all(("gpu_remap" in f or "gpu_remapped_rows" in f) for f in failures)
    assert measured in failures[0]
    opted = pool_baseline(opt_out={"remapped_rows": "Ada GPUs retire pages, they have no row remapper"})
    assert judge(remap_text=remap_text, policy=opted)["passed"]


@pytest.mark.parametrize("log_text,why", [("-- No entries --\n", "journalctl printed '-- No entries --'"),
                                          ("", "the kernel log is empty")])
def test_a_kernel_log_without_entries_is_unmeasured(log_text, why):
    assert judge(log_text=log_text)["failures"] == [
        "gpu-a1: check gpu_xid: measured not measured (%s), baseline no XID in [48, 63, 64, 74, 79, 94, 95, 119, "
        "120, 154] (the kernel log must be readable to rule XIDs out; keep kernel messages in the journal, or set "
        "opt_out.kernel_log with the reason)" % why]


@pytest.mark.parametrize("xid", [119, 120, 154])
def test_gsp_and_recovery_xids_are_fatal_by_default(xid):
    line = "Nov 30 08:01:04.1 gpu-a1 kernel: NVRM: Xid (PCI:0000:18:00): %d, pid=1, GSP problem\n" % xid
    failures = judge(log_text=fixture_text("nvidia_smi", "kern-clean.log") + line)["failures"]
    assert failures and failures[0].startswith("gpu-a1: check gpu_xid: measured XID %d on PCI:0000:18:00" % xid)


def test_an_xid_opt_out_is_named_and_recorded():
    line = "Nov 30 08:01:04.1 gpu-a1 kernel: NVRM: Xid (PCI:0000:18:00): 74, pid=1, NVLink\n"
    opted = pool_baseline(opt_out={"xids": {74: "PCIe-only nodes: no NVLink, 74 is a false alarm here"}})
    summary = judge(log_text=fixture_text("nvidia_smi", "kern-clean.log") + line, policy=opted)
    assert summary["passed"]
    assert "gpu-a1: gpu_xid_74 opted out: PCIe-only nodes: no NVLink, 74 is a false alarm here" in summary["opt_outs"]


def test_pending_remap():
    failures = judge(remap="remapped-rows-pending.csv")["failures"]
    assert failures == ["gpu-a1 gpu 6: check gpu_remap_pending: measured yes, baseline No "
                        "(reset the GPU to apply pending row remaps)"]


def test_xid79_fails_xid13_does_not():
    xids = scan_kernel_log(fixture_text("nvidia_smi", "kern-xid79.log"))["events"]
    assert [(x["xid"], x["pci"]) for x in xids] == [(79, "PCI:0000:9a:00")]
    assert judge(log="kern-xid79.log")["failures"] == [
        "gpu-a1: check gpu_xid: measured XID 79 on PCI:0000:9a:00 (GPU has fallen off the bus), baseline no XID in "
        "[48, 63, 64, 74, 79, 94, 95, 119, 120, 154]"]
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


def test_persistence_off_fails_unless_opted_out():
    failures = judge(gpu="query-gpu-ecc-persist-off.csv")["failures"]
    assert sum("gpu_persistence_mode" in f for f in failures) == 8
    opted = pool_baseline(opt_out={"persistence_mode": "nvidia-persistenced is replaced by the DCGM exporter here"})
    assert not any("gpu_persistence_mode" in f for f in judge(gpu="query-gpu-ecc-persist-off.csv",
                                                                policy=opted)["failures"])


def test_an_xid_line_that_cannot_be_read_fails():
    line = "Nov 30 08:01:04.1 gpu-a1 kernel: NVRM: Xid (PCI:0000:18:00): N/A, pid=1, something\n"
    failures = judge(log_text=fixture_text("nvidia_smi", "kern-clean.log") + line)["failures"]
    assert failures and failures[0].startswith("gpu-a1: check gpu_xid: measured unreadable XID line")


def test_a_gpu_listed_twice_does_not_make_up_the_count():
    lines = fixture_text("nvidia_smi", "query-gpu-7-of-8.csv").splitlines()
    doubled = "\n".join(lines + [lines[1]])  # 8 lines, GPU 1 twice
    summary = judge_health(parse_query_gpu(doubled), parse_remapped_rows(fixture_text("nvidia_smi",
                                                                                      "remapped-rows-ok.csv")),
                           scan_kernel_log(fixture_text("nvidia_smi", "kern-clean.log")), POLICY, "gpu-a1")
    assert not summary["passed"]
    assert summary["failures"][0].startswith("gpu-a1: check gpu_identity: measured index not unique or not reported: 1")
