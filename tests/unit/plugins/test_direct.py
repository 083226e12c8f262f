"""plugins/plugin_utils/direct.py: when a module may run in the worker, and how it runs there."""
from __future__ import annotations

import json
import os
import sys
import types

from kubernetes.client import Configuration
from kubernetes.config import kube_config

from ansible_collections.gpufleet.upgrade.plugins.plugin_utils import direct


def test_only_controller_tasks_with_the_controllers_python_run_in_the_worker(tmp_path):
    py = sys.executable
    assert direct.ineligible("local", False, 0, py, py, {}) == ""
    assert direct.ineligible("local", False, 0, os.path.join(os.path.dirname(py), "python3"), py, {}) == ""
    assert direct.ineligible("ssh", False, 0, py, py, {}) == "connection ssh"
    assert direct.ineligible("local", True, 0, py, py, {}) == "become"
    assert direct.ineligible("local", False, 30, py, py, {}) == "async"
    assert direct.ineligible("local", False, 0, None, py, {}) == "no ansible_python_interpreter (discovery)"
    other = direct.ineligible("local", False, 0, "/usr/bin/python3.9", py, {})
    assert other.startswith("interpreter /usr/bin/python3.9")
    # a link elsewhere to the interpreter the controller's links to is another installation (a base Python
    # without the venv's packages), not the controller's
    (tmp_path / "python").symlink_to(os.path.realpath(py))
    assert direct.ineligible("local", False, 0, str(tmp_path / "python"), py, {}).startswith("interpreter ")
    # in one directory, the same interpreter by another name is the controller's; another interpreter is not
    venv = tmp_path / "venv"
    venv.mkdir()
    (venv / "python").symlink_to(os.path.realpath(py))
    (venv / "python3").symlink_to(venv / "python")
    (venv / "python3.9").write_text("#!/bin/sh\n")
    assert direct.ineligible("local", False, 0, str(venv / "python3"), str(venv / "python"), {}) == ""
    assert direct.ineligible("local", False, 0, str(venv / "python3.9"), str(venv / "python"), {}).startswith(
        "interpreter ")


def test_the_switch_keeps_direct_execution_only_when_unset_or_on():
    for on in ({}, {direct.SWITCH: "1"}, {direct.SWITCH: "true"}, {direct.SWITCH: " On "}):
        assert not direct.switched_off(on), on
    for off in ("0", "false", "No", "off", "", "disabled"):
        assert direct.switched_off({direct.SWITCH: off}), off
        assert direct.ineligible("local", False, 0, sys.executable, sys.executable, {direct.SWITCH: off}) == \
            "%s=%s" % (direct.SWITCH, off)


def test_a_run_has_the_tasks_environment_and_a_fresh_client_then_all_is_as_it_was(monkeypatch, tmp_path):
    monkeypatch.setenv("GPUFLEET_T_KEPT", "before")
    monkeypatch.delenv("GPUFLEET_T_NEW", raising=False)
    monkeypatch.setenv("KUBECONFIG", "/controller/kubeconfig")
    cwd = os.getcwd()
    before = kube_config.KUBE_CONFIG_DEFAULT_LOCATION
    leftover = Configuration()
    leftover.verify_ssl = False
    Configuration.set_default(leftover)  # an earlier item's load_kube_config
    with direct.isolated({"GPUFLEET_T_KEPT": "during", "GPUFLEET_T_NEW": 7, "KUBECONFIG": "/task/kubeconfig"}):
        assert os.environ["GPUFLEET_T_KEPT"] == "during" and os.environ["GPUFLEET_T_NEW"] == "7"
        assert kube_config.KUBE_CONFIG_DEFAULT_LOCATION == "/task/kubeconfig"
        assert Configuration.get_default_copy().verify_ssl is True
        key = kube_config._create_temp_file_with_content(b"inline key")  # pylint: disable=protected-access
        assert os.path.exists(key)
        os.environ["GPUFLEET_T_MODULE"] = "set by the module"
        os.chdir(tmp_path)
    assert os.environ["GPUFLEET_T_KEPT"] == "before" and "GPUFLEET_T_NEW" not in os.environ
    assert "GPUFLEET_T_MODULE" not in os.environ and os.getcwd() == cwd
    assert not os.path.exists(key)
    assert kube_config.KUBE_CONFIG_DEFAULT_LOCATION == "/controller/kubeconfig"
    assert Configuration.get_default_copy().verify_ssl is True
    kube_config.KUBE_CONFIG_DEFAULT_LOCATION = before


def test_a_failed_restore_is_a_warning_and_the_others_still_run(monkeypatch, tmp_path, capsys):
    gone = tmp_path / "gone"
    gone.mkdir()
    cwd = os.getcwd()
    os.chdir(gone)
    try:
        with direct.isolated({"GPUFLEET_T_TASK": "1"}):
            key = kube_config._create_temp_file_with_content(b"inline key 2")  # pylint: disable=protected-access
            gone.rmdir()  # the working directory to go back to is gone
    finally:
        os.chdir(cwd)
    assert not os.path.exists(key) and "GPUFLEET_T_TASK" not in os.environ
    assert "could not restore the working directory" in capsys.readouterr().err


def fake_module(body):
    """A module file as AnsibleModule-based modules are written: main() builds AnsibleModule and exits."""
    from ansible.module_utils.basic import AnsibleModule

    def main():
        module = AnsibleModule(argument_spec={"n": {"type": "int", "required": True}}, supports_check_mode=True)
        body(module)

    return types.SimpleNamespace(main=main)


def run(module, **args):
    args.setdefault("_ansible_check_mode", False)
    stdout, stderr = direct.run_main(module, args)
    return json.loads(stdout.strip()), stderr


def test_a_module_reads_its_own_arguments_each_run_and_its_stderr_is_kept_apart():
    def body(module):
        if module.params["n"] == 1:
            sys.stderr.write("a library's warning\n")
        module.exit_json(changed=False, n=module.params["n"], check=module.check_mode)

    module = fake_module(body)
    (first, err1), (second, err2) = run(module, n=1), run(module, n=2, _ansible_check_mode=True)
    assert first["n"] == 1 and not first["check"] and err1 == "a library's warning\n"
    assert second["n"] == 2 and second["check"] and err2 == ""


def test_a_refusal_and_a_crash_are_failures_with_their_message():
    module = fake_module(lambda m: m.fail_json(msg="refused: n"))
    refused, _ = run(module, n=1)
    assert refused["failed"] and refused["msg"] == "refused: n"
    bad, _ = run(module, n="not a number")
    assert bad["failed"] and "n" in bad["msg"]

    def crash(module):
        raise KeyError("boom")
    crashed, _ = run(fake_module(crash), n=1)
    assert crashed["failed"] and crashed["msg"].startswith("MODULE FAILURE: KeyError: 'boom'")
    assert "Traceback" in crashed["exception"]


def test_an_ansible_core_without_the_internals_runs_every_module_as_its_own_process(monkeypatch):
    assert direct.INTERNALS_MISSING == ""  # the tested ansible-core has them all
    monkeypatch.setattr(direct, "INTERNALS_MISSING", "ansible-core 2.99.0 lacks what direct execution uses (x)")
    assert direct.ineligible("local", False, 0, sys.executable, sys.executable, {}) == \
        "ansible-core 2.99.0 lacks what direct execution uses (x)"
