"""The lab's simulators (SIMULATION, lab/simulators) run here without the lab, against a temporary state
directory, and their output must parse with the checks engine's parsers - the same contract the lab tests check
inside the podman hosts."""
from __future__ import annotations

import json

import pytest

from ansible_collections.gpufleet.upgrade.plugins.module_utils.dcgm import judge_diag, parse_diag
from ansible_collections.gpufleet.upgrade.plugins.module_utils.gpu_health import (
    judge_health, parse_query_gpu, parse_remapped_rows, scan_kernel_log)
from ansible_collections.gpufleet.upgrade.plugins.module_utils.nccl import judge_runs, parse_output
from tests.conftest import FIXTURES, pool_baseline
from tests.unit.lab.simulators import Simulators

LAB_BASELINE = pool_baseline(gpu={"driver_version": "570.172.08"},
                             dcgm={"required_tests": ["software", "memory", "pcie"]},
                             nccl={"busbw_gbps": {"1G": 450.0, "8G": 470.0}, "tolerance_pct": 10, "min_runs": 3})
QUERY = ("--query-gpu=index,uuid,pci.bus_id,name,driver_version,persistence_mode,"
         "ecc.errors.uncorrected.volatile.total")
REMAP = ("--query-remapped-rows=gpu_bus_id,gpu_uuid,remapped_rows.correctable,remapped_rows.uncorrectable,"
         "remapped_rows.pending,remapped_rows.failure")


@pytest.fixture
def sim(tmp_path):
    sims = Simulators(tmp_path, {"nvidia-driver": "570.172.08", "kubeadm": "v1.36.3", "kubelet": "v1.35.4",
                                 "dcgm": "4.2.3"},
                      extra_env={"GPUFLEET_KUBEADM_REAL": str(tmp_path / "kubeadm-real")})  # none, unless written
    (sims.state_dir / "cluster" / "state.json").write_text(json.dumps({
        "apiserver": {"cp-1": "v1.35.4", "cp-2": "v1.35.4"}, "kubelet": {"cp-1": "v1.35.4", "gpu-a1": "v1.35.4"}}))
    return sims


def health(sim):
    gpus = parse_query_gpu(sim.run("nvidia-smi", QUERY, "--format=csv,noheader,nounits").stdout)
    remaps = parse_remapped_rows(sim.run("nvidia-smi", REMAP, "--format=csv,noheader,nounits").stdout)
    return judge_health(gpus, remaps, scan_kernel_log(sim.run("journalctl", "-k").stdout), LAB_BASELINE, "gpu-a1")


def test_nvidia_smi_healthy_and_faults(sim):
    assert health(sim)["passed"]
    sim.fault("gpu-missing")
    sim.fault("xid79")
    failures = health(sim)["failures"]
    assert failures[0] == ("gpu-a1: check gpu_count: measured 7, baseline 8 (a node with fewer GPUs than expected "
                           "after a driver change or XID is worse than a failed node)")
    assert any("XID 79 on PCI:0000:9a:00" in f for f in failures)


def test_nvidia_smi_without_driver_or_after_upgrade_without_reboot(sim, tmp_path):
    (tmp_path / "versions" / "nvidia-driver.version").unlink()
    proc = sim.run("nvidia-smi", QUERY, "--format=csv,noheader,nounits", rc=9)
    assert "couldn't communicate with the NVIDIA driver" in proc.stdout


def test_dcgmi(sim):
    policy = LAB_BASELINE
    assert judge_diag(parse_diag(sim.run("dcgmi", "diag", "-r", "2", "-j").stdout), policy, "gpu-a1")["passed"]
    sim.fault("dcgm-fail")
    proc = sim.run("dcgmi", "diag", "-r", "1", "-j", rc=226)
    summary = judge_diag(parse_diag(proc.stdout), policy, "gpu-a1")
    assert summary["failures"] == ["gpu-a1 gpu 5 memory: check dcgm_test: measured Fail, baseline Pass (GPU 5: "
                                   "Memory test failed: DBE detected (isolate))"]


def test_all_reduce_perf(sim, tmp_path):
    baseline = LAB_BASELINE
    runs = [parse_output(sim.run("all_reduce_perf", "-b", "8", "-e", "8G", "-f", "2", "-g", "8").stdout)
            for _ in range(3)]
    assert runs[0]["format"] == "current" and runs[0]["ranks"] == 8 and len(runs[0]["rows"]) == 31
    assert judge_runs(runs, baseline, "gpu-a1")["passed"]
    json_path = tmp_path / "nccl.json"
    sim.run("all_reduce_perf", "-b", "1G", "-e", "8G", "-f", "2", "-g", "8", "-J", str(json_path))
    assert parse_output(json_path.read_text())["format"] == "json"
    sim.fault("nccl-slow")
    slow = [parse_output(sim.run("all_reduce_perf", "-b", "1G", "-e", "8G", "-f", "2", "-g", "8").stdout)
            for _ in range(3)]
    assert not judge_runs(slow, baseline, "gpu-a1")["passed"]


def test_kubeadm_reads_with_the_real_binary_and_simulates_only_apply_and_node(sim, tmp_path):
    """version, upgrade plan and dry runs are the real kubeadm's (the package carries it); without it they refuse,
    naming it, rather than print a made-up plan."""
    proc = sim.run("kubeadm", "upgrade", "plan", "-o", "json", rc=1, host="cp-1")
    assert "runs the real kubeadm, which this package lacks" in proc.stderr and proc.stdout == ""
    assert "runs the real kubeadm" in sim.run("kubeadm", "upgrade", "apply", "v1.36.3", "--dry-run", rc=1,
                                              host="cp-1").stderr
    real = tmp_path / "kubeadm-real"
    real.write_text("#!/bin/sh\necho real kubeadm: \"$@\"\n")
    real.chmod(0o755)
    assert sim.run("kubeadm", "upgrade", "plan", "v1.36.3", "-o", "json", host="cp-1").stdout == \
        "real kubeadm: upgrade plan v1.36.3 -o json\n"
    assert sim.run("kubeadm", "version", "-o", "short").stdout == "real kubeadm: version -o short\n"
    assert sim.run("kubeadm", "upgrade", "node", "--dry-run", host="cp-1").stdout.startswith("real kubeadm")
    assert "[upgrade] SUCCESS!" not in sim.run("kubeadm", "upgrade", "apply", "v1.36.3", "--dry-run",
                                               host="cp-1").stdout


def test_kubeadm_apply_and_node_take_only_real_kubeadms_flags_and_are_recorded(sim, tmp_path):
    """The simulator refuses a flag the real kubeadm's own --help does not list for the subcommand (captured from
    kubeadm v1.36.3: tests/fixtures/kubeadm/real-1.36.3-upgrade-*-help.txt), as cobra refuses it, and records
    every apply and node it runs with their arguments (the lab story reads them)."""
    real = tmp_path / "kubeadm-real"
    real.write_text('#!/bin/sh\n[ "$3" = --help ] && exec cat "%s/real-1.36.3-upgrade-$2-help.txt"\n'
                    'echo "real kubeadm $*"\n' % (FIXTURES / "kubeadm"))
    real.chmod(0o755)
    proc = sim.run("kubeadm", "upgrade", "node", "--etcd-upgrad=false", rc=1, host="cp-1")
    assert proc.stderr.startswith("unknown flag: --etcd-upgrad\n")
    proc = sim.run("kubeadm", "upgrade", "apply", "v1.36.3", "--yes", "--etcd-upgrade=false", "--skip-fun", rc=1,
                   host="cp-1")
    assert proc.stderr.startswith("unknown flag: --skip-fun\n")
    # a worker's upgrade node is the real kubeadm's, end to end (with its arguments, after the flag check)
    assert sim.run("kubeadm", "upgrade", "node", "--etcd-upgrade=false", host="gpu-a1").stdout == \
        "real kubeadm upgrade node --etcd-upgrade=false\n"
    sim.run("kubeadm", "upgrade", "node", "-v", "5", "--patches", "/etc/kubeadm/patches", host="gpu-a1")
    calls = [json.loads(line) for line in (sim.state_dir / "kubeadm-calls.jsonl").read_text().splitlines()]
    assert [c["argv"] for c in calls] == [["upgrade", "node", "--etcd-upgrade=false"],
                                          ["upgrade", "node", "-v", "5", "--patches", "/etc/kubeadm/patches"]]


def test_kubeadm_refusals(sim):
    """In real kubeadm's words (tests/lab/test_lab.py compares them with a real dry run)."""
    sim.set_version("kubeadm", "v1.37.1")
    proc = sim.run("kubeadm", "upgrade", "apply", "v1.37.1", "-y", rc=1, host="cp-1")
    assert '- Specified version to upgrade to "v1.37.1" is too high; kubeadm can upgrade only 1 minor version at ' \
           'a time' in proc.stderr
    assert proc.stderr.startswith("error: error execution phase preflight: the version argument is invalid due to "
                                  "these fatal errors:")
    proc = sim.run("kubeadm", "upgrade", "apply", "v1.36.3", "-y", rc=1, host="gpu-a1")
    assert "this node is not a control-plane node" in proc.stderr
    sim.set_version("kubeadm", "v1.35.4")
    proc = sim.run("kubeadm", "upgrade", "apply", "v1.36.3", "-y", rc=1, host="cp-1")
    assert "at least one minor release higher than the kubeadm minor release (36 > 35)" in proc.stderr
    sim.set_version("kubeadm", "v1.36.1")
    proc = sim.run("kubeadm", "upgrade", "apply", "v1.36.3", "-y", rc=1, host="cp-1")
    assert '- Specified version to upgrade to "v1.36.3" is higher than the kubeadm version "v1.36.1". Upgrade ' \
           'kubeadm first using the tool you used to install kubeadm' in proc.stderr
    assert "Can be bypassed if you pass the --force flag" in proc.stderr
    proc = sim.run("kubeadm", "upgrade", "apply", "v1.35.4", rc=1, host="cp-1")  # no -y: asks, gets no answer
    assert "didn't answer" in proc.stderr


def test_systemctl_fabricmanager_must_match_driver(sim):
    sim.set_version("nvidia-fabricmanager", "570.172.08")
    sim.run("systemctl", "restart", "nvidia-fabricmanager")
    assert sim.run("systemctl", "is-active", "nvidia-fabricmanager").stdout.strip() == "active"
    sim.set_version("nvidia-fabricmanager", "580.95.05")
    proc = sim.run("systemctl", "restart", "nvidia-fabricmanager.service", rc=1)
    assert "does not match driver 570.172.08" in proc.stderr
    assert sim.run("systemctl", "is-active", "nvidia-fabricmanager", rc=3).stdout.strip() == "failed"
