"""The wave benchmark's arithmetic (benchmarks/bench_wave.py) and its timing callback's reading of tool times: what
counts as the tools' time, the lower bound from the waves, the expected loss over the checkpoint's phase, the
goals. No lab: the lines are what benchmarks/callbacks/bench_timing.py writes."""
from __future__ import annotations

import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "benchmarks" / "callbacks"))

import bench_timing
import bench_wave


def line(host, task, wall, action="gpufleet.upgrade.node_state", tool=None, play="Preflight", role="", start=0.0,
         status="ok", wave=""):
    return {"play": play, "role": role, "task": task, "action": action, "host": host, "status": status,
            "start": start, "end": start + wall, "wall": wall, "tool": tool, "wave": wave}


@pytest.mark.parametrize("res,seconds", [
    ({"delta": "0:00:01.500000"}, 1.5), ({"delta": "1:02:03.0"}, 3723.0), ({"elapsed": 7}, 7.0),
    ({"delta": "garbage"}, None), ({"delta": "a:b:c"}, None), ({"elapsed": True}, None), ({}, None)])
def test_tool_seconds(res, seconds):
    assert bench_timing.tool_seconds(res) == seconds


def test_essential_counts_tools_and_waits_not_the_controller():
    assert bench_wave.essential(line("h", "t", 2.0, action="ansible.builtin.command", tool=1.25)) == 1.25
    assert bench_wave.essential(line("h", "t", 1.0, action="ansible.builtin.command", tool=5.0)) == 1.0  # capped
    assert bench_wave.essential(line("h", "t", 9.0, action="gpufleet.upgrade.node_drain")) == 9.0
    assert bench_wave.essential(line("h", "t", 0.8, action="ansible.builtin.set_fact")) == 0.0
    assert bench_wave.essential(line("h", "t", 3.0, action="gpufleet.upgrade.node_drain", status="skipped")) == 0.0


def test_lower_bound_slowest_host_per_task_and_per_wave():
    lines = [
        # a task on every host at once: the slowest counts once
        line("cp-1", "snapshot", 4.0, action="ansible.builtin.command", tool=3.0, start=1.0),
        line("gpu-a1", "snapshot", 4.0, action="ansible.builtin.command", tool=2.0, start=1.0),
        # the control plane one host after another: they add up
        line("cp-1", "apply", 10.0, action="ansible.builtin.command", tool=8.0, role="kubeadm_upgrade",
             play="Upgrade the control plane", start=10.0),
        line("cp-2", "apply", 6.0, action="ansible.builtin.command", tool=5.0, role="kubeadm_upgrade",
             play="Upgrade the control plane", start=20.0),
        # two waves: the slowest node of each
        line("gpu-a1", "drain", 7.0, action="gpufleet.upgrade.node_drain", play=bench_wave.WAVE_PLAY, wave="canary"),
        line("gpu-a2", "drain", 3.0, action="gpufleet.upgrade.node_drain", play=bench_wave.WAVE_PLAY, wave="rs-b"),
        line("gpu-b1", "drain", 5.0, action="gpufleet.upgrade.node_drain", play=bench_wave.WAVE_PLAY, wave="rs-b"),
        line("gpu-b1", "note", 2.0, action="ansible.builtin.set_fact", play=bench_wave.WAVE_PLAY, wave="rs-b"),
    ]
    waves = bench_wave.plan_waves(lines, ["gpu-a1", "gpu-a2", "gpu-b1"])
    assert waves == [["gpu-a1"], ["gpu-a2", "gpu-b1"]]
    bound = bench_wave.lower_bound(lines, waves, ["cp-1", "cp-2"])
    assert bound == {"control_plane": 13.0, "other_steps": 3.0, "waves": 12.0, "total": 28.0}


def test_plan_waves_fail_closed_when_a_node_ran_in_no_wave():
    lines = [line("gpu-a1", "drain", 1.0, play=bench_wave.WAVE_PLAY, wave="canary"),
             line("gpu-a2", "drain", 1.0, play=bench_wave.WAVE_PLAY)]  # no gpufleet_wave seen
    with pytest.raises(SystemExit, match="no gpufleet_wave seen for gpu-a2"):
        bench_wave.plan_waves(lines, ["gpu-a1", "gpu-a2"])


def test_retried_task_counts_its_waits_as_essential():
    polled = dict(line("cp-1", "soak", 16.0, action="ansible.builtin.command", tool=0.5), attempts=4, delay=5.0)
    assert bench_wave.essential(polled) == 15.5
    read = dict(line("gpu-a1", "wait Node", 7.0, action="kubernetes.core.k8s_info"), attempts=3, delay=3.0)
    assert bench_wave.essential(read) == 6.0


def restart(at, since, gpus=16):
    return {"kind": "restart", "at": at, "computing_since": since, "gpus": gpus, "lost_gpu_seconds": -1.0}


def test_phase_loss_and_its_expectation():
    # checkpoints every 600 s from t=0: a restart at 1300 after computing since 1000 loses 100 s (checkpoint 1200)
    assert bench_wave.phase_loss([restart(1300.0, 1000.0)], 600.0, 0.0) == 1600.0
    # checkpoints from t=250 (850, 1450...): the last is 850, before the gang started at 1000: 300 s lost
    assert bench_wave.phase_loss([restart(1300.0, 1000.0)], 600.0, 250.0) == 300.0 * 16
    # over the phase: lost = min(since checkpoint, 300) with "since" uniform on [0, 600): mean 225 s
    expected = bench_wave.expected_loss([restart(1300.0, 1000.0)], 600.0, steps=600)
    assert expected == pytest.approx(16 * 225.0, rel=0.01)
    # a second restart 10 s after the gang computed again loses at most those 10 s
    two = [restart(1300.0, 1000.0), restart(1320.0, 1310.0)]
    assert bench_wave.expected_loss(two, 600.0, steps=600) - expected <= 16 * 10 + 1e-6
    # a stop (checkpoint first) loses what the lab logged, at any phase
    stop = [{"kind": "stop", "at": 1300.0, "computing_since": 1000.0, "gpus": 16, "lost_gpu_seconds": 32.0}]
    assert bench_wave.expected_loss(stop, 600.0) == 32.0


def _row(ratio=1.05, lost=32.0, restarts=0, overhead=None, events=None):
    return {"ratio": ratio, "lost_gpu_seconds": lost, "gang_restarts": restarts,
            "overhead_per_host_stage_s": overhead or {"Upgrade a wave of GPU nodes | drain": 0.4},
            "events": events if events is not None else [{"lost_gpu_seconds": lost}]}


def test_goals_met_and_missed_name_what_holds_back():
    peer = dict(_row(ratio=2.0, lost=900.0), expected_lost_gpu_seconds=2400.0)
    met = bench_wave.goals({"gpufleet": _row(), "peer": peer}, stop_bound=48.0)
    assert [g["met"] for g in met] == [True, True, True, True]
    missed = bench_wave.goals({"gpufleet": _row(ratio=1.4, lost=200.0, overhead={"X | gpu_validate": 2.5}),
                               "peer": peer}, stop_bound=48.0)
    assert [g["met"] for g in missed] == [False, False, False, False]
    assert "X | gpu_validate" in missed[0]["held_back_by"] and missed[3]["held_back_by"] == "X | gpu_validate"
    # a restart of gpufleet's gang fails the loss goal even when it lost little
    assert not bench_wave.goals({"gpufleet": _row(restarts=1)}, stop_bound=48.0)[1]["met"]
    # a peer that lost nothing met no gang: the comparison fails, it does not pass as "no loss"
    idle = dict(_row(lost=0.0), expected_lost_gpu_seconds=0.0)
    compared = bench_wave.goals({"gpufleet": _row(lost=0.0), "peer": idle}, stop_bound=48.0)[2]
    assert not compared["met"] and "met no gang" in compared["held_back_by"]
