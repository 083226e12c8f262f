"""The kubelet's config, read for real: each GPU host's kubelet /configz through the lab's real apiservers (the
node proxy to the host's address on the lab's bridge), judged against the pool baseline; the real kubeadm's
`upgrade node` rewriting the config from the cluster's kubelet-config ConfigMap - without the pool's patch it drops
the pool's settings and the gate names each, with it they stay; the kubelet-config-drift fault; a stopped kubelet.
One host (gpu-a2) of the cell, put back as it was after each test."""
from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest
import yaml

from tests.lab.conftest import ROOT, lab_cli, podman_exec

pytestmark = pytest.mark.lab
BIN = pathlib.Path(sys.executable).parent
HOST = "gpu-a2"
POOL = yaml.safe_load((ROOT / "inventories" / "lab" / "baselines" / "h100-train.yml").read_text())["node"][
    "kubelet_config"]
# LAB ONLY (inventories/lab/group_vars/gpu_nodes.yml says why)
IGNORE = "--ignore-preflight-errors=" + ",".join(yaml.safe_load(
    (ROOT / "inventories" / "lab" / "group_vars" / "gpu_nodes.yml").read_text())[
        "node_upgrade_kubeadm_ignore_preflight_errors"])


def gate(lab):
    env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_CALLBACK_RESULT_FORMAT="json", PATH="%s:%s" % (BIN, os.environ["PATH"]))
    proc = subprocess.run([str(BIN / "ansible-playbook"), "-v", "tests/lab/playbooks/kubelet_gate.yml", "-i",
                           str(lab.inventory), "-e", "gate_node=%s" % HOST, "-e", "gpufleet_target_version=%s" %
                           lab.to_version], cwd=ROOT, env=env, capture_output=True, text=True, check=False,
                          timeout=300)
    return proc.returncode, " ".join(proc.stdout.split())


def on_host(*cmd: str) -> str:
    proc = podman_exec(HOST, *cmd)
    assert proc.returncode == 0, (cmd, proc.stdout[-2000:], proc.stderr[-2000:])
    return proc.stdout + proc.stderr


def kubeadm_node(patches: bool) -> str:
    """The real `kubeadm upgrade node` of the host's installed kubeadm (a worker: lab/simulators/kubeadm runs the
    real one), with or without the pool's settings as its kubeletconfiguration patch; then the kubelet restarts."""
    argv = ["kubeadm", "upgrade", "node", IGNORE]
    if patches:
        on_host("sh", "-c", "mkdir -p /tmp/pool-patches && cat > '/tmp/pool-patches/kubeletconfiguration+merge.json'"
                " <<'EOF'\n%s\nEOF" % json.dumps(POOL))
        argv += ["--patches", "/tmp/pool-patches"]
    out = on_host(*argv)
    on_host("systemctl", "restart", "kubelet")
    return out


@pytest.fixture
def host(lab):
    yield HOST
    lab_cli("clear", HOST, check=False)
    kubeadm_node(patches=True)  # the pool's settings back, as the host joined with them


def test_the_example_baseline_s_kubelet_gate_passes_through_the_apiserver_proxy(lab, host):
    assert POOL == yaml.safe_load((ROOT / "inventories" / "example" / "baselines" / "h100-train.yml").read_text())[
        "node"]["kubelet_config"]
    rc, out = gate(lab)
    assert rc == 0, out[-3000:]
    for key, value in POOL.items():  # judged, each against what the kubelet runs
        assert '"measured": %s, "name": "kubelet_config", "passed": true, "severity": "fail", "subject": ' \
               '"gpu-a2 %s"' % (json.dumps(value, sort_keys=True), key) in out, out[-3000:]


def test_without_the_patch_kubeadm_drops_the_pool_s_settings_and_the_gate_names_each(lab, host):
    out = kubeadm_node(patches=False)
    assert "[upgrade/kubelet-config] The kubelet configuration for this node was successfully upgraded!" in out
    rc, text = gate(lab)
    assert rc != 0
    for failure in ("gpu-a2 cpuManagerPolicy: check kubelet_config: measured none, baseline static",
                    "gpu-a2 memoryManagerPolicy: check kubelet_config: measured None, baseline Static",
                    "gpu-a2 topologyManagerPolicy: check kubelet_config: measured none, baseline single-numa-node"):
        assert failure in text, text[-3000:]
    out = kubeadm_node(patches=True)
    assert 'Applied patch of type "application/merge-patch+json" to target "kubeletconfiguration"' in out
    rc, text = gate(lab)
    assert rc == 0, text[-3000:]


def test_the_kubelet_config_drift_fault_fails_the_gate_naming_key_expected_and_actual(lab, host):
    lab_cli("fault", HOST, "kubelet-config-drift")
    on_host("systemctl", "restart", "kubelet")
    rc, text = gate(lab)
    assert rc != 0
    assert "node_gate gate failed: gpu-a2 topologyManagerPolicy: check kubelet_config: measured best-effort, " \
           "baseline single-numa-node" in text, text[-3000:]


def test_a_kubelet_that_does_not_answer_fails_the_read_naming_the_node(lab, host):
    on_host("systemctl", "stop", "kubelet")
    rc, text = gate(lab)
    assert rc != 0
    assert "the kubelet of gpu-a2 did not answer /configz through the apiserver" in text, text[-3000:]
    assert "HTTP 503" in text
    broken = podman_exec(HOST, "sh", "-c", "echo 'cpuManagerPolicy: [static]' >> /var/lib/kubelet/config.yaml && "
                                           "systemctl start kubelet")
    assert broken.returncode != 0  # the kubelet refuses its config, in the kubelet's words
    assert "Job for kubelet.service failed" in broken.stderr and "failed to load Kubelet config file " \
           "/var/lib/kubelet/config.yaml" in broken.stderr, broken.stderr
