"""Job templates run as AWX runs them (tests/lab/awx_job.py): ansible-runner with process isolation in the
execution-environment image built from execution-environment.yml, the project synced into the private data
directory, the Kubernetes credential injected as K8S_AUTH_* environment (a service account token, no kubeconfig in
the inventory), the machine credential as an SSH key in the container's ssh-agent, and an in-cluster service
address pointing elsewhere (what a job pod sees). The upgrade wave itself runs this way as the finishing step of
tests/lab/test_upgrade_wave.py."""
from __future__ import annotations

import json
import pathlib
import subprocess

import pytest
import yaml

from gpufleet_lab import kubeadm as lab_kubeadm
from tests.lab import awx_job
from tests.lab.conftest import podman_exec, s3_client

pytestmark = pytest.mark.lab
ROOT = pathlib.Path(__file__).resolve().parents[2]
SNAPSHOT_KEY = "awx-injected-key-5f0c2e7d9a41"  # must never appear in the job's output or events


def test_the_execution_environment_carries_the_helm_the_addons_stage_runs(ee_image):
    """Built by the shipped definition's own step (its Go module), not put there by the lab."""
    versions = yaml.safe_load((ROOT / "lab" / "lab.yml").read_text())["versions"]
    proc = subprocess.run(["podman", "run", "--rm", ee_image, "helm", "version", "--short"], capture_output=True,
                          text=True, timeout=120, check=False)
    assert proc.returncode == 0 and proc.stdout.strip() == versions["helm"], (proc.stdout, proc.stderr)


def test_preflight_template_runs_in_the_execution_environment(lab, ee_image, tmp_path):
    job = awx_job.run(lab, tmp_path, "preflight", image=ee_image)
    assert job.rc == 0, job.stdout[-6000:]
    identity = [e["event_data"]["res"] for e in job.events if e["event"] == "runner_on_ok"
                and e["event_data"].get("task_action") == "gpufleet.upgrade.cluster_identity"]
    uid = yaml.safe_load((lab.inventory / "hosts.yml").read_text())["all"]["vars"]["gpufleet_cluster_uid"]
    # the credential's token reached the cell's own API server through K8S_AUTH_* (no kubeconfig in the inventory)
    assert [(r["server"], r["uid"]) for r in identity] == [("https://127.0.0.1:%d" % lab.ports["apiserver_lb"], uid)]
    # it ran in the image, as AWX runs it (the runner's own record of the command it started)
    command = json.loads((job.pdd / "artifacts" / "job" / "command").read_text())["command"]
    assert command[:2] == ["podman", "run"] and ee_image in command, command[:12]
    verdict = job.stats()["artifact_data"]["gpufleet_preflight"]  # set_stats: what AWX keeps with the job
    assert verdict["cell"] == "lab" and verdict["target"] == lab.to_version and verdict["blockers"] == []
    # the addons the lab's cluster runs were found from their workloads' images and judged against the target: the
    # release the cell runs (`from` on a fresh cell; `make test` runs this file after the story, on the upgraded one)
    # with kubeadm's own CoreDNS at that release's pin
    from kubernetes import client, config
    api = config.new_client_from_config(str(lab.kubeconfig))
    proxy = client.AppsV1Api(api).read_namespaced_daemon_set("kube-proxy", "kube-system")
    running = proxy.spec.template.spec.containers[0].image.rsplit(":", 1)[1]
    assert running in (lab.from_version, lab.to_version), running
    coredns = lab_kubeadm.kubeadm_images(lab, running)["coredns"]
    assert {a.rsplit(" ", 1)[0] for a in verdict["addons"]} == {
        "kube_proxy %s" % running.lstrip("v").rsplit(".", 1)[0],
        "coredns %s" % coredns.rsplit(":v", 1)[1].rsplit(".", 1)[0], "kueue 0.17", "jobset 0.11", "cilium 1.19",
        "nvidia_device_plugin 0.17", "sigstore_policy_controller 0.10"}
    assert all(a.endswith((" ok", " warn")) for a in verdict["addons"]), verdict["addons"]
    records = job.records("*-preflight.yml.json")
    assert len(records) == 1 and oct(records[0].stat().st_mode & 0o777) == "0o600"
    assert json.loads(records[0].read_text())["cell"] == "lab"
    assert not [p.name for p in job.kept_by_awx() if job.token in p.read_text(errors="replace")]  # the bearer token
    # the Helm release Secrets were scanned (the device plugin's chart was found) but their data - every release's
    # manifests and values - reached neither the output nor an event: removed_apis reads them itself
    core = client.CoreV1Api(api)
    blobs = [s.data["release"] for s in core.list_secret_for_all_namespaces(label_selector="owner=helm").items]
    assert blobs and "nvidia_device_plugin 0.17" in " ".join(verdict["addons"])
    kept = "".join(p.read_text(errors="replace") for p in job.kept_by_awx())
    assert not [b[:64] for b in blobs if b[:64] in kept or b[-64:] in kept]


def test_etcd_backup_template_never_shows_the_injected_key(lab, ee_image, tmp_path):
    job = awx_job.run(lab, tmp_path, "etcd_backup", image=ee_image,
                      injected={"etcd_snapshot_encryption_key": SNAPSHOT_KEY})  # the credential's injector
    assert job.rc == 0, job.stdout[-6000:]
    backups = list((job.pdd / "out" / "etcd-backups").glob("*.vault"))
    assert backups, sorted(p.name for p in (job.pdd / "out").rglob("*"))
    # the job's container is gone with the job: the snapshot outlives it in the bucket (AWS credential injected
    # as AWS_* environment) and on the backup host, byte for byte
    (backup,) = backups
    s3 = s3_client(lab)
    stored = s3.get_object(Bucket=lab.s3["bucket"], Key="lab/" + backup.name)["Body"].read()
    assert stored == backup.read_bytes()
    on_host = podman_exec("backup-1", "cat", "/var/backups/gpufleet/etcd/" + backup.name).stdout
    assert on_host == backup.read_text()
    leaked = [(secret[:6], str(p.relative_to(job.pdd))) for p in job.kept_by_awx()
              for secret in (SNAPSHOT_KEY, job.token, lab.s3["secret_key"]) if secret in p.read_text(errors="replace")]
    assert not leaked, leaked
    assert not [p.name for p in job.records() if SNAPSHOT_KEY in p.read_text() or job.token in p.read_text()]
