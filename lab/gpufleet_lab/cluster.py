"""The lab's real control plane: etcd, one kube-apiserver per control-plane host, kube-controller-manager,
kube-scheduler, KWOK, and the Node objects of the lab's hosts."""
from __future__ import annotations

import hashlib
import json
import os
import pathlib
import subprocess
import threading
import time
from typing import Any, Dict, List, Optional, Tuple

import yaml

from gpufleet_lab import pki, procs
from gpufleet_lab.config import LAB_DIR, LabConfig
from gpufleet_lab.procs import LabError

STATE_FILE = "cluster/state.json"  # also mounted read-only into every lab host for the simulators
# Written once `lab up` has started the control plane, removed when it starts and by `lab down`: only then does
# the lab controller's kubelet stand-in restart an apiserver (controller.StaticPods).
UP_MARK = "cluster/control-plane-up"


def say(msg: str) -> None:
    print("lab: " + msg, flush=True)


# -- state: which version each control-plane host's apiserver runs, and each node's kubelet ------------------------
def load_state(cfg: LabConfig) -> Dict[str, Any]:
    path = cfg.run / STATE_FILE
    if path.exists():
        return json.loads(path.read_text())
    return {"apiserver": {h: cfg.from_version for h in cfg.control_plane},
            "kubelet": {h: cfg.from_version for h in cfg.hosts}}


def save_state(cfg: LabConfig, state: Dict[str, Any]) -> None:
    write_atomic(cfg.run / STATE_FILE, json.dumps(state, indent=2, sort_keys=True))


_STATE_LOCK = threading.Lock()


def update_state(cfg: LabConfig, part: str, host: str, version: str) -> Dict[str, Any]:
    """Record that ``host``'s ``part`` (apiserver, kubelet) runs ``version``: read, change and write under one lock
    (the lab controller's threads both record); returns the new state."""
    with _STATE_LOCK:
        state = load_state(cfg)
        state[part][host] = version
        save_state(cfg, state)
        return state


def _vkey(version: str) -> Tuple[int, ...]:
    return tuple(int(x) for x in version.lstrip("v").split("-")[0].split("."))


def oldest(versions: List[str]) -> str:
    return min(versions, key=_vkey)


def newest(versions: List[str]) -> str:
    return max(versions, key=_vkey)


# -- builds --------------------------------------------------------------------------------------------------------
def build_stamp(what: str) -> str:
    """What a finished build of ``what`` records in its .done stamp (go-binaries.sh): the hash of the lab's own Go
    source for the builds that have one (a changed source is built again), else nothing."""
    source = LAB_DIR / "build" / what / "main.go"
    return hashlib.sha256(source.read_bytes()).hexdigest() if source.exists() else ""


def _read(path: pathlib.Path) -> Optional[str]:
    return path.read_text() if path.exists() else None


def build(cfg: LabConfig, dry_run: bool = False) -> bool:
    """Build what is not cached. ``dry_run``: set up and check the first build that is needed, then stop before
    its downloads (a fresh machine's set-up, tested without the minutes of a build); returns True when it stopped."""
    script = LAB_DIR / "build" / "go-binaries.sh"
    jobs = [("etcd", cfg.etcd_version), ("kwok", cfg.kwok_version)] + [("kubernetes", v) for v in cfg.versions]
    jobs += [("kubelet-configz", v) for v in cfg.versions]  # the simulated kubelets' /configz (kubelets.py)
    jobs += [("versitygw", cfg.versitygw_version), ("helm", cfg.helm_version)]
    expected = {"etcd": ["etcd", "etcdctl", "etcdutl"], "kwok": ["kwok", "stages.yaml"], "versitygw": ["versitygw"],
                "helm": ["helm"], "kubelet-configz": ["kubelet-configz"],
                "kubernetes": ["kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl", "kubeadm"]}
    for what, version in jobs:
        bindir = cfg.bin_dir(what, version)
        if build_stamp(what) == _read(bindir / ".done") and all((bindir / f).exists() for f in expected[what]):
            continue
        (bindir / ".done").unlink(missing_ok=True)
        if dry_run:
            proc = subprocess.run(["bash", str(script), what, version], check=False, env=dict(
                os.environ, GPUFLEET_LAB_CACHE=str(cfg.cache), GPUFLEET_LAB_BUILD_DRY_RUN="1"))
            if proc.returncode != 0:
                raise LabError("setting up the build of %s %s failed (exit %d)" % (what, version, proc.returncode))
            return True
        say("building %s %s from its Go module (cached in %s; a cold build takes minutes)" % (
            what, version, cfg.bin_dir(what, version)))
        started = time.time()
        proc = subprocess.run(["bash", str(script), what, version], check=False,
                              env=dict(os.environ, GPUFLEET_LAB_CACHE=str(cfg.cache)))
        if proc.returncode != 0:
            raise LabError("building %s %s failed (exit %d); see the output above" % (what, version, proc.returncode))
        say("built %s %s in %.0f s" % (what, version, time.time() - started))
    return False


# -- etcd ------------------------------------------------------------------------------------------------------------
def etcd_url(cfg: LabConfig) -> str:
    return "https://127.0.0.1:%d" % cfg.ports["etcd"]


# The cell's one etcd member is the etcd host's static pod (SIMULATION of its kubelet: the lab controller stops and
# starts the real etcd as /etc/kubernetes/manifests/etcd.yaml goes and comes, controller.StaticPods): it runs here,
# on the lab machine, with its data directory in the host's state directory, which the host sees at
# ETCD_DATA_ON_HOST - so a restore's etcdutl and its swap of data directories on the host act on the real member.
ETCD_DATA_ON_HOST = "/var/lib/gpufleet-lab/etcd-data"


def etcd_host(cfg: LabConfig) -> str:
    return cfg.control_plane[0]


def etcd_data(cfg: LabConfig) -> pathlib.Path:
    return cfg.run / "hosts" / etcd_host(cfg) / pathlib.PurePosixPath(ETCD_DATA_ON_HOST).name


def start_etcd(cfg: LabConfig) -> None:
    p = cfg.pki
    data = etcd_data(cfg)
    if not data.exists() and (cfg.run / "etcd" / "member").is_dir() and not procs.pid_of(cfg.run, "etcd"):
        data.parent.mkdir(parents=True, exist_ok=True)  # a cell made before the member moved to its host
        (cfg.run / "etcd").rename(data)
    data.mkdir(parents=True, exist_ok=True)
    data.chmod(0o700)
    peer = "http://127.0.0.1:%d" % cfg.ports["etcd_peer"]
    argv = [str(cfg.bin_dir("etcd", cfg.etcd_version) / "etcd"), "--name=lab", "--data-dir=%s" % data,
            "--listen-client-urls=%s" % etcd_url(cfg), "--advertise-client-urls=%s" % etcd_url(cfg),
            "--listen-peer-urls=%s" % peer, "--initial-advertise-peer-urls=%s" % peer,
            "--initial-cluster=lab=%s" % peer, "--cert-file=%s" % (p / "etcd-server.crt"),
            "--key-file=%s" % (p / "etcd-server.key"), "--trusted-ca-file=%s" % (p / "ca.crt"),
            "--client-cert-auth=true", "--unsafe-no-fsync=true", "--quota-backend-bytes=2147483648",
            "--log-level=warn"]
    if not procs.pid_of(cfg.run, "etcd"):
        say("starting etcd %s on %s" % (cfg.etcd_version, etcd_url(cfg)))
        procs.start(cfg.run, "etcd", argv)
    procs.wait_https(etcd_url(cfg) + "/health", p, cfg.run, "etcd", client="etcd-client")


# -- apiservers ------------------------------------------------------------------------------------------------------
# Where a control-plane host's paths are on the lab machine (the host container's mounts, hosts.py): the lab plays
# the host's kubelet, so it runs a static pod's command with the host's paths made the lab's.
PKI_ON_HOST = "/etc/kubernetes/pki/"


def apiserver_argv(cfg: LabConfig, manifest: str) -> Tuple[str, List[str]]:
    """The version and command line of a kube-apiserver static pod manifest (kubeadm's), as the lab runs it: the
    built binary of the image's version, every flag as the manifest gives it, the certificate directory the host
    mounts at /etc/kubernetes/pki being the lab's own."""
    from gpufleet_lab import kubeadm
    version = kubeadm.manifest_version(manifest)
    command = (yaml.safe_load(manifest)["spec"]["containers"][0].get("command") or [])
    if command[:1] != ["kube-apiserver"]:
        raise LabError("kube-apiserver manifest runs %r, not kube-apiserver" % command[:1])
    binary = cfg.bin_dir("kubernetes", version) / "kube-apiserver"
    if not binary.exists():
        raise LabError("the lab has no kube-apiserver %s (it builds %s)" % (version, ", ".join(cfg.versions)))
    return version, [str(binary)] + [a.replace(PKI_ON_HOST, str(cfg.pki) + "/") for a in command[1:]]


def write_atomic(path: pathlib.Path, text: str) -> None:
    """Write ``path`` whole or not at all (a reader in another thread or process never sees half of it)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(".%s.%d.%d.tmp" % (path.name, os.getpid(), threading.get_ident()))
    tmp.write_text(text)
    tmp.replace(path)


def start_apiserver(cfg: LabConfig, host: str, text: Optional[str] = None) -> str:
    """Start ``host``'s kube-apiserver from its manifest ``text`` (default: the file kubeadm wrote) and wait until it
    is ready; a process already running other flags is restarted. What runs is recorded as the host's running
    manifest (its mirror pod's source); returns its version."""
    from gpufleet_lab import kubeadm
    name = "apiserver-" + host
    if text is None:
        text = (kubeadm.manifests_dir(cfg, host) / "kube-apiserver.yaml").read_text()
    version, argv = apiserver_argv(cfg, text)
    pid = procs.pid_of(cfg.run, name)
    if pid and procs.cmdline(pid) != argv:
        say("kube-apiserver for %s runs other flags than its manifest; restarting it" % host)
        procs.stop(cfg.run, name, timeout=APISERVER_GRACE_SECONDS)
        pid = None
    if not pid:
        say("starting kube-apiserver %s for %s on 127.0.0.1:%d" % (version, host, cfg.apiserver_port(host)))
        procs.start(cfg.run, name, argv)
    procs.wait_https("https://127.0.0.1:%d/readyz" % cfg.apiserver_port(host), cfg.pki, cfg.run, name, timeout=180)
    write_atomic(kubeadm.running_manifest(cfg, host, "kube-apiserver"), text)
    return version


# The lab plays the kubelet for the control plane's static pods: SIGTERM, then SIGKILL after this grace period. An
# apiserver still holding clients' watch connections (the controllers', KWOK's, through the lab's load balancer)
# waits for them before it exits - up to the stop's whole timeout, 15 s per restart here. kubeadm's static pods
# give 30 s; nothing gpufleet checks depends on the old apiserver's goodbye, so the lab gives 3.
APISERVER_GRACE_SECONDS = 3.0


def restart_apiserver(cfg: LabConfig, host: str, text: str) -> str:
    """Run manifest ``text`` in place of ``host``'s kube-apiserver; one that cannot run (LabError) stops nothing."""
    apiserver_argv(cfg, text)  # runnable first
    procs.stop(cfg.run, "apiserver-" + host, timeout=APISERVER_GRACE_SECONDS)
    return start_apiserver(cfg, host, text)


# -- controller-manager, scheduler, kwok ---------------------------------------------------------------------------
def component_kubeconfigs(cfg: LabConfig) -> None:
    lb = "https://127.0.0.1:%d" % cfg.ports["apiserver_lb"]
    for user in ("admin", "controller-manager", "scheduler", "kwok", "lab-controller"):
        pki.kubeconfig(cfg.pki, lb, user, cfg.run / "kubeconfigs" / (user + ".conf"))
    pki.kubeconfig(cfg.pki, lb, "admin", cfg.kubeconfig)


def start_controllers(cfg: LabConfig, version: str) -> None:
    """kube-controller-manager and kube-scheduler never run newer than the oldest apiserver."""
    p = cfg.pki
    kc = cfg.run / "kubeconfigs"
    kcm = [str(cfg.bin_dir("kubernetes", version) / "kube-controller-manager"),
           "--kubeconfig=%s" % (kc / "controller-manager.conf"),
           "--authentication-kubeconfig=%s" % (kc / "controller-manager.conf"),
           "--authorization-kubeconfig=%s" % (kc / "controller-manager.conf"),
           "--bind-address=127.0.0.1", "--secure-port=%d" % cfg.ports["controller_manager"],
           "--leader-elect=false", "--use-service-account-credentials=true",
           "--service-account-private-key-file=%s" % (p / "sa.key"), "--root-ca-file=%s" % (p / "ca.crt"),
           "--cluster-signing-cert-file=%s" % (p / "ca.crt"), "--cluster-signing-key-file=%s" % (p / "ca.key"),
           "--node-monitor-grace-period=60s", "--v=1"]
    sched = [str(cfg.bin_dir("kubernetes", version) / "kube-scheduler"),
             "--kubeconfig=%s" % (kc / "scheduler.conf"),
             "--authentication-kubeconfig=%s" % (kc / "scheduler.conf"),
             "--authorization-kubeconfig=%s" % (kc / "scheduler.conf"),
             "--bind-address=127.0.0.1", "--secure-port=%d" % cfg.ports["scheduler"], "--leader-elect=false",
             "--v=1"]
    for name, argv in (("controller-manager", kcm), ("scheduler", sched)):
        if not procs.pid_of(cfg.run, name):
            say("starting kube-%s %s" % (name, version))
            procs.start(cfg.run, name, argv)
            (cfg.run / (name + ".version")).write_text(version)
        procs.wait_healthz_insecure(cfg.ports[name.replace("-", "_")], cfg.run, name)


def controllers_version(cfg: LabConfig) -> str:
    try:
        return (cfg.run / "controller-manager.version").read_text().strip()
    except OSError:
        return ""


# Pods with this annotation run a workload the lab simulates (workloads.py writes the canaries' results and ends
# them; the training gang's ranks, "training", run until stopped): KWOK's stock pod-complete stage, which ends every
# Job pod at once with no result, leaves them alone.
SIMULATED_WORKLOAD = "gpufleet-lab/workload"


def kwok_stages(cfg: LabConfig) -> str:
    """KWOK's stock stages (built with KWOK), with pod-complete skipping the pods workloads.py ends."""
    docs = list(yaml.safe_load_all((cfg.bin_dir("kwok", cfg.kwok_version) / "stages.yaml").read_text()))
    stages = [d for d in docs if d]
    complete = [d for d in stages if d["metadata"]["name"] == "pod-complete"]
    if len(complete) != 1:
        raise LabError("KWOK's stages.yaml has %d pod-complete stages, expected 1" % len(complete))
    complete[0]["spec"]["selector"]["matchExpressions"].append(
        {"key": '.metadata.annotations["%s"]' % SIMULATED_WORKLOAD, "operator": "DoesNotExist"})
    path = cfg.run / "kwok-stages.yaml"
    path.write_text(yaml.safe_dump_all(stages, sort_keys=False))
    return str(path)


def start_kwok(cfg: LabConfig) -> None:
    if procs.pid_of(cfg.run, "kwok"):
        return
    stages = kwok_stages(cfg)
    say("starting KWOK %s (keeps the lab's Node objects alive and moves pods through their lifecycle)" %
        cfg.kwok_version)
    argv = [str(cfg.bin_dir("kwok", cfg.kwok_version) / "kwok"),
            "--kubeconfig=%s" % (cfg.run / "kubeconfigs" / "kwok.conf"),
            "--manage-all-nodes=false", "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
            # the Nodes' own addresses are in their status (kube.node_object); the port is their kubelets'
            "--node-ip=127.0.0.1", "--node-port=%d" % cfg.ports["kubelet"], "--node-lease-duration-seconds=40",
            "--server-address=127.0.0.1:%d" % (cfg.ports["kwok"] + 1),
            "--config=%s" % stages]
    procs.start(cfg.run, "kwok", argv)


# -- S3 --------------------------------------------------------------------------------------------------------------
def s3_url(cfg: LabConfig) -> str:
    return "http://127.0.0.1:%d" % cfg.ports["s3"]


def start_s3(cfg: LabConfig) -> None:
    """The lab's S3-compatible object store (versitygw over a directory of the run dir), with the bucket the etcd
    snapshots are shipped to. Loopback only, plain HTTP; its keys are lab-only (lab/lab.yml)."""
    root = cfg.run / "s3"
    (root / cfg.s3["bucket"]).mkdir(parents=True, exist_ok=True)  # a bucket is a top-level directory
    if not procs.pid_of(cfg.run, "s3"):
        say("starting the S3 server (versitygw %s) on %s, bucket %s" % (cfg.versitygw_version, s3_url(cfg),
                                                                       cfg.s3["bucket"]))
        # posix keeps object metadata in extended attributes (multipart uploads need it: no --nometa)
        argv = [str(cfg.bin_dir("versitygw", cfg.versitygw_version) / "versitygw"),
                "--port=127.0.0.1:%d" % cfg.ports["s3"], "posix", str(root)]
        procs.start(cfg.run, "s3", argv, env={"ROOT_ACCESS_KEY": cfg.s3["access_key"],
                                              "ROOT_SECRET_KEY": cfg.s3["secret_key"]})
    procs.wait_port(cfg.run, "s3", cfg.ports["s3"])
