"""One lab cell per test run: the session fixture brings it up once (a no-op when it is already up) and takes it down
at the end unless it was already running before the run (or GPUFLEET_LAB_KEEP=1). GPUFLEET_LAB_CELL picks the
cell (lab/lab.yml `cells`), so two pytest runs can each have one (make lab-tests)."""
from __future__ import annotations

import json
import os
import pathlib
import ssl
import subprocess
import sys
import time
import traceback
import urllib.request

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "lab"))

from gpufleet_lab import config as lab_config
from gpufleet_lab import hosts as lab_hosts
from gpufleet_lab import kubeadm as lab_kubeadm


def lab_cli(*args: str, check: bool = True, cell: str = "") -> subprocess.CompletedProcess:
    """`bin/lab ARGS` for GPUFLEET_LAB_CELL's cell, or ``cell``. `fault HOST KIND` and `clear HOST` (about 150 calls a
    CI run) call what the CLI calls in this process: a `bin/lab` process spends about a second starting and importing
    the Kubernetes client, on the lab streams' critical paths (`bin/lab fault` itself: tests/lab/test_lab.py)."""
    if args[:1] in (("fault",), ("clear",)) and len(args) == {"fault": 3, "clear": 2}[args[0]]:
        proc = _faults_in_process(args, cell)
    else:
        proc = subprocess.run([str(ROOT / "bin" / "lab"), *args], capture_output=True, text=True, env=lab_env(cell),
                              check=False, timeout=3600)
    if check and proc.returncode != 0:
        raise AssertionError("lab %s (%s) failed (%d):\n%s\n%s" % (" ".join(args), cell or "default cell",
                                                                  proc.returncode, proc.stdout[-5000:],
                                                                  proc.stderr[-5000:]))
    return proc


def lab_env(cell: str = "") -> dict:
    """The environment `bin/lab` runs in from a test: this run's virtualenv, and ``cell`` when given."""
    return dict(os.environ, GPUFLEET_VENV=str(pathlib.Path(sys.executable).parents[1]), **(
        {"GPUFLEET_LAB_CELL": cell} if cell else {}))


def _faults_in_process(args, cell: str) -> subprocess.CompletedProcess:
    """`lab fault HOST KIND` or `lab clear HOST` as gpufleet_lab.__main__ runs them (faults.inject / faults.clear),
    with the CLI's output and exit status: a LabError is the CLI's message and status 1, any other failure status 1
    with its traceback (the CLI would have died with it), so check=False callers see a failure as before."""
    from gpufleet_lab import faults
    from gpufleet_lab.procs import LabError
    try:
        cfg = lab_config.load(cell=cell)
        if args[0] == "fault":
            out = "lab: fault %s on %s: %s\n" % (args[2], args[1], faults.inject(cfg, args[1], args[2]))
        else:
            faults.clear(cfg, args[1])
            out = "lab: faults cleared on %s\n" % args[1]
    except LabError as exc:
        return subprocess.CompletedProcess(["lab", *args], 1, "", "lab: error: %s\n" % exc)
    except Exception:  # the CLI's process would have died with it: a failed call, not an error of the test
        return subprocess.CompletedProcess(["lab", *args], 1, "", traceback.format_exc())
    return subprocess.CompletedProcess(["lab", *args], 0, out, "")


def podman_exec(host: str, *cmd: str, stdin: str = "") -> subprocess.CompletedProcess:
    return subprocess.run(["podman", "exec", "-i", lab_hosts.container(lab_config.load(), host), *cmd], input=stdin,
                          capture_output=True, text=True, check=False, timeout=600)


def apiserver_get(cfg, host: str, path: str, timeout: float = 10) -> str:
    """What the host's own kube-apiserver answers at ``path`` now, read as the lab's admin."""
    ctx = ssl.create_default_context(cafile=str(cfg.pki / "ca.crt"))
    ctx.load_cert_chain(str(cfg.pki / "admin.crt"), str(cfg.pki / "admin.key"))
    with urllib.request.urlopen(cfg.apiserver_url(host) + path, context=ctx, timeout=timeout) as resp:
        return resp.read().decode()


def apiserver_version(cfg, host: str) -> str:
    """What the host's own kube-apiserver answers at /version now (not what the lab's state file says)."""
    return json.loads(apiserver_get(cfg, host, "/version"))["gitVersion"]


def wait_control_plane(cfg, versions: dict, timeout: float = 120) -> dict:
    """Wait until every control-plane host runs each of its static pods at ``versions[host]`` (what `lab status`
    reports: the running manifest's version while its process lives), and return that report; a controller manager
    or scheduler that exited when its apiserver went away is started again by the lab after a backoff."""
    want = {h: dict.fromkeys(lab_kubeadm.COMPONENTS, v) for h, v in versions.items()}
    deadline = time.time() + timeout
    while True:
        seen = json.loads(lab_cli("status", cell=cfg.cell).stdout)["control_plane"]
        if seen == want or time.time() > deadline:
            assert seen == want
            return seen
        time.sleep(2)


def etcd_flags(cfg) -> list:
    """What every etcdctl call on a lab host needs: the cell's client endpoint and the lab's client certificate."""
    return ["--endpoints=https://127.0.0.1:%d" % cfg.ports["etcd"], "--cacert=/etc/kubernetes/pki/ca.crt",
            "--cert=/etc/kubernetes/pki/etcd-client.crt", "--key=/etc/kubernetes/pki/etcd-client.key"]


def s3_client(cfg):
    """A client of the lab's S3 server (versitygw) with its lab-only keys."""
    import boto3
    return boto3.client("s3", endpoint_url="http://127.0.0.1:%d" % cfg.ports["s3"], region_name="us-east-1",
                        aws_access_key_id=cfg.s3["access_key"], aws_secret_access_key=cfg.s3["secret_key"])


@pytest.fixture(scope="session")
def lab():
    cfg = lab_config.load()
    before = lab_cli("status", check=False)
    was_up = before.returncode == 0 and json.loads(before.stdout)["processes"]
    proc = lab_cli("up")
    print(proc.stdout[-3000:])
    yield cfg
    if not was_up and not os.environ.get("GPUFLEET_LAB_KEEP"):
        lab_cli("down")


@pytest.fixture(scope="session")
def ee_image(lab):
    """The execution-environment image (ansible-builder from execution-environment.yml; layer-cached)."""
    return lab_cli("ee").stdout.strip().splitlines()[-1]
