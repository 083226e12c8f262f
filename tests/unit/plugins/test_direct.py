"""plugins/plugin_utils/direct.py: when a module may run in the worker, and how it runs there."""
from __future__ import annotations

import json
import os
import sys
import types

from ansible_collections.gpufleet.upgrade.plugins.plugin_utils import direct


def test_only_controller_tasks_with_the_controllers_python_run_in_the_worker():
    py = sys.executable
    assert direct.ineligible("local", False, 0, None, py, {}) == ""
    assert direct.ineligible("local", False, 0, py, py, {}) == ""
    assert direct.ineligible("ssh", False, 0, None, py, {}) == "connection ssh"
    assert direct.ineligible("local", True, 0, None, py, {}) == "become"
    assert direct.ineligible("local", False, 30, None, py, {}) == "async"
    other = direct.ineligible("local", False, 0, "/usr/bin/python3.9", py, {})
    assert other.startswith("interpreter /usr/bin/python3.9")
    for off in ("0", "false", "No", "off"):
        switched = direct.ineligible("local", False, 0, None, py, {direct.SWITCH: off})
        assert switched == "%s=%s" % (direct.SWITCH, off)
    assert direct.ineligible("local", False, 0, None, py, {direct.SWITCH: "1"}) == ""


def test_the_environment_is_the_tasks_for_the_run_then_as_it_was(monkeypatch):
    monkeypatch.setenv("GPUFLEET_T_KEPT", "before")
    monkeypatch.delenv("GPUFLEET_T_NEW", raising=False)
    with direct.environment({"GPUFLEET_T_KEPT": "during", "GPUFLEET_T_NEW": 7}):
        assert os.environ["GPUFLEET_T_KEPT"] == "during" and os.environ["GPUFLEET_T_NEW"] == "7"
    assert os.environ["GPUFLEET_T_KEPT"] == "before" and "GPUFLEET_T_NEW" not in os.environ


def fake_module(body):
    """A module file as AnsibleModule-based modules are written: main() builds AnsibleModule and exits."""
    from ansible.module_utils.basic import AnsibleModule

    def main():
        module = AnsibleModule(argument_spec={"n": {"type": "int", "required": True}}, supports_check_mode=True)
        body(module)

    return types.SimpleNamespace(main=main)


def run(module, **args):
    args.setdefault("_ansible_check_mode", False)
    return json.loads(direct.run_main(module, args).strip())


def test_a_module_reads_its_own_arguments_each_run_and_its_warnings_are_its_own(capfd):
    def body(module):
        if module.params["n"] == 1:
            module.warn("only the first run warns")
        module.exit_json(changed=False, n=module.params["n"], check=module.check_mode)

    module = fake_module(body)
    first = run(module, n=1)
    assert "only the first run warns" in capfd.readouterr().err  # on the controller, shown at once
    second = run(module, n=2, _ansible_check_mode=True)
    assert "warns" not in capfd.readouterr().err
    assert first["n"] == 1 and not first["check"]
    assert second["n"] == 2 and second["check"]


def test_a_refusal_and_a_crash_are_failures_with_their_message():
    module = fake_module(lambda m: m.fail_json(msg="refused: n"))
    assert run(module, n=1)["failed"] and run(module, n=1)["msg"] == "refused: n"
    bad = run(module, n="not a number")
    assert bad["failed"] and "n" in bad["msg"]

    def crash(module):
        raise KeyError("boom")
    crashed = run(fake_module(crash), n=1)
    assert crashed["failed"] and crashed["msg"].startswith("MODULE FAILURE: KeyError: 'boom'")
    assert "Traceback" in crashed["exception"]
