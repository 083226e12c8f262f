"""The lab's apt repository: versioned .deb packages for kubeadm, kubelet, kubectl, cri-tools, the NVIDIA driver
(server branch), container toolkit, fabric manager, DCGM and nccl-tests, built offline with dpkg-deb.

kubectl, etcdctl and etcdutl are the real binaries built by go-binaries.sh; kubeadm carries the real binary (for
version, upgrade plan and dry runs) beside the simulator of upgrade apply/node; kubelet and the GPU tools are the
simulators in lab/simulators (SIMULATION). Dependencies encode the rules apt must enforce: fabric manager
depends on the exact driver version, the driver branches conflict with each other.
"""
from __future__ import annotations

import hashlib
import pathlib
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from typing import Dict, List, Tuple

from gpufleet_lab.config import LAB_DIR, LabConfig

SIM = LAB_DIR / "simulators"


@dataclass
class Deb:
    name: str
    version: str
    files: Dict[str, pathlib.Path] = field(default_factory=dict)  # path in package -> source file
    texts: Dict[str, str] = field(default_factory=dict)           # path in package -> content
    depends: str = ""
    conflicts: str = ""
    provides: str = ""
    description: str = ""
    scripts: Dict[str, pathlib.Path] = field(default_factory=dict)  # maintainer scripts: postinst, ...


def k8s_deb_version(version: str) -> str:
    return version.lstrip("v") + "-1.1"


def plan(cfg: LabConfig) -> List[Deb]:
    debs: List[Deb] = [Deb(
        "gpufleet-lab-sim", "1.0.0",
        files={"usr/lib/gpufleet-sim/simlib.py": SIM / "simlib.py", "usr/bin/systemctl": SIM / "systemctl",
               "usr/bin/journalctl": SIM / "journalctl", "usr/sbin/gpufleet-lab-reboot": SIM / "gpufleet-lab-reboot"},
        description="gpufleet lab simulation support (systemctl, journalctl -k, reboot, shared state)")]
    for version in cfg.versions:
        deb_version = k8s_deb_version(version)
        minor = ".".join(version.lstrip("v").split(".")[:2])
        kbin = cfg.bin_dir("kubernetes", version)
        debs += [
            Deb("kubeadm", deb_version, files={"usr/bin/kubeadm": SIM / "kubeadm",
                                               "usr/lib/gpufleet-sim/kubeadm-real": kbin / "kubeadm"},
                texts={"usr/share/gpufleet-sim/kubeadm.version": version},
                depends="gpufleet-lab-sim, cri-tools (>= %s.0)" % minor,
                description="Kubernetes cluster bootstrapping tool (real kubeadm %s for version, upgrade plan and "
                            "dry runs; upgrade apply/node simulated by the gpufleet lab)" % version),
            Deb("kubelet", deb_version, files={"usr/bin/kubelet": SIM / "kubelet"},
                texts={"usr/share/gpufleet-sim/kubelet.version": version}, depends="gpufleet-lab-sim",
                scripts={"preinst": SIM / "kubelet-preinst"},
                description="Kubernetes node agent (gpufleet lab simulation)"),
            Deb("kubectl", deb_version, files={"usr/bin/kubectl": kbin / "kubectl"},
                description="Kubernetes command-line tool (real binary, built from k8s.io/kubernetes %s)" % version),
            Deb("cri-tools", "%s.0-1.1" % minor, files={"usr/bin/crictl": SIM / "crictl"},
                texts={"usr/share/gpufleet-sim/cri-tools.version": "v%s.0" % minor},
                description="CRI command-line tools (gpufleet lab simulation)"),
        ]
    for key in ("from", "to"):
        driver = cfg.drivers[key]
        branch = driver.split(".")[0]
        drv_version = "%s-0lab1" % driver
        debs += [
            Deb("nvidia-driver-%s-server" % branch, drv_version, files={"usr/bin/nvidia-smi": SIM / "nvidia-smi"},
                texts={"usr/share/gpufleet-sim/nvidia-driver.version": driver}, depends="gpufleet-lab-sim",
                conflicts="nvidia-driver-any", provides="nvidia-driver-any",
                scripts={"postinst": SIM / "nvidia-driver-postinst"},
                description="NVIDIA server driver %s (gpufleet lab simulation)" % driver),
            Deb("nvidia-fabricmanager-%s" % branch, drv_version,
                texts={"usr/share/gpufleet-sim/nvidia-fabricmanager.version": driver},
                depends="nvidia-driver-%s-server (= %s)" % (branch, drv_version),
                conflicts="nvidia-fabricmanager-any", provides="nvidia-fabricmanager-any",
                description="NVIDIA fabric manager %s; must equal the driver version (gpufleet lab simulation)"
                % driver),
        ]
    for toolkit in ("1.17.8-1", "1.18.0-1"):
        debs.append(Deb("nvidia-container-toolkit", toolkit, files={"usr/bin/nvidia-ctk": SIM / "nvidia-ctk"},
                        texts={"usr/share/gpufleet-sim/nvidia-container-toolkit.version": toolkit.split("-")[0]},
                        description="NVIDIA container toolkit (gpufleet lab simulation)"))
    for dcgm in ("1:4.2.3-1", "1:4.4.1-1"):
        debs.append(Deb("datacenter-gpu-manager-4-core", dcgm, files={"usr/bin/dcgmi": SIM / "dcgmi"},
                        texts={"usr/share/gpufleet-sim/dcgm.version": dcgm.split(":")[1].split("-")[0]},
                        depends="gpufleet-lab-sim", description="NVIDIA DCGM 4 (gpufleet lab simulation)"))
    debs.append(Deb("nccl-tests", "2.17.6-1", files={"usr/bin/all_reduce_perf": SIM / "all_reduce_perf"},
                    depends="gpufleet-lab-sim", description="NCCL tests (gpufleet lab simulation)"))
    ebin = cfg.bin_dir("etcd", cfg.etcd_version)
    debs.append(Deb("gpufleet-etcd-client", cfg.etcd_version.lstrip("v") + "-1",
                    files={"usr/lib/gpufleet-sim/etcdctl.real": ebin / "etcdctl", "usr/bin/etcdutl": ebin / "etcdutl",
                           "usr/bin/etcdctl": SIM / "etcdctl-wrapper"},
                    depends="gpufleet-lab-sim",
                    description="etcdctl and etcdutl %s (real binaries; etcdctl wrapped for the snapshot-fail "
                    "fault)" % cfg.etcd_version))
    return debs


def _fingerprint(debs: List[Deb]) -> str:
    digest = hashlib.sha256()
    for deb in debs:
        digest.update(("%s %s %s %s %s" % (deb.name, deb.version, deb.depends, deb.conflicts, deb.provides)).encode())
        for dest, src in sorted(deb.files.items()):
            digest.update(dest.encode())
            digest.update(hashlib.sha256(src.read_bytes()).digest())  # content, not mtime: stable across clones
        for dest, text in sorted(deb.texts.items()):
            digest.update((dest + text).encode())
        for name, src in sorted(deb.scripts.items()):
            digest.update(name.encode())
            digest.update(hashlib.sha256(src.read_bytes()).digest())
    return digest.hexdigest()[:12]


def _build_deb(deb: Deb, outdir: pathlib.Path) -> pathlib.Path:
    with tempfile.TemporaryDirectory() as tmp:
        root = pathlib.Path(tmp)
        for dest, src in deb.files.items():
            target = root / dest
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, target)
            target.chmod(0o755)
        for dest, text in deb.texts.items():
            target = root / dest
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text + "\n")
        control = ["Package: %s" % deb.name, "Version: %s" % deb.version, "Architecture: amd64",
                   "Maintainer: gpufleet lab <lab@gpufleet.invalid>", "Priority: optional", "Section: admin"]
        for key, value in (("Depends", deb.depends), ("Conflicts", deb.conflicts), ("Provides", deb.provides),
                           ("Replaces", deb.conflicts)):
            if value:
                control.append("%s: %s" % (key, value))
        control.append("Description: %s" % (deb.description or deb.name))
        (root / "DEBIAN").mkdir()
        (root / "DEBIAN" / "control").write_text("\n".join(control) + "\n")
        for name, src in deb.scripts.items():
            shutil.copy2(src, root / "DEBIAN" / name)
            (root / "DEBIAN" / name).chmod(0o755)
        out = outdir / ("%s_%s_amd64.deb" % (deb.name, deb.version.replace(":", "%3a")))
        subprocess.run(["dpkg-deb", "--root-owner-group", "-Zgzip", "-z1", "--build", str(root), str(out)],
                       check=True, capture_output=True)
        return out


def ensure_repo(cfg: LabConfig) -> Tuple[pathlib.Path, int]:
    """Build (once per content) the flat apt repository; returns (path, package count)."""
    debs = plan(cfg)
    repo = cfg.cache / "apt" / _fingerprint(debs)
    if (repo / "Packages").exists():
        return repo, len(debs)
    tmp = repo.with_name(repo.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    for deb in debs:
        _build_deb(deb, tmp)
    packages = subprocess.run(["dpkg-scanpackages", "--multiversion", "."], cwd=tmp, check=True,
                              capture_output=True, text=True).stdout
    (tmp / "Packages").write_text(packages)
    shutil.rmtree(repo, ignore_errors=True)
    tmp.rename(repo)
    return repo, len(debs)
