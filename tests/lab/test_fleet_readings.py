"""The fleet's NCCL and inference halt readings on a lab cell (playbooks/fleet_readings.yml with the cell's entry
from `bin/lab fleet`): all_reduce_perf over SSH on the cell's probe host, the lab controller's SIMULATED inference
histogram (lab/gpufleet_lab/inference.py). A clean reading, then one with the probe host's ``nccl-slow`` and
``inference-slow`` faults, judged by the fleet run's own rules (fleet_run.halts on the plan's thresholds): both
conditions halt, named with their readings; cleared, a second clean reading passes. A probe whose run fails, and
one the inventory does not have, leave the NCCL reading unmeasured with why - a halt too - and the readings are
still written."""
from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest

from tests.lab.conftest import ROOT, lab_cli

from ansible_collections.gpufleet.upgrade.plugins.module_utils import fleet_run
from ansible_collections.gpufleet.upgrade.plugins.module_utils.fleet import plan_fleet
from gpufleet_lab.__main__ import fleet_doc

pytestmark = pytest.mark.lab
BIN = pathlib.Path(sys.executable).parent


def read(entry, dest, nccl_hosts):
    env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_STDOUT_CALLBACK="ansible.builtin.default", PATH="%s:%s" % (BIN, os.environ["PATH"]))
    extra = {"gpufleet_fleet_cell": entry["name"], "gpufleet_fleet_expected_gpus": entry["gpus"],
             "gpufleet_fleet_window_seconds": 5, "gpufleet_target_version": entry["control_plane"],
             "gpufleet_fleet_nccl_hosts": nccl_hosts, "gpufleet_fleet_inference": entry["inference"],
             "gpufleet_fleet_readings_dest": str(dest)}
    proc = subprocess.run([str(BIN / "ansible-playbook"), "playbooks/fleet_readings.yml", "-i", entry["inventory"],
                           "-e", json.dumps(extra)], cwd=ROOT, env=env, capture_output=True, text=True,
                          check=False, timeout=600)
    assert dest.exists(), "no reading written (rc %d):\n%s\n%s" % (proc.returncode, proc.stdout[-4000:],
                                                                   proc.stderr[-2000:])
    return json.loads(dest.read_text())


def test_nccl_and_inference_readings_halt_on_a_slow_probe_and_a_missing_one_is_unmeasured(lab, tmp_path):
    doc = fleet_doc([lab.cell])["gpufleet_fleet"]  # this run's cell as a fleet of one
    plan = plan_fleet(doc)
    entry = next(c for c in doc["cells"] if c["name"] == lab.cell)
    wanted = plan["cells"][lab.cell]["halt_readings"]
    assert {"nccl_busbw_gbps", "inference_p99_ms"} <= set(wanted)
    probe = entry["nccl_hosts"][0]
    before = read(entry, tmp_path / "before.json", entry["nccl_hosts"])
    assert before["unmeasured"] == {}, before["unmeasured"]
    assert before["nccl_busbw_by_host"] == {probe: before["nccl_busbw_gbps"]} and before["nccl_busbw_gbps"] > 400
    # each pool's GPUs against its nodes times its baseline's: every one allocatable
    assert before["gpu_allocatable_by_pool"] and all(
        p["fraction"] == 1.0 and p["expected"] > 0 for p in before["gpu_allocatable_by_pool"].values()), before
    assert sum(p["expected"] for p in before["gpu_allocatable_by_pool"].values()) == entry["gpus"]
    # the simulated service's estimate from its buckets (inference.py); 50 requests a second over about 5 s
    assert before["inference_p99_ms"] == pytest.approx(133.0, abs=1.0) and before["inference_requests"] >= 200
    try:
        lab_cli("fault", probe, "nccl-slow")
        lab_cli("fault", probe, "inference-slow")
        slow = read(entry, tmp_path / "slow.json", entry["nccl_hosts"])
    finally:
        lab_cli("clear", probe)
    assert slow["nccl_busbw_gbps"] < 0.8 * before["nccl_busbw_gbps"]  # the fault: 30 % below
    assert slow["inference_p99_ms"] > 3 * before["inference_p99_ms"]  # the fault: six times slower
    found = {h["condition"]: h for h in fleet_run.halts(lab.cell, before, slow, plan["halt_policy"], wanted)}
    assert set(found) == {"nccl_busbw_gbps", "inference_p99_ms"}, found
    assert found["nccl_busbw_gbps"]["message"].startswith("%s: nccl_busbw_gbps fell from %g to %g" % (
        lab.cell, before["nccl_busbw_gbps"], slow["nccl_busbw_gbps"]))
    assert found["inference_p99_ms"]["after"] == slow["inference_p99_ms"]
    # cleared, a second clean reading (not the first compared with itself) passes every rule
    again = read(entry, tmp_path / "again.json", entry["nccl_hosts"])
    assert again["unmeasured"] == {}, again["unmeasured"]
    assert fleet_run.halts(lab.cell, before, again, plan["halt_policy"], wanted) == []
    # the only real probe fails (gpu-missing: all_reduce_perf cannot start, and ends with nccl-tests' own
    # " .. HOST pid N: Test failure common.cu:LINE"), one is not in the inventory and one is
    # a group (its hosts are no probes: none of them runs all_reduce_perf): the readings are still written, with the
    # NCCL reading unmeasured, naming all three
    try:
        lab_cli("fault", probe, "gpu-missing")
        missing = read(entry, tmp_path / "missing.json", [probe, "gpu-zz", "kube_control_plane"])
    finally:
        lab_cli("clear", probe)
    assert missing["nccl_busbw_gbps"] is None
    why = missing["unmeasured"]["nccl_busbw_gbps"]
    assert why.startswith("%s: nccl_error Test failure common.cu:1058 (pid " % probe), why
    assert "gpu-zz: no all_reduce_perf result" in why, why
    assert "kube_control_plane: no all_reduce_perf result (not a host of the cell's inventory - a group's" in why
    assert set(missing["nccl_busbw_by_host"]) == {probe, "gpu-zz", "kube_control_plane"}, missing
    halted = fleet_run.halts(lab.cell, before, missing, plan["halt_policy"], ["nccl_busbw_gbps"])
    assert "nccl_busbw_gbps was not measured after the upgrade (%s: nccl_error Test failure common.cu:1058" % probe \
        in halted[0]["message"], halted
