from __future__ import annotations

import pytest

from ansible_collections.gpufleet.upgrade.plugins.module_utils.errors import ParseError
from ansible_collections.gpufleet.upgrade.plugins.module_utils.gpu_health import (
    XID_BASELINE, judge_health, parse_query_gpu, parse_remapped_rows, scan_kernel_log)
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
        "gpu-a1: check gpu_xid: measured not measured (%s), baseline %s (the kernel log must be readable to rule "
        "XIDs out; keep kernel messages in the journal, or set opt_out.kernel_log with the reason)" % (
            why, XID_BASELINE)]


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
    # the "GPU 0000:9a:00.0: GPU has fallen off the bus." line after it is the same loss: not a second failure
    assert judge(log="kern-xid79.log")["failures"] == [
        "gpu-a1: check gpu_xid: measured XID 79 on PCI:0000:9a:00 (GPU has fallen off the bus, "
        "ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS; NVIDIA's action RESTART_BM), baseline %s" % XID_BASELINE]
    summary = judge(log="kern-xid13.log")
    assert summary["passed"] and summary["xids"][0]["xid"] == 13 and summary["xids"][0]["verdict"] == "pass"


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


# -- issue 34: what real drivers print ---------------------------------------------------------------------------
LOST = ("baseline no GPU lost or failing to initialise (the driver lost a GPU or could not initialise it, with no "
        "Xid line: reboot the node (NVIDIA's action for a GPU that fell off the bus: RESTART_BM), replace the GPU if "
        "it persists)")


def xid_failure(text):
    return "gpu-a1: check gpu_xid: measured %s, baseline %s" % (text, XID_BASELINE)


@pytest.mark.parametrize("log,failures", [
    ("kern-real-xid79-dmesg.log", [xid_failure(
        "XID 79 on PCI:0000:a1:00 (GPU has fallen off the bus, ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS; NVIDIA's "
        "action RESTART_BM)")]),
    ("kern-real-xid79-no-pid.log", [xid_failure(
        "XID 79 on PCI:0000:06:00 (GPU has fallen off the bus, ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS; NVIDIA's "
        "action RESTART_BM)")]),
    ("kern-real-xid119-dmesg.log", [xid_failure(
        "XID 119 on PCI:0000:61:00 x5 (GSP RPC Timeout, GSP_RPC_TIMEOUT; NVIDIA's action RESET_GPU)")]),
    ("kern-real-xid13-109-dmesg.log", [xid_failure(
        "XID 109 on PCI:0000:cb:00 (Context Switch Timeout Error, ROBUST_CHANNEL_CTXSW_TIMEOUT_ERROR; NVIDIA's "
        "action RESET_GPU)")]),
    ("kern-real-xid43-31-94-dmesg.log", [xid_failure(
        "XID 94 on PCI:0000:00:08 (Contained memory error, ROBUST_CHANNEL_CONTAINED_ERROR; NVIDIA's action "
        "RESTART_APP; gpufleet fails it: the application that hit the contained error must restart, and the row "
        "remap that follows takes effect only after a GPU reset or reboot; until then the node may offer fewer GPUs "
        "(NVIDIA's memory error management guide))")]),
    ("kern-real-xid63.log", [xid_failure(
        "XID 63 on PCI:0000:10:1c (GPU memory remapping event, INFOROM_DRAM_RETIREMENT_EVENT; NVIDIA's action "
        "IGNORE; gpufleet fails it: the row remap (or page retirement) it records takes effect only after a GPU "
        "reset or reboot; a node is not handed back with a remap pending)")]),
    ("kern-real-xid48-64-rminitadapter-syslog.log", [
        xid_failure("XID 48 on PCI:0000:07:00 (Double Bit ECC Error, ROBUST_CHANNEL_GPU_ECC_DBE; NVIDIA's action "
                    "WORKFLOW_XID_48); XID 64 on PCI:0000:07:00 (GPU memory remapping failure, "
                    "INFOROM_DRAM_RETIREMENT_FAILURE; NVIDIA's action RESET_GPU)"),
        "gpu-a1: check gpu_lost: measured GPU 0000:0a:00: RmInitAdapter failed x7 ('Dec  2 11:38:27 worker4 kernel: "
        "[  199.234935] NVRM: GPU 0000:0a:00.0: rm_init_adapter failed, device minor number 5'), " + LOST]),
    ("kern-real-rminitadapter-dmesg.log", [
        "gpu-a1: check gpu_lost: measured GPU 0000:81:00: RmInitAdapter failed x4 ('[Sun Apr 14 12:48:42 2024] NVRM: "
        "GPU 0000:81:00.0: RmInitAdapter failed! (0x25:0x40:1470)'), " + LOST]),
    ("kern-real-fallen-off-bus-no-xid-dmesg.log", [
        "gpu-a1: check gpu_lost: measured GPU 0000:b3:00: fell off the bus ('NVRM: fallen off the bus and is not "
        "responding to commands.'); the NVIDIA probe routine failed ('[ 1843.439662] NVRM: The NVIDIA probe routine "
        "failed for 1 device(s).'), " + LOST]),
    ("kern-real-nvlink5-fatal.log", [xid_failure(
        "XID 149 on PCI:0000:00:00 x2 (NVLINK: NETIR Error, NVLINK_NETIR_ERROR; the driver prints 'NETIR_LINK_EVT "
        "Fatal'; NVIDIA's action WORKFLOW_NVLINK5_ERR); XID 149 on PCI:0019:01:00 (NVLINK: NETIR Error, "
        "NVLINK_NETIR_ERROR; the driver prints 'NETIR Fatal'; NVIDIA's action WORKFLOW_NVLINK5_ERR)")]),
    ("kern-real-nvlink5-nonfatal.log", []),
])
def test_real_kernel_logs(log, failures):
    assert judge(log=log)["failures"] == failures


def test_xid45_after_nvlink_errors_fails_on_every_gpu():
    """45 names its cause ("caused by previous Xid 149"): the cause decides - here NVLink XIDs whose own lines are
    not in the log, so no severity word: read as Fatal."""
    failures = judge(log="kern-real-xid45-after-nvlink.log")["failures"]
    assert len(failures) == 1 and failures[0].startswith(
        "gpu-a1: check gpu_xid: measured XID 45 on PCI:0000:dc:00 x2 (Preemptive cleanup, due to previous errors")
    assert "caused by XID 149: NVLINK: NETIR Error, NVLINK_NETIR_ERROR; the line has no 'UNIT Fatal|Nonfatal XC0 " \
        "i0 Link N' part, read as Fatal" in failures[0]
    assert "; XID 45 on PCI:0000:ed:00 x2, PCI:0000:ba:00 x2, PCI:0000:97:00 (Preemptive cleanup" in failures[0]
    assert "caused by XID 145: NVLINK: RLW Error" in failures[0]


def test_xid45_alone_or_after_an_application_fault_passes():
    """A drain stops GPU pods; the driver logs 45 for each application it tears down. Alone, or caused by an
    application's own fault (13), it passes, its reason recorded."""
    alone = "kernel: NVRM: Xid (PCI:0000:18:00): 45, pid=1234, name=python3, Ch 00000008\n"
    summary = judge_health(parse_query_gpu(fixture_text("nvidia_smi", "query-gpu-8-ok.csv")),
                           parse_remapped_rows(fixture_text("nvidia_smi", "remapped-rows-ok.csv")),
                           scan_kernel_log(alone), POLICY, "gpu-a1")
    assert summary["passed"], summary["failures"]
    (event,) = summary["xids"]
    assert event["verdict"] == "pass" and "as a drain stops GPU pods" in event["why"]
    after13 = alone.replace("Ch 00000008", "Ch 00000008 caused by previous Xid 13")
    (event,) = judge_health(parse_query_gpu(fixture_text("nvidia_smi", "query-gpu-8-ok.csv")),
                            parse_remapped_rows(fixture_text("nvidia_smi", "remapped-rows-ok.csv")),
                            scan_kernel_log(after13), POLICY, "gpu-a1")["xids"]
    assert event["verdict"] == "pass" and "caused by XID 13: Graphics Engine Exception" in event["why"]
    after79 = alone.replace("Ch 00000008", "Ch 00000008 caused by previous Xid 79")
    assert not judge_health(parse_query_gpu(fixture_text("nvidia_smi", "query-gpu-8-ok.csv")),
                            parse_remapped_rows(fixture_text("nvidia_smi", "remapped-rows-ok.csv")),
                            scan_kernel_log(after79), POLICY, "gpu-a1")["passed"]


def test_nvlink_severity_words_are_read():
    events = scan_kernel_log(fixture_text("nvidia_smi", "kern-real-nvlink5-fatal.log") +
                             fixture_text("nvidia_smi", "kern-real-nvlink5-nonfatal.log"))["events"]
    assert [(e["xid"], e["unit"], e["severity"]) for e in events] == [
        (149, "NETIR_LINK_EVT", "Fatal"), (149, "NETIR_LINK_EVT", "Fatal"), (149, "NETIR", "Fatal"),
        (144, "SAW_MVB", "Nonfatal"), (145, "RLW_RXPIPE", "Nonfatal")]
    summary = judge(log="kern-real-nvlink5-nonfatal.log")
    assert [(x["xid"], x["verdict"], x["why"]) for x in summary["xids"]] == [
        (144, "pass", "NVLINK: SAW Error, NVLINK_SAW_ERROR; the driver prints 'SAW_MVB Nonfatal'"),
        (145, "pass", "NVLINK: RLW Error, NVLINK_RLW_ERROR; the driver prints 'RLW_RXPIPE Nonfatal'")]


@pytest.mark.parametrize("line,measured", [
    # SYNTHETIC: the real 145 line of kern-real-nvlink5-nonfatal.log with its severity word dropped
    ("NVRM: Xid (PCI:0018:01:00): 145, RLW_RXPIPE XC0 i0 Link 13 (0x0409a0c2 0x00000008 0x00000001 0x00000000 "
     "0x00100000 0x00000004)",
     "XID 145 on PCI:0018:01:00 (NVLINK: RLW Error, NVLINK_RLW_ERROR; the line has no 'UNIT Fatal|Nonfatal XC0 i0 "
     "Link N' part, read as Fatal; NVIDIA's action WORKFLOW_NVLINK5_ERR)"),
    # SYNTHETIC: the same line marked Fatal
    ("NVRM: Xid (PCI:0018:01:00): 145, RLW_RXPIPE Fatal XC0 i0 Link 13 (0x0409a0c2 0x00000008 0x00000001 0x00000000 "
     "0x00100000 0x00000004)",
     "XID 145 on PCI:0018:01:00 (NVLINK: RLW Error, NVLINK_RLW_ERROR; the driver prints 'RLW_RXPIPE Fatal'; NVIDIA's "
     "action WORKFLOW_NVLINK5_ERR)"),
    # SYNTHETIC: NVIDIA's B200 example of XID 150, with pid/name as the MIG-less printf puts them
    ("NVRM: Xid (PCI:0000:5b:00): 150, pid='<unknown>', name=<unknown>, MSE Degraded Fatal XC0 i0 Link -1 "
     "(0x00000000 0x00000000 0x00000000 0x00000000 0x00000000 0x00000000)",
     "XID 150 on PCI:0000:5b:00 (NVLINK: MSE Error, NVLINK_MSE_ERROR; the driver prints 'MSE Degraded Fatal'; "
     "NVIDIA's action WORKFLOW_NVLINK5_ERR)"),
    # SYNTHETIC: a code after the catalogue's last (172)
    ("NVRM: Xid (PCI:0000:18:00): 173, pid=1, name=python3, something new",
     "XID 173 on PCI:0000:18:00 (not in NVIDIA's XID catalogue (codes 1-172, driver branches R570/R580); an XID "
     "the catalogue does not know is not harmless until the pool says so: name it in gpu.benign_xids with the "
     "reason)"),
    # SYNTHETIC: XID 74 (no public capture found), the layout of the driver's printf
    ("NVRM: Xid (PCI:0000:c1:00): 74, pid='<unknown>', name=<unknown>, NVLink: fatal error detected on link 1",
     "XID 74 on PCI:0000:c1:00 (NVLINK Error, NVLINK_ERROR; NVIDIA's action WORKFLOW_NVLINK_ERR)"),
    # SYNTHETIC: XID 95 (no public capture found), the layout of the real 94 line
    ("NVRM: Xid (PCI:0000:00:08): 95, pid='<unknown>', name=<unknown>, Uncontained: LTC TAG (0x2,0x0). RST: Yes, "
     "D-RST: No",
     "XID 95 on PCI:0000:00:08 (Uncontained memory error, ROBUST_CHANNEL_UNCONTAINED_ERROR; NVIDIA's action "
     "RESET_GPU)"),
])
def test_xid_lines_that_fail(line, measured):
    assert judge(log_text=fixture_text("nvidia_smi", "kern-clean.log") + line + "\n")["failures"] == [
        xid_failure(measured)]


def test_mig_attributed_xid_line():
    # SYNTHETIC: the driver's MIG printf ("NVRM: Xid (PCI:%04x:%02x:%02x GPU-I:%02u GPU-CI:%02u): %d, ...")
    line = "NVRM: Xid (PCI:0000:9a:00 GPU-I:02 GPU-CI:01): 31, pid=77, name=python3, Ch 00000008, intr 00000000.\n"
    event = scan_kernel_log(line)["events"][0]
    assert (event["xid"], event["pci"], event["gpu"]) == (31, "PCI:0000:9a:00 GPU-I:02 GPU-CI:01", "0000:9a:00")
    assert judge(log_text=line)["passed"]


def test_unknown_xid_passes_only_when_the_baseline_names_it_benign():
    line = "NVRM: Xid (PCI:0000:18:00): 173, pid=1, name=python3, something new\n"
    assert not judge(log_text=line)["passed"]
    policy = pool_baseline(gpu={"benign_xids": {173: "driver 590 logs it at every boot on this pool's boards"}})
    summary = judge(log_text=line, policy=policy)
    assert summary["passed"] and summary["xids"][0]["verdict"] == "benign"
    assert summary["opt_outs"] == ["gpu-a1: gpu_xid_173 opted out: not in NVIDIA's catalogue; named benign in "
                                   "gpu.benign_xids: driver 590 logs it at every boot on this pool's boards"]


def test_opt_out_and_extra_xids_still_work():
    fatal = fixture_text("nvidia_smi", "kern-real-nvlink5-fatal.log")
    opted = pool_baseline(opt_out={"xids": {149: "NVLink 5 switch trays are replaced by the vendor, not by us"}})
    summary = judge(log_text=fatal, policy=opted)
    assert summary["passed"] and {x["verdict"] for x in summary["xids"]} == {"opted out"}
    strict = pool_baseline(gpu={"fatal_xids_extra": [13]})
    assert judge(log="kern-xid13.log", policy=strict)["failures"] == [xid_failure(
        "XID 13 on PCI:0000:18:00 (Graphics Engine Exception, ROBUST_CHANNEL_GR_EXCEPTION / "
        "ROBUST_CHANNEL_GR_ERROR_SW_NOTIFY; on this pool's gpu.fatal_xids_extra)")]


def test_a_kernel_log_opt_out_covers_lost_gpus_too():
    opted = pool_baseline(opt_out={"kernel_log": "the journal of these diskless nodes is not kept, by design"})
    assert judge(log="kern-real-rminitadapter-dmesg.log", policy=opted)["passed"]


@pytest.mark.parametrize("parse,query", [(parse_remapped_rows, "--query-remapped-rows=gpu_bus_id,gpu_uuid,"
                                          "remapped_rows.correctable,remapped_rows.uncorrectable,"
                                          "remapped_rows.pending,remapped_rows.failure"),
                                         (parse_query_gpu, "--query-gpu=index,uuid,pci.bus_id,name,driver_version,"
                                          "persistence_mode,ecc.errors.uncorrected.volatile.total")])
def test_nvidia_smi_q_output_is_named_for_what_it_is(parse, query):
    with pytest.raises(ParseError) as err:
        parse(fixture_text("nvidia_smi", "smi-q-remapped-rows-pending.txt"))
    assert err.value.msg == (
        "nvidia-smi %s: this is nvidia-smi -q output (the indented 'Key : Value' report; it says Pending: Yes for GPU "
        "00000000:10:1C.0; Remapping Failure Occurred: No for GPU 00000000:10:1C.0), not the CSV this gate reads: "
        "give the output of nvidia-smi %s --format=csv,noheader,nounits" % (query.split("=")[0], query))
    assert err.value.details["layout"] == "nvidia-smi -q"


def test_a_csv_line_is_not_taken_for_nvidia_smi_q():
    # a CSV value may hold " : "-free text only; the -q report needs its banner, GPU heading or Remapped Rows block
    assert len(parse_remapped_rows(fixture_text("nvidia_smi", "remapped-rows-pending.csv"))) == 8


def test_the_fatal_set_is_derived_from_the_catalogue():
    from ansible_collections.gpufleet.upgrade.plugins.module_utils import data_xids
    assert sorted(data_xids.CATALOGUE) == list(range(1, 173))
    for code, xid in data_xids.CATALOGUE.items():
        expected = code in data_xids.STRICTER or (xid.action not in ("RESTART_APP", "IGNORE")
                                                  and code not in data_xids.FOLLOWS)
        assert (code in data_xids.FATAL_XIDS) is expected, code
    assert set(data_xids.FATAL_XIDS) | set(data_xids.PASSING_XIDS) == set(data_xids.CATALOGUE)
    assert {144, 145, 146, 147, 148, 149, 150} == data_xids.SEVERITY_DECIDES <= set(data_xids.FATAL_XIDS)
    assert {46, 48, 64, 74, 79, 95, 109, 119, 120, 140, 143, 154}.issubset(data_xids.FATAL_XIDS)
    assert 45 not in data_xids.FATAL_XIDS  # its cause decides (data_xids.FOLLOWS)
    assert {13, 31, 43}.issubset(data_xids.PASSING_XIDS) and set(data_xids.APPLICATION) == {13, 31, 43}
    assert set(data_xids.STRICTER) == {63, 94}
    assert data_xids.action(79) == "RESTART_BM" and data_xids.entry(999) is None
