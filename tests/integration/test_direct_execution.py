"""gpufleet modules run in Ansible's worker process when their task runs on the controller (plugins/plugin_utils/
direct.py): the same results as a module process of their own, item by item, with the task's environment."""
from __future__ import annotations

import json

from tests.integration.test_playbooks import ROOT, ansible


def results(tmp_path, direct):
    out = tmp_path / ("direct-%s.json" % direct)
    env = {"ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"), "GPUFLEET_DIRECT_EXECUTION": direct, "KUBECONFIG": None,
           "HOME": str(tmp_path / "home"), "GPUFLEET_CHANGE_RECORD_DIR": str(tmp_path / "records")}
    proc = ansible("ansible-playbook", "-vvvv", "tests/integration/playbooks/direct.yml", "-e",
                   "fixtures=%s" % (ROOT / "tests" / "fixtures"), "-e", "out=%s" % out, env_extra=env, check=True)
    return json.loads(out.read_text()), proc.stdout


def without_timing(value):
    """The results less what differs between any two runs (the loop bookkeeping is the same in both)."""
    if isinstance(value, dict):
        return {k: without_timing(v) for k, v in value.items() if k not in ("_ansible_no_log",)}
    if isinstance(value, list):
        return [without_timing(v) for v in value]
    return value


def test_in_the_worker_the_results_are_those_of_a_module_process(tmp_path):
    direct, direct_log = results(tmp_path, "1")
    spawned, spawned_log = results(tmp_path, "0")
    assert "gpufleet: gpufleet.upgrade.baseline_info runs in the worker process" in direct_log
    assert "runs in the worker process" not in spawned_log
    assert "gpufleet: gpufleet.upgrade.baseline_info runs as its own process (GPUFLEET_DIRECT_EXECUTION=0)" \
        in spawned_log
    assert without_timing(direct) == without_timing(spawned)

    # what both returned: each item its own arguments, a clear refusal, the environment of its own item
    looped = direct["looped"]
    assert ["baseline" in r for r in looped] == [True, False, True], looped
    assert looped[0]["baseline"] == looped[2]["baseline"] and looped[0]["baseline"]["dcgm"]["level"] == 1
    assert "/nonexistent/pool.yml: baseline file not found" in looped[1]["msg"]
    assert "no_such_option" in direct["unknown"]["msg"]
    for item, port in zip(direct["env"], (1, 9)):
        assert "port=%d)" % port in item["msg"], item["msg"]
    assert direct["bare"]["msg"].startswith("no cluster credentials"), direct["bare"]
