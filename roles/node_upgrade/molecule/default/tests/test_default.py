"""kubeadm, kubelet and kubectl at the target and held; the Node object reports the new kubelet; the real kubeadm
rewrote the kubelet's config with the pool's settings from the role's patch, and the restarted kubelet runs them
(its /configz through the apiserver)."""
import json
import os
import subprocess

import yaml

TO = os.environ["GPUFLEET_LAB_TO"]
DEB = TO.lstrip("v") + "-1.1"


def test_packages_at_target_and_held(host):
    for pkg in ("kubeadm", "kubelet", "kubectl"):
        assert host.package(pkg).version == DEB
    assert {"kubeadm", "kubelet", "kubectl"} <= set(host.check_output("apt-mark showhold").split())


def test_node_reports_the_new_kubelet():
    kubeconfig = os.environ["GPUFLEET_LAB_KUBECONFIG"]  # the lab cell's (tests/molecule-run, `bin/lab env`)
    kubectl = os.path.join(os.environ["GPUFLEET_LAB_CACHE"], "bin", "kubernetes-" + TO, "kubectl")
    node = json.loads(subprocess.run([kubectl, "--kubeconfig", kubeconfig, "get", "node", "gpu-b2", "-o", "json"],
                                     check=True, capture_output=True, text=True).stdout)
    assert node["status"]["nodeInfo"]["kubeletVersion"] == TO


POOL = yaml.safe_load(open(os.path.join(os.environ["GPUFLEET_ROOT"], "inventories", "lab", "baselines",
                                      "h100-train.yml")).read())["node"]["kubelet_config"]


def test_kubeadm_kept_the_pool_settings_through_its_patch(host):
    patch = host.file("/etc/kubernetes/gpufleet-patches/kubeletconfiguration+merge.json")
    assert json.loads(patch.content_string) == POOL and patch.mode == 0o600
    config = yaml.safe_load(host.file("/var/lib/kubelet/config.yaml").content_string)
    assert {k: config.get(k) for k in POOL} == POOL
    backups = host.check_output("ls /etc/kubernetes/tmp")  # the real kubeadm backs the old config up first
    assert "kubeadm-kubelet-config" in backups


def test_the_restarted_kubelet_runs_them():
    kubeconfig = os.environ["GPUFLEET_LAB_KUBECONFIG"]
    kubectl = os.path.join(os.environ["GPUFLEET_LAB_CACHE"], "bin", "kubernetes-" + TO, "kubectl")
    configz = json.loads(subprocess.run([kubectl, "--kubeconfig", kubeconfig, "get", "--raw",
                                         "/api/v1/nodes/gpu-b2/proxy/configz"],
                                        check=True, capture_output=True, text=True).stdout)["kubeletconfig"]
    assert {k: configz[k] for k in POOL} == POOL
