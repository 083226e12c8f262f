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
from tests.conftest import pool_baseline
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


def test_kubeadm_is_the_real_binary_for_everything(sim, tmp_path):
    """Every kubeadm command runs the real kubeadm the package carries; without it only `version` answers (from the
    package's version file) and every other command refuses, naming it, rather than pretend."""
    proc = sim.run("kubeadm", "upgrade", "plan", "-o", "json", rc=1, host="cp-1")
    assert "runs the real kubeadm, which this package lacks" in proc.stderr and proc.stdout == ""
    for argv in (["upgrade", "apply", "v1.36.3", "-y"], ["upgrade", "node"], ["upgrade", "apply", "v1.36.3",
                                                                             "--dry-run"]):
        assert "runs the real kubeadm" in sim.run("kubeadm", *argv, rc=1, host="cp-1").stderr
    assert sim.run("kubeadm", "version", "-o", "short").stdout == "v1.36.3\n"
    assert not (sim.state_dir / "kubeadm-calls.jsonl").exists()  # nothing ran
    real = tmp_path / "kubeadm-real"
    real.write_text('#!/bin/sh\n[ "$1 $3" = "version short" ] && echo v1.36.3-real && exit 0\n'
                    'echo real kubeadm: "$@"\n')
    real.chmod(0o755)
    assert sim.run("kubeadm", "upgrade", "plan", "v1.36.3", "-o", "json", host="cp-1").stdout == \
        "real kubeadm: upgrade plan v1.36.3 -o json\n"
    assert sim.run("kubeadm", "version", "-o", "short").stdout == "v1.36.3-real\n"


def test_kubeadm_apply_and_node_are_recorded_with_the_real_binarys_version(sim, tmp_path):
    """Each apply and node is recorded, with its arguments and the version the real binary reports, before the real
    kubeadm runs it (the lab story and the kubeadm_upgrade Molecule scenario read them)."""
    real = tmp_path / "kubeadm-real"
    real.write_text('#!/bin/sh\n[ "$1 $3" = "version short" ] && echo v1.36.3 && exit 0\necho "real kubeadm $*"\n')
    real.chmod(0o755)
    assert sim.run("kubeadm", "upgrade", "apply", "v1.36.3", "-y", "--config", "/etc/k.yaml",
                   host="cp-1").stdout == "real kubeadm upgrade apply v1.36.3 -y --config /etc/k.yaml\n"
    sim.run("kubeadm", "upgrade", "node", "-v", "5", "--patches", "/etc/kubeadm/patches", host="gpu-a1")
    sim.run("kubeadm", "upgrade", "node", "--help", host="gpu-a1")  # not a run
    calls = [json.loads(line) for line in (sim.state_dir / "kubeadm-calls.jsonl").read_text().splitlines()]
    assert calls == [
        {"argv": ["upgrade", "apply", "v1.36.3", "-y", "--config", "/etc/k.yaml"], "kubeadm": "v1.36.3",
         "binary": "v1.36.3"},
        {"argv": ["upgrade", "node", "-v", "5", "--patches", "/etc/kubeadm/patches"], "kubeadm": "v1.36.3",
         "binary": "v1.36.3"}]


def test_systemctl_fabricmanager_must_match_driver(sim):
    sim.set_version("nvidia-fabricmanager", "570.172.08")
    sim.run("systemctl", "restart", "nvidia-fabricmanager")
    assert sim.run("systemctl", "is-active", "nvidia-fabricmanager").stdout.strip() == "active"
    sim.set_version("nvidia-fabricmanager", "580.95.05")
    proc = sim.run("systemctl", "restart", "nvidia-fabricmanager.service", rc=1)
    assert "does not match driver 570.172.08" in proc.stderr
    assert sim.run("systemctl", "is-active", "nvidia-fabricmanager", rc=3).stdout.strip() == "failed"
