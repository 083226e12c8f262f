# Copyright: gpufleet contributors
# Apache License 2.0
"""The one action plugin of gpufleet.upgrade. meta/runtime.yml routes every module to it
(``plugin_routing.modules.NAME.action_plugin``), as network collections route their modules to one action.

- ``cell`` reads the inventory on the controller and returns the checked cell (plugins/plugin_utils/cell_action.py);
- every other module runs its own ``main()`` in Ansible's worker process when its task runs on the controller, and
  as its own process otherwise (plugins/plugin_utils/direct.py says when and why).
"""
from __future__ import annotations

from ansible.plugins.action import ActionBase

from ansible_collections.gpufleet.upgrade.plugins.plugin_utils import cell_action
from ansible_collections.gpufleet.upgrade.plugins.plugin_utils.direct import DirectActionModule, module_name


class ActionModule(DirectActionModule):

    def run(self, tmp=None, task_vars=None):
        if module_name(self._task) != "cell":
            return super().run(tmp, task_vars)
        self._VALID_ARGS = cell_action.VALID_ARGS  # ActionBase.run refuses any other option by name
        self._supports_async = False  # and async, as the cell's own action did (it returns at once, with data)
        result = ActionBase.run(self, tmp, task_vars)  # pylint: disable=bad-super-call
        return cell_action.run(result, self._task.args, task_vars or {}, self._templar.template, self._display)
