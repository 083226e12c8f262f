"""plugins/action/controller.py, the action of every module since the per-module actions went: what those did is
still done. The cell action refuses an option it does not know by name (its ``_VALID_ARGS``); fleet_plan is given the
controller's working directory as ``working_dir`` (its old action's job) when it runs as its own process and in the
worker; every other module's arguments reach it as the task gave them."""
from __future__ import annotations

import os
import types

import pytest
from ansible.errors import AnsibleActionFail

from ansible_collections.gpufleet.upgrade.plugins.action import controller


def action(module, args, transport="local", async_val=0):
    task = types.SimpleNamespace(args=args, async_val=async_val, check_mode=False, delegate_to=None,
                                 action="gpufleet.upgrade.%s" % module)
    connection = types.SimpleNamespace(_shell=types.SimpleNamespace(tmpdir="/tmp"), transport=transport,
                                       has_native_async=False)
    play_context = types.SimpleNamespace(become=False)
    templar = types.SimpleNamespace(template=lambda value: value)
    return controller.ActionModule(task, connection, play_context, None, templar, None)


def test_the_cell_refuses_an_option_it_does_not_know_by_name():
    with pytest.raises(AnsibleActionFail, match="Invalid options for gpufleet.upgrade.cell: no_such_option"):
        action("cell", {"no_such_option": 1}).run(task_vars={})


def test_the_cell_refuses_async_as_its_old_action_did():
    with pytest.raises(AnsibleActionFail, match="does not support async"):
        action("cell", {}, async_val=30).run(task_vars={})


def test_fleet_plan_is_given_the_controllers_working_directory_when_it_runs_as_its_own_process(monkeypatch):
    cwd = os.getcwd()
    runs = os.path.join(cwd, "runs")
    for module, args, expected in (
            ("fleet_plan", {"fleet": {}}, {"fleet": {}, "working_dir": cwd}),
            ("fleet_plan", {"fleet": {}, "working_dir": "runs"}, {"fleet": {}, "working_dir": runs}),
            ("baseline_info", {"path": "p.yml"}, {"path": "p.yml"})):
        sent = {}

        def execute(module_args, sent=sent, **_):
            sent["args"] = module_args
            return {}

        plugin = action(module, args, transport="ssh")  # another host: the module runs as its own process
        monkeypatch.setattr(plugin, "_execute_module", execute)
        monkeypatch.setattr(plugin, "_remove_tmp_path", lambda path: None)
        plugin.run(task_vars={})
        assert sent["args"] == expected, module


def test_fleet_plan_is_given_the_controllers_working_directory_in_the_worker():
    # the worker path builds the module's arguments the same way (DirectActionModule._module_args)
    assert action("fleet_plan", {"fleet": {}})._module_args() == {"fleet": {}, "working_dir": os.getcwd()}
    assert action("fleet_plan", {"fleet": {}, "working_dir": "/elsewhere"})._module_args()["working_dir"] == \
        "/elsewhere"
    assert action("gang", {"action": "stop"})._module_args() == {"action": "stop"}
