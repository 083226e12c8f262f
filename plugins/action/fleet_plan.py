# Copyright: gpufleet contributors
# Apache License 2.0
"""Action plugin for gpufleet.upgrade.fleet_plan: runs the module with the controller's working directory as
``working_dir``. A module on the local connection runs in the playbook's directory (inside an installed
collection), so without it a relative cell inventory and the default ``./out`` would be taken from there."""
from __future__ import annotations

import os

from ansible.plugins.action import ActionBase


class ActionModule(ActionBase):
    TRANSFERS_FILES = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        args = dict(self._task.args)
        args["working_dir"] = os.path.abspath(args.get("working_dir") or os.getcwd())  # the controller's, always
        result.update(self._execute_module(module_name="gpufleet.upgrade.fleet_plan", module_args=args,
                                           task_vars=task_vars))
        return result
