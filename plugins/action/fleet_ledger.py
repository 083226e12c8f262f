# Copyright: gpufleet contributors
# Apache License 2.0
"""gpufleet.upgrade.fleet_ledger runs in Ansible's worker process when its task runs on the controller
(plugins/plugin_utils/direct.py)."""
from __future__ import annotations

from ansible_collections.gpufleet.upgrade.plugins.plugin_utils.direct import DirectActionModule


class ActionModule(DirectActionModule):
    pass
