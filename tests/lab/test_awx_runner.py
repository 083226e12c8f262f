"""Job templates run as AWX runs them: ansible-runner with a private data directory holding the job's inventory,
its extra vars (the template's, then the survey's defaults, then the credential's injected ones), the Kubernetes
credential as environment (K8S_AUTH_HOST, K8S_AUTH_API_KEY, K8S_AUTH_SSL_CA_CERT, K8S_AUTH_VERIFY_SSL, as AWX's
"OpenShift or Kubernetes API Bearer Token" credential injects them) and the machine credential as an SSH key in
an ssh-agent. The project is this checkout (its ansible.cfg applies, as a project's does in AWX).

Not rehearsed here: process isolation in the execution-environment image (built later; see the issue note)."""
from __future__ import annotations

import json
import shutil

import pytest
import yaml
from kubernetes import client, config

from ansible_collections.gpufleet.upgrade.plugins.module_utils import awx
from tests.lab.conftest import ROOT

pytestmark = pytest.mark.lab
SNAPSHOT_KEY = "awx-injected-key-5f0c2e7d9a41"  # must never appear in the job's output or events
CONFIG = {"organization": "Default", "project": "gpufleet", "inventory": "lab", "execution_environment": "gpufleet",
          "cell": "lab", "target": "", "credentials": {"machine": "lab ssh", "kubernetes": "lab api"},
          "window": {"rrule": "DTSTART;TZID=UTC:20261205T020000 RRULE:FREQ=WEEKLY;BYDAY=SA"}}


def bearer_token(lab) -> str:
    """What an AWX admin pastes into the Kubernetes credential: a service account token (TokenRequest API)."""
    api = config.new_client_from_config(str(lab.kubeconfig))
    core, rbac = client.CoreV1Api(api), client.RbacAuthorizationV1Api(api)
    name = "gpufleet-awx"
    if not [s for s in core.list_namespaced_service_account("kube-system").items if s.metadata.name == name]:
        core.create_namespaced_service_account("kube-system", {"metadata": {"name": name}})
    if not [b for b in rbac.list_cluster_role_binding().items if b.metadata.name == name]:
        rbac.create_cluster_role_binding({
            "metadata": {"name": name}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                                    "name": "cluster-admin"},
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": "kube-system"}]})
    token = core.create_namespaced_service_account_token(name, "kube-system", {"spec": {"expirationSeconds": 3600}})
    return token.status.token


def awx_job(lab, tmp_path, playbook, answers=None, injected=None):
    """Run the cell's template for ``playbook`` as AWX would; returns (runner result, private data dir)."""
    import ansible_runner

    cfg = dict(CONFIG, target=lab.to_version, backup_dir=str(tmp_path / "out" / "etcd-backups"))
    template = next(t for t in awx.definitions(cfg)["job_templates"] if t["playbook"] == "playbooks/%s.yml" % playbook)
    pdd = tmp_path / "awx-job"
    inventory = pdd / "inventory"
    inventory.mkdir(parents=True)
    hosts = yaml.safe_load((lab.inventory / "hosts.yml").read_text())
    # AWX holds the inventory, not the controller's files: no kubeconfig path, no SSH key path (credentials do that)
    for key in ("gpufleet_kubeconfig", "ansible_ssh_private_key_file"):
        hosts["all"]["vars"].pop(key)
    hosts["all"]["vars"]["gpufleet_out_dir"] = str(tmp_path / "out")
    (inventory / "hosts.yml").write_text(yaml.safe_dump(hosts))
    shutil.copytree(lab.inventory / "group_vars", inventory / "group_vars")
    extravars = dict(awx.launch(template, answers or {}), **(injected or {}))
    token = bearer_token(lab)
    envvars = {"K8S_AUTH_HOST": "https://127.0.0.1:%d" % lab.ports["apiserver_lb"],
               "K8S_AUTH_API_KEY": token, "K8S_AUTH_SSL_CA_CERT": str(lab.pki / "ca.crt"),
               "K8S_AUTH_VERIFY_SSL": "true", "ANSIBLE_NOCOLOR": "1",
               # inside an AWX job pod these point at AWX's own cluster: gpufleet must not fall back to it
               "KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"}
    result = ansible_runner.run(private_data_dir=str(pdd), project_dir=str(ROOT), playbook=template["playbook"],
                                inventory=str(inventory), extravars=extravars, envvars=envvars,
                                ssh_key=(lab.run / "ssh" / "id_ed25519").read_text(), ident="job", quiet=True,
                                timeout=1200)
    return result, pdd, token


def kept_by_awx(pdd):
    """What AWX keeps of a job: its events and its output (not the runner's private data or artifact files -
    ansible-runner writes the job's environment, credentials included, to artifacts/<id>/command)."""
    job = pdd / "artifacts" / "job"
    return [job / "stdout"] + sorted((job / "job_events").glob("*.json"))


def events(pdd):
    return [json.loads(p.read_text()) for p in sorted((pdd / "artifacts" / "job" / "job_events").glob("*.json"))]


def test_preflight_template_runs_as_awx_runs_it(lab, tmp_path):
    result, pdd, token = awx_job(lab, tmp_path, "preflight")
    stdout = (pdd / "artifacts" / "job" / "stdout").read_text()
    assert result.rc == 0, stdout[-6000:]
    job_events = events(pdd)
    identity = [e["event_data"]["res"] for e in job_events if e["event"] == "runner_on_ok"
                and e["event_data"].get("task_action") == "gpufleet.upgrade.cluster_identity"]
    uid = yaml.safe_load((lab.inventory / "hosts.yml").read_text())["all"]["vars"]["gpufleet_cluster_uid"]
    # the credential's token reached the cell's own API server through K8S_AUTH_* (no kubeconfig in the inventory)
    assert [(r["server"], r["uid"]) for r in identity] == [("https://127.0.0.1:%d" % lab.ports["apiserver_lb"], uid)]
    stats = next(e for e in job_events if e["event"] == "playbook_on_stats")["event_data"]
    verdict = stats["artifact_data"]["gpufleet_preflight"]  # set_stats: what AWX keeps with the job
    assert verdict["cell"] == "lab" and verdict["target"] == lab.to_version and verdict["blockers"] == []
    records = list((pdd / "artifacts" / "job" / "gpufleet" / "change-records").glob("*-preflight.yml.json"))
    assert len(records) == 1 and oct(records[0].stat().st_mode & 0o777) == "0o600"
    assert json.loads(records[0].read_text())["cell"] == "lab"
    assert not [p.name for p in kept_by_awx(pdd) if token in p.read_text(errors="replace")]  # the bearer token


def test_etcd_backup_template_never_shows_the_injected_key(lab, tmp_path):
    result, pdd, token = awx_job(lab, tmp_path, "etcd_backup",
                                 injected={"etcd_snapshot_encryption_key": SNAPSHOT_KEY})  # the credential's injector
    stdout = (pdd / "artifacts" / "job" / "stdout").read_text()
    assert result.rc == 0, stdout[-6000:]
    backups = list((tmp_path / "out" / "etcd-backups").glob("*.vault"))
    assert backups, sorted(p.name for p in (tmp_path / "out").rglob("*"))
    leaked = [(secret[:6], str(p.relative_to(pdd))) for p in kept_by_awx(pdd) for secret in (SNAPSHOT_KEY, token)
              if secret in p.read_text(errors="replace")]
    assert not leaked, leaked
    records = (pdd / "artifacts" / "job" / "gpufleet" / "change-records").glob("*")
    assert not [p.name for p in records if SNAPSHOT_KEY in p.read_text() or token in p.read_text()]
