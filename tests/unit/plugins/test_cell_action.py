"""The cell action (plugins/action/controller.py, plugins/plugin_utils/cell_action.py): the action reads the inventory
as Ansible hands it over, and every failure - a refused input or an exception nobody anticipated - comes back as a
failed result naming the action, never a traceback."""
from __future__ import annotations

import pathlib
import types

from ansible_collections.gpufleet.upgrade.plugins.action import controller
from ansible_collections.gpufleet.upgrade.plugins.module_utils import cell as cell_utils

BASELINES = str(pathlib.Path(__file__).resolve().parents[2] / "fixtures" / "baselines")
HOSTS = {"cp-1": {}, "gpu-a1": {"gpufleet_pool": "h100-train", "gpufleet_failure_domain": "rs-a"},
         "gpu-b1": {"gpufleet_pool": "h100-train", "gpufleet_failure_domain": "rs-b"}}


def task_vars(**cell_vars):
    """What Ansible gives the action on cp-1: the groups, every host's variables, and the cell variables."""
    common = dict({"gpufleet_cluster_name": "lab", "gpufleet_target_version": "v1.36.3",
                   "gpufleet_baseline_dir": BASELINES, "gpufleet_wave_caps": {"max_gpu_fraction": 0.5}}, **cell_vars)
    return dict(common, groups={"kube_control_plane": ["cp-1"], "etcd": ["cp-1"], "gpu_nodes": ["gpu-a1", "gpu-b1"]},
                hostvars={h: dict(common, **hv) for h, hv in HOSTS.items()})


def run(tv, **args):
    task = types.SimpleNamespace(args=args, async_val=0, check_mode=False, action="gpufleet.upgrade.cell")
    connection = types.SimpleNamespace(_shell=types.SimpleNamespace(tmpdir="/tmp"))
    templar = types.SimpleNamespace(template=lambda value: value)
    action = controller.ActionModule(task, connection, None, None, templar, None)
    return action.run(task_vars=tv)


def test_the_action_builds_the_cell():
    result = run(task_vars())
    assert not result.get("failed"), result
    assert result["cell"]["run_id"] == "gpufleet-lab-v1.36.3" and result["cell"]["gpu_nodes"] == ["gpu-a1", "gpu-b1"]


def test_a_list_where_the_caps_mapping_belongs_is_a_clear_failure_naming_the_variable():
    result = run(task_vars(gpufleet_wave_caps=[0.5]))
    assert result["failed"] and result["error_type"] == "InputError"
    assert result["msg"].startswith("gpufleet_wave_caps: expected a mapping"), result["msg"]


def test_any_exception_is_a_failed_result_naming_the_action_with_the_traceback_only_in_exception(monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("boom")
    monkeypatch.setattr(cell_utils, "build", broken)
    result = run(task_vars())
    assert result["failed"] and result["error_type"] == "UnexpectedError"
    assert "gpufleet.upgrade.cell failed on its input: RuntimeError: boom" in result["msg"]
    assert "Nothing was changed" in result["msg"] and "Traceback" not in result["msg"]
    assert "Traceback (most recent call last)" in result["exception"] and "boom" in result["exception"]


def test_the_actions_own_options_are_type_checked():
    limited = dict(task_vars(), ansible_limit="gpu-a1")
    refused = run(limited, allow_limit="no")  # bool("no") was True: the limit went through
    assert refused["failed"] and "--limit gpu-a1" in refused["msg"]
    assert not run(limited, allow_limit="yes").get("failed")
    bad = run(task_vars(), allow_limit="maybe")
    assert bad["failed"] and "allow_limit: expected true or false" in bad["msg"]
    listed = run(task_vars(gpufleet_baseline_dir=[BASELINES]))
    assert listed["failed"] and listed["msg"].startswith("gpufleet_baseline_dir: expected a directory"), listed
