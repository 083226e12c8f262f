"""gpufleet modules run in Ansible's worker process when their task runs on the controller (plugins/plugin_utils/
direct.py): the same results as a module process of their own, item by item, with the task's environment and
kubeconfig, leaving no key files behind."""
from __future__ import annotations

import base64
import json

import yaml

from tests.integration.test_playbooks import ROOT, ansible

KEY_MARK = "GPUFLEET-DIRECT-TEST-KEY"  # the inline client key's content, looked for in TMPDIR after each run


def kubeconfig(path, port, **user):
    doc = {"apiVersion": "v1", "kind": "Config", "current-context": "a",
           "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:%d" % port,
                                                  "insecure-skip-tls-verify": True}}],
           "contexts": [{"name": "a", "context": {"cluster": "c", "user": "u"}}],
           "users": [{"name": "u", "user": user or {"token": "not-a-token"}}]}
    path.write_text(yaml.safe_dump(doc))
    return path


def results(tmp_path, direct):
    out, tmp = tmp_path / ("direct-%s.json" % direct), tmp_path / ("tmp-%s" % direct)
    tmp.mkdir()
    inline = base64.b64encode(("-----BEGIN PRIVATE KEY-----\n%s\n-----END PRIVATE KEY-----\n" % KEY_MARK).encode())
    # TMPDIR: the controller's, so the worker's (and a module process's) temporary files land in `tmp`
    env = {"ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"), "GPUFLEET_DIRECT_EXECUTION": direct, "TMPDIR": str(tmp),
           "KUBECONFIG": str(kubeconfig(tmp_path / "controller.kubeconfig", 9)), "HOME": str(tmp_path / "home"),
           "GPUFLEET_CHANGE_RECORD_DIR": str(tmp_path / "records")}
    extra = {"fixtures": str(ROOT / "tests" / "fixtures"), "out": str(out),
             "task_kubeconfig": str(kubeconfig(tmp_path / "task.kubeconfig", 1)),
             "inline_kubeconfig": str(kubeconfig(tmp_path / "inline.kubeconfig", 3, **{
                 "client-certificate-data": inline.decode(), "client-key-data": inline.decode()}))}
    proc = ansible("ansible-playbook", "-vvvv", "tests/integration/playbooks/direct.yml", "-e", json.dumps(extra),
                   env_extra=env, check=True)
    left = [p for p in tmp.rglob("*") if p.is_file() and KEY_MARK in p.read_text(errors="replace")]
    return json.loads(out.read_text()), proc.stdout, left


def test_in_the_worker_the_results_are_those_of_a_module_process(tmp_path):
    direct, direct_log, direct_left = results(tmp_path, "1")
    spawned, spawned_log, spawned_left = results(tmp_path, "0")
    # three loop items, the unknown option, and the task delegated from the SSH host
    assert direct_log.count("gpufleet: gpufleet.upgrade.baseline_info runs in the worker process") == 5
    assert "gpufleet: gpufleet.upgrade.cluster_identity runs in the worker process" in direct_log
    assert "runs in the worker process" not in spawned_log
    assert "gpufleet: gpufleet.upgrade.baseline_info runs as its own process (GPUFLEET_DIRECT_EXECUTION=0)" \
        in spawned_log
    assert direct == spawned

    # what both returned: each item its own arguments, a clear refusal, the environment of its own item
    looped = direct["looped"]
    assert ["baseline" in r for r in looped] == [True, False, True], looped
    assert looped[0]["baseline"] == looped[2]["baseline"] and looped[0]["baseline"]["dcgm"]["level"] == 1
    assert "/nonexistent/pool.yml: baseline file not found" in looped[1]["msg"]
    assert "no_such_option" in direct["unknown"]["msg"]
    for item, port in zip(direct["env"], (1, 9)):
        assert "port=%d)" % port in item["msg"], item["msg"]
    # the task's KUBECONFIG (port 1), not the controller's (port 9) that the client read when ansible-playbook
    # imported it
    assert "port=1)" in direct["task_kubeconfig"]["msg"], direct["task_kubeconfig"]["msg"]
    # the inline key's files are gone after the run, in both ways; the next item used only its own credentials
    assert direct_left == [] and spawned_left == []
    assert "port=7)" in direct["inline"][1]["msg"], direct["inline"][1]["msg"]
    # with nothing given, the controller's KUBECONFIG (port 9)
    assert "port=9)" in direct["bare"]["msg"], direct["bare"]["msg"]
    assert direct["delegated"]["baseline"]["dcgm"]["level"] == 1
