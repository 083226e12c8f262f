"""meta/runtime.yml routes every module to the one action plugin, plugins/action/controller.py. A module left out
would run without its action: the cell action would not exist, the others would lose direct execution and
fleet_plan its working directory. That Ansible's loader follows the routing is checked where Ansible runs
(tests/integration/test_playbooks.py)."""
from __future__ import annotations

import pathlib

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[3]
MODULES = sorted(p.stem for p in (ROOT / "plugins" / "modules").glob("*.py") if p.stem != "__init__")


def test_plugins_action_holds_one_plugin():
    assert sorted(p.name for p in (ROOT / "plugins" / "action").glob("*.py")) == ["controller.py"]


def test_every_module_and_only_modules_are_routed_to_the_controller_action():
    routing = yaml.safe_load((ROOT / "meta" / "runtime.yml").read_text())["plugin_routing"]["modules"]
    assert sorted(routing) == MODULES
    assert {name: entry for name, entry in routing.items()
            if entry != {"action_plugin": "gpufleet.upgrade.controller"}} == {}

