"""Run a job template as AWX runs it: ansible-runner with a private data directory holding the job's project (the
synced checkout), its inventory, its extra vars (the template's, then the survey's answers, then the credentials'
injected ones), the Kubernetes credential as environment (K8S_AUTH_HOST, K8S_AUTH_API_KEY, K8S_AUTH_SSL_CA_CERT,
K8S_AUTH_VERIFY_SSL, as AWX's "OpenShift or Kubernetes API Bearer Token" credential injects them) and the machine
credential as an SSH key in an ssh-agent, the AWS credential (for the S3 copy of the etcd snapshot) as
AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY.

With ``image`` the job runs as AWX runs it in production: process isolation in the execution-environment image
(`bin/lab ee`, built with ansible-builder from execution-environment.yml), with the private data directory mounted
at /runner and the project synced into it. The container shares the lab machine's network (the lab's load balancer
and SSH hosts listen on 127.0.0.1, each control-plane host's apiserver on its address on the lab's bridge), as a
job pod reaches its cell's network."""
from __future__ import annotations

import dataclasses
import json
import pathlib
import shutil
import subprocess
from typing import Any, Dict, List, Optional

import yaml
from kubernetes import client, config

from ansible_collections.gpufleet.upgrade.plugins.module_utils import awx
from tests.lab.conftest import ROOT

CONFIG = {"organization": "Default", "project": "gpufleet", "inventory": "lab", "execution_environment": "gpufleet",
          "cell": "lab", "target": "", "credentials": {"machine": "lab ssh", "kubernetes": "lab api", "aws": "lab s3"},
          "window": {"rrule": "DTSTART;TZID=UTC:20261205T020000 RRULE:FREQ=WEEKLY;INTERVAL=1;BYDAY=SA"}}
IN_CONTAINER = pathlib.Path("/runner")  # where ansible-runner mounts the private data directory


@dataclasses.dataclass
class Job:
    rc: int
    pdd: pathlib.Path
    token: str

    @property
    def stdout(self) -> str:
        return (self.pdd / "artifacts" / "job" / "stdout").read_text()

    @property
    def events(self) -> List[Dict[str, Any]]:
        return [json.loads(p.read_text())
                for p in sorted((self.pdd / "artifacts" / "job" / "job_events").glob("*.json"))]

    def kept_by_awx(self) -> List[pathlib.Path]:
        """What AWX keeps of a job: its events and its output (not the runner's private data or artifact files -
        ansible-runner writes the job's environment, credentials included, to artifacts/<id>/command)."""
        job = self.pdd / "artifacts" / "job"
        return [job / "stdout"] + sorted((job / "job_events").glob("*.json"))

    def records(self, pattern: str = "*") -> List[pathlib.Path]:
        return sorted((self.pdd / "artifacts" / "job" / "gpufleet" / "change-records").glob(pattern))

    def stats(self) -> Dict[str, Any]:
        return next(e for e in self.events if e["event"] == "playbook_on_stats")["event_data"]


def bearer_token(lab) -> str:
    """What an AWX admin pastes into the Kubernetes credential: a service account token (TokenRequest API)."""
    # The service account and its binding are the lab's (`lab up`): made before any window, as an AWX admin's are;
    # one bound mid-window is what the security checks stop a wave for.
    core = client.CoreV1Api(config.new_client_from_config(str(lab.kubeconfig)))
    name = "gpufleet-awx"
    token = core.create_namespaced_service_account_token(name, "kube-system", {"spec": {"expirationSeconds": 3600}})
    return token.status.token


def sync_project(dest: pathlib.Path) -> None:
    """AWX's project sync: the repository's files (tracked and not ignored), never the lab's generated ones."""
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, capture_output=True,
                           check=True).stdout.decode().split("\0")
    for rel in filter(None, files):
        src = ROOT / rel
        if not (src.exists() or src.is_symlink()):
            continue  # deleted in the working tree
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        if src.is_symlink():
            (dest / rel).symlink_to(src.readlink())
        else:
            shutil.copy2(src, dest / rel)


def run(lab, workdir: pathlib.Path, playbook: str, answers: Optional[Dict[str, Any]] = None,
        injected: Optional[Dict[str, Any]] = None, image: Optional[str] = None, config_overrides=None) -> Job:
    """Run the cell's template for ``playbook`` (in the execution environment ``image`` when given)."""
    import ansible_runner

    pdd = workdir / "awx-job"
    here = IN_CONTAINER if image else pdd  # the private data directory as the job sees it
    hosts = yaml.safe_load((lab.inventory / "hosts.yml").read_text())
    copies = hosts["all"]["children"]["etcd"]["vars"]  # the lab's backup host and S3 bucket (lab/gpufleet_lab/hosts.py)
    s3_keys = {"AWS_ACCESS_KEY_ID": copies.pop("etcd_snapshot_s3_access_key"),
               "AWS_SECRET_ACCESS_KEY": copies.pop("etcd_snapshot_s3_secret_key")}  # AWX's AWS credential
    cfg = dict(CONFIG, target=lab.to_version, backup_dir=str(here / "out" / "etcd-backups"),
               snapshot_copies={"backup_host": copies["etcd_snapshot_backup_host"],
                                "s3": {"bucket": copies["etcd_snapshot_s3_bucket"],
                                       "prefix": copies["etcd_snapshot_s3_prefix"],
                                       "endpoint_url": copies["etcd_snapshot_s3_endpoint_url"]}},
               **(config_overrides or {}))
    template = next(t for t in awx.definitions(cfg)["job_templates"] if t["playbook"] == "playbooks/%s.yml" % playbook)
    inventory = pdd / "inventory"
    inventory.mkdir(parents=True)
    # AWX holds the inventory, not the controller's files: no kubeconfig path, no SSH key path (credentials do that)
    for key in ("gpufleet_kubeconfig", "ansible_ssh_private_key_file"):
        hosts["all"]["vars"].pop(key)
    hosts["all"]["vars"]["gpufleet_out_dir"] = str(here / "out")
    if image:
        hosts["all"]["vars"]["gpufleet_baseline_dir"] = str(here / "project" / "inventories" / "lab" / "baselines")
        # the image's own Helm (on its PATH), and the lab's packaged charts where the job's container sees them
        hosts["all"]["vars"].pop("gpufleet_helm_binary")
        shutil.copytree(hosts["all"]["vars"]["gpufleet_lab_charts"], pdd / "charts")
        hosts["all"]["vars"]["gpufleet_lab_charts"] = str(here / "charts")
    (inventory / "hosts.yml").write_text(yaml.safe_dump(hosts))
    shutil.copytree(lab.inventory / "group_vars", inventory / "group_vars")
    (pdd / "env").mkdir()
    shutil.copy(lab.pki / "ca.crt", pdd / "env" / "k8s-ca.crt")  # the credential's CA file, as AWX writes it
    extravars = dict(awx.launch(template, answers or {}), **(injected or {}))
    token = bearer_token(lab)
    envvars = {"K8S_AUTH_HOST": "https://127.0.0.1:%d" % lab.ports["apiserver_lb"],
               "K8S_AUTH_API_KEY": token, "K8S_AUTH_SSL_CA_CERT": str(here / "env" / "k8s-ca.crt"),
               "K8S_AUTH_VERIFY_SSL": "true", "ANSIBLE_NOCOLOR": "1", **s3_keys,
               # inside an AWX job pod these point at AWX's own cluster: gpufleet must not fall back to it
               "KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"}
    kwargs: Dict[str, Any]
    if image:
        sync_project(pdd / "project")
        kwargs = {"process_isolation": True, "process_isolation_executable": "podman", "container_image": image,
                  # ansible-runner writes the private data (the SSH key's pipe, 0600) as this machine's user, root;
                  # the image's own user (1000) could not read it. In AWX the job pod writes its private data as
                  # that same user, so the two match there as they do here.
                  "container_options": ["--network=host", "--user=0"]}
    else:
        kwargs = {"project_dir": str(ROOT), "inventory": str(inventory)}
    result = ansible_runner.run(private_data_dir=str(pdd), playbook=template["playbook"], extravars=extravars,
                                envvars=envvars, ssh_key=(lab.run / "ssh" / "id_ed25519").read_text(), ident="job",
                                quiet=True, timeout=2400, **kwargs)
    return Job(rc=result.rc, pdd=pdd, token=token)
