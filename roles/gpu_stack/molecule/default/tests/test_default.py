"""The 580 driver and fabric manager replaced the 570 ones, at the same version, held; the new module is loaded
(nvidia-smi answers and reports it on every GPU), persistence mode is on, fabric manager runs."""


def test_driver_and_fabric_manager_at_the_same_version_and_held(host):
    for pkg in ("nvidia-driver-580-server", "nvidia-fabricmanager-580"):
        assert host.package(pkg).is_installed
        assert host.package(pkg).version == "580.95.05-0lab1"
    for pkg in ("nvidia-driver-570-server", "nvidia-fabricmanager-570"):
        assert not host.package(pkg).is_installed
    held = host.check_output("apt-mark showhold").split()
    assert {"nvidia-driver-580-server", "nvidia-fabricmanager-580", "nvidia-container-toolkit"} <= set(held)
    assert host.package("nvidia-container-toolkit").version == "1.18.0-1"


def test_new_driver_loaded_on_every_gpu_with_persistence(host):
    out = host.check_output("nvidia-smi --query-gpu=driver_version,persistence_mode --format=csv,noheader")
    rows = [r.strip() for r in out.splitlines() if r.strip()]
    assert len(rows) == 8
    assert all(r == "580.95.05, Enabled" for r in rows)


def test_fabric_manager_runs(host):
    assert host.run("systemctl is-active nvidia-fabricmanager").stdout.strip() == "active"
