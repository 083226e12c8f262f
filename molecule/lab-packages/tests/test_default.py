"""Verify with testinfra: the package really moved and is held (real dpkg state, not the playbook's word)."""


def test_kubeadm_pinned_and_held(host):
    pkg = host.package("kubeadm")
    assert pkg.is_installed and pkg.version == "1.36.3-1.1"
    assert "kubeadm" in host.check_output("apt-mark showhold").split()
    assert host.check_output("kubeadm version -o short") == "v1.36.3"


def test_driver_and_fabricmanager_still_match(host):
    driver = host.package("nvidia-driver-570-server")
    fabric = host.package("nvidia-fabricmanager-570")
    assert driver.is_installed and fabric.is_installed and driver.version == fabric.version
