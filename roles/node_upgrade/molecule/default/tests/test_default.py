"""kubeadm, kubelet and kubectl at the target and held; the Node object reports the new kubelet."""
import json
import os
import subprocess

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
