"""Helm releases in the lab (lab/gpufleet_lab/helm.py: the real helm, a local chart installed by `lab up`): a
release whose stored manifest records an API the cluster no longer serves cannot be upgraded by Helm; the
helm_mapkubeapis playbook refuses to touch it without the typed confirmation, maps it with one (a new revision,
the old superseded, as helm-mapkubeapis does) and records it; then Helm itself upgrades the release.

Who calls a deprecated API: preflight reads the control-plane hosts' audit logs (the legacy-client fault's caller
named; a host whose log is gone blocks).

The addons stage inside the wave (playbooks/addons.yml) is the story's (tests/lab/test_upgrade_wave.py); the role's
own scenario (roles/addons/molecule) covers a failed upgrade that Helm rolls back."""
from __future__ import annotations

import glob
import json
import os
import pathlib
import subprocess
import sys
import time

import pytest
from kubernetes import client, config

from ansible_collections.gpufleet.upgrade.plugins.module_utils.removed_apis import (
    MAPPED_DESCRIPTION, decode_helm_release, encode_helm_release)
from gpufleet_lab import cluster as lab_cluster
from gpufleet_lab import helm as lab_helm
from gpufleet_lab import soakfaults
from tests.lab.conftest import ROOT, lab_cli

pytestmark = pytest.mark.lab
BIN = pathlib.Path(sys.executable).parent
RELEASE, NAMESPACE = lab_helm.RELEASE, lab_helm.NAMESPACE
OLD_API = ("---\n# Source: nvidia-device-plugin/templates/pdb.yaml\napiVersion: policy/v1beta1\n"
           "kind: PodDisruptionBudget\nmetadata:\n  name: nvidia-device-plugin\nspec:\n  minAvailable: 0\n")


def run(lab, records, playbook, *extra):
    env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_CALLBACK_RESULT_FORMAT="json", GPUFLEET_CHANGE_RECORD_DIR=str(records),
               PATH="%s:%s" % (BIN, os.environ["PATH"]))
    return subprocess.run([str(BIN / "ansible-playbook"), playbook, "-i", str(lab.inventory),
                           "-e", "gpufleet_target_version=%s" % lab.to_version, *extra],
                          cwd=ROOT, env=env, capture_output=True, text=True, check=False, timeout=600)


def history(lab):
    return json.loads(lab_helm.run(lab, "history", RELEASE, "-n", NAMESPACE, "-o", "json").stdout)


@pytest.fixture
def stale_release(lab):
    """The lab's release at its first revision, its stored manifest also recording a policy/v1beta1
    PodDisruptionBudget, as a release installed on a cluster of before 1.25 records it (the object itself went
    with that API). Put back as `lab up` makes it afterwards."""
    core = client.CoreV1Api(config.new_client_from_config(str(lab.kubeconfig)))
    lab_helm.reinstall(lab)
    name = "sh.helm.release.v1.%s.v1" % RELEASE
    release = decode_helm_release(core.read_namespaced_secret(name, NAMESPACE).data["release"])
    release["manifest"] += OLD_API
    core.patch_namespaced_secret(name, NAMESPACE, {"data": {"release": encode_helm_release(release)}})
    yield core
    lab_helm.reinstall(lab)


def test_a_release_recording_a_removed_api_is_mapped_only_with_the_confirmation_then_helm_upgrades_it(
        lab, stale_release, tmp_path):
    new_chart = str(lab_helm.chart_file(lab, lab_helm.VERSIONS[-1]))
    # Helm's own failure: it cannot build the recorded objects it would diff against
    stuck = lab_helm.run(lab, "upgrade", RELEASE, new_chart, "-n", NAMESPACE, check=False)
    assert stuck.returncode != 0 and "unable to build kubernetes objects from current release manifest" in \
        stuck.stderr, stuck.stderr
    assert [(r["revision"], r["status"]) for r in history(lab)] == [(1, "deployed")]

    refused = run(lab, tmp_path, "playbooks/helm_mapkubeapis.yml")
    assert refused.returncode != 0
    assert "1 Helm release(s) record APIs that %s removes: PodDisruptionBudget nvidia-device-plugin in " \
           "nvidia-device-plugin/nvidia-device-plugin" % lab.to_version in refused.stdout
    phrase = "map kube apis on %s for %s" % (lab.cell, lab.to_version)
    assert "gpufleet_break_glass_map_kube_apis='%s'" % phrase in refused.stdout
    assert [(r["revision"], r["status"]) for r in history(lab)] == [(1, "deployed")]  # nothing was changed

    mapped = run(lab, tmp_path, "playbooks/helm_mapkubeapis.yml",
                 "-e", json.dumps({"gpufleet_break_glass_map_kube_apis": phrase}))
    assert mapped.returncode == 0, mapped.stdout[-4000:]
    revisions = history(lab)
    assert [(r["revision"], r["status"]) for r in revisions] == [(1, "superseded"), (2, "deployed")]
    assert revisions[-1]["description"] == MAPPED_DESCRIPTION and revisions[-1]["chart"] == revisions[0]["chart"]
    manifest = lab_helm.run(lab, "get", "manifest", RELEASE, "-n", NAMESPACE).stdout
    assert "apiVersion: policy/v1\nkind: PodDisruptionBudget" in manifest and "policy/v1beta1" not in manifest
    record = json.loads(pathlib.Path(sorted(glob.glob(str(tmp_path / "*-helm_mapkubeapis.yml.json")))[-1])
                        .read_text())
    glass = {(e["event"], e["action"]) for e in record["break_glass"]}
    assert glass == {("confirmed", "map_kube_apis"), ("used", "map kube apis")}
    used = next(e for e in record["break_glass"] if e["event"] == "used")
    assert "nvidia-device-plugin/nvidia-device-plugin" in used["detail"] and "PodDisruptionBudget" in used["detail"]
    again = run(lab, tmp_path, "playbooks/helm_mapkubeapis.yml")  # nothing left to map: no confirmation needed
    assert again.returncode == 0 and "0 release(s) mapped" in again.stdout

    upgraded = lab_helm.run(lab, "upgrade", RELEASE, new_chart, "-n", NAMESPACE, "--wait", check=False)
    assert upgraded.returncode == 0, upgraded.stderr
    assert [(r["revision"], r["status"]) for r in history(lab)][-1] == (3, "deployed")


def _preflight(lab, tmp_path, *extra):
    proc = run(lab, tmp_path / "records", "playbooks/preflight.yml", "-e", "gpufleet_out_dir=%s" % tmp_path, *extra)
    report = json.loads((tmp_path / "preflight" / ("preflight-%s.json" % lab.cell)).read_text())
    return proc, report


def test_preflight_names_who_calls_a_deprecated_api_from_the_audit_logs_and_blocks_the_release_removing_it(
        lab, tmp_path):
    """The legacy-client fault on cp-2 (an old CSI sidecar's user agent and ServiceAccount) lists
    storage.k8s.io/v1beta1 VolumeAttributesClasses (removed in 1.37) through cp-2's apiserver only: preflight reads
    every control-plane host's audit log and names it - a warning for the target. For 1.37 it is a blocker, beside
    cp-3, whose log was moved aside (a logrotate without copytruncate: the apiserver writes on into the moved file
    and makes no new one), so who calls there is unknown."""
    log = lab_cluster.audit_log_dir(lab, "cp-2") / "audit.log"
    lab_cli("fault", "cp-2", "legacy-client")
    try:
        deadline = time.monotonic() + 60
        while soakfaults.LEGACY_AGENT not in log.read_text(errors="replace") and time.monotonic() < deadline:
            time.sleep(1)
        proc, report = _preflight(lab, tmp_path)
        assert proc.returncode == 0, proc.stdout[-3000:]
        callers = [f for f in report["removed_apis"] if f["source"] == "audit"]
        assert [(f["service_account"], f["user_agent"], f["verb"], f["api_version"], f["hosts"], f["severity"])
                for f in callers] == [("%s/%s" % (soakfaults.NS, soakfaults.LEGACY), soakfaults.LEGACY_AGENT, "list",
                                       "storage.k8s.io/v1beta1", ["cp-2"], "warn")]
        assert callers[0]["count"] >= 1 and callers[0]["removed_in"] == "1.37"
        assert any("legacy-resizer" in w for w in report["warnings"])
        assert not [w for w in report["warnings"] if "kubeadm-config" in w]  # the ClusterConfiguration audits
        markdown = (tmp_path / "preflight" / ("preflight-%s.md" % lab.cell)).read_text()
        assert "## Who calls a deprecated API" in markdown and soakfaults.LEGACY_AGENT in markdown
        # the etcd release the target's kubeadm installs (its real image list): the members run a newer 3.6
        etcd = lab.etcd_version.lstrip("v")
        assert report["etcd_release"]["status"] == "runs-it" and report["etcd_release"]["running"] == [etcd]
        assert "## etcd" in markdown and "kubeadm %s installs 3.6.8-0" % lab.to_version in markdown
        folder = lab_cluster.audit_log_dir(lab, "cp-3")
        (folder / "audit.log").rename(folder / "audit.log.moved")
        try:
            proc, report = _preflight(lab, tmp_path, "-e", "gpufleet_target_version=%s" % lab.later_versions[0],
                                      "-e", "gpufleet_allow_multi_hop=true")
        finally:
            (folder / "audit.log.moved").rename(folder / "audit.log")
    finally:
        lab_cli("clear", "cp-2")
    assert proc.returncode != 0
    named = [b for b in report["blockers"] if "ServiceAccount %s/%s" % (soakfaults.NS, soakfaults.LEGACY) in b]
    assert len(named) == 1 and "blocks the upgrade to 1.37" in named[0], report["blockers"]
    # 1.37's kubeadm installs etcd 3.7: the cell's 3.6 is older - a warning that names etcd's own window
    assert report["etcd_release"]["status"] == "older"
    assert [w for w in report["warnings"] if w.startswith("etcd: the cell runs %s, older than the 3.7.0-0" % (
        lab.etcd_version.lstrip("v"))) and "playbooks/etcd_upgrade.yml" in w], report["warnings"]
    assert [b for b in report["blockers"] if "'s audit log could not be scanned" in b] == [
        "cp-3's audit log could not be scanned for removed APIs: cp-3: no audit log at "
        "/var/log/kubernetes/audit/audit.log (moved aside by a logrotate? the apiserver writes on into a moved file "
        "and makes no new one until it rotates)"], report["blockers"]
