"""The lab's Helm releases: the real Helm CLI (built from its Go module, lab.yml versions.helm) installs a local
chart (lab/charts/nvidia-device-plugin, LAB ONLY, its pods run on KWOK) as a real release, so release Secrets,
upgrades, histories and rollbacks are Helm's own. `lab up` packages the chart at each version of VERSIONS and
installs the first; the addons stage (playbooks/addons.yml) upgrades it to the last."""
from __future__ import annotations

import hashlib
import os
import pathlib
import shutil
import subprocess
import tempfile
from typing import Dict, List

from gpufleet_lab.config import LAB_DIR, LabConfig

CHART = LAB_DIR / "charts" / "nvidia-device-plugin"
RELEASE = "nvidia-device-plugin"
NAMESPACE = "nvidia-device-plugin"
VERSIONS = ("0.17.3", "0.17.4")  # installed at `lab up`; the addons stage's target (inventories/lab group_vars)


def binary(cfg: LabConfig) -> pathlib.Path:
    return cfg.bin_dir("helm", cfg.helm_version) / "helm"


def run(cfg: LabConfig, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    env = dict(os.environ, KUBECONFIG=str(cfg.kubeconfig), HELM_CACHE_HOME=str(cfg.run / "helm" / "cache"),
               HELM_CONFIG_HOME=str(cfg.run / "helm" / "config"), HELM_DATA_HOME=str(cfg.run / "helm" / "data"))
    proc = subprocess.run([str(binary(cfg)), *args], capture_output=True, text=True, env=env, check=False,
                          timeout=300)
    if check and proc.returncode != 0:
        raise RuntimeError("helm %s failed (%d): %s" % (" ".join(args), proc.returncode, proc.stderr.strip()))
    return proc


def charts_dir(cfg: LabConfig) -> pathlib.Path:
    """Where the chart is packaged: a directory named by the chart's content and the versions."""
    digest = hashlib.sha256(" ".join(VERSIONS).encode())
    for path in sorted(p for p in CHART.rglob("*") if p.is_file()):
        digest.update(str(path.relative_to(CHART)).encode() + b"\0" + path.read_bytes())
    return cfg.cache / "charts" / digest.hexdigest()[:12]


def charts(cfg: LabConfig) -> pathlib.Path:
    """The chart packaged at every version (cells coming up at once share it: each packages into a temporary
    directory and renames it into place)."""
    out = charts_dir(cfg)
    if out.exists():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    work = pathlib.Path(tempfile.mkdtemp(dir=out.parent, prefix=".build-"))
    try:
        for version in VERSIONS:
            run(cfg, "package", str(CHART), "--version", version, "--app-version", version, "-d", str(work))
        try:
            work.rename(out)
        except OSError:  # another cell renamed its copy first
            pass
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return out


def chart_file(cfg: LabConfig, version: str) -> pathlib.Path:
    return charts(cfg) / ("%s-%s.tgz" % (CHART.name, version))


def ensure_releases(cfg: LabConfig) -> List[str]:
    """Install the release at the first version unless Helm already has it (a reset cluster has none)."""
    if run(cfg, "status", RELEASE, "-n", NAMESPACE, check=False).returncode == 0:
        return []
    run(cfg, "install", RELEASE, str(chart_file(cfg, VERSIONS[0])), "-n", NAMESPACE, "--create-namespace",
        "--wait", "--timeout", "120s")
    return ["%s %s (chart %s)" % (RELEASE, NAMESPACE, VERSIONS[0])]


def reinstall(cfg: LabConfig) -> List[str]:
    """The release as `lab up` makes it, whatever state a test left it in: Helm's record of it (its release
    Secrets) is dropped and the first version installed again, adopting the objects it left (they carry the
    release's annotations). Not `helm uninstall`: that fails on a release whose record Helm cannot build."""
    from gpufleet_lab import kube
    core = kube.client.CoreV1Api(kube.api(cfg))
    core.delete_collection_namespaced_secret(NAMESPACE, label_selector="owner=helm,name=%s" % RELEASE)
    return ensure_releases(cfg)


def inventory_vars(cfg: LabConfig) -> Dict[str, str]:
    return {"gpufleet_helm_binary": str(binary(cfg)), "gpufleet_lab_charts": str(charts_dir(cfg))}
