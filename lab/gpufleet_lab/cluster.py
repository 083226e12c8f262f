"""The lab's real control plane: etcd, and on each control-plane host (in its own network namespace, network.py) the
kube-apiserver, kube-controller-manager and kube-scheduler of kubeadm's static pod manifests; KWOK, and the Node
objects of the lab's hosts."""
from __future__ import annotations

import hashlib
import json
import os
import pathlib
import subprocess
import threading
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

import yaml

from gpufleet_lab import network, pki, procs
from gpufleet_lab.config import LAB_DIR, LabConfig
from gpufleet_lab.procs import LabError

STATE_FILE = "cluster/state.json"  # also mounted read-only into every lab host for the simulators
# Written once `lab up` has started the control plane, removed when it starts and by `lab down`: only then does
# the lab controller's kubelet stand-in restart an apiserver (controller.StaticPods).
UP_MARK = "cluster/control-plane-up"
# What a cell's state was made for: 2, each control-plane host in its own network namespace (network.py), its
# apiserver on the host's address, etcd reached on the lab's bridge; 3, the apiservers write an audit log (kubeadm's
# ClusterConfiguration, kubeadm.AUDIT_VOLUMES); 4, etcd is one member per control-plane host (etcd_members). A cell
# made for another is reset, not mended.
LAYOUT_FILE, CELL_LAYOUT = "cluster/layout", "4"


def say(msg: str) -> None:
    print("lab: " + msg, flush=True)


# -- state: which version each control-plane host's apiserver runs, and each node's kubelet ------------------------
def load_state(cfg: LabConfig) -> Dict[str, Any]:
    path = cfg.run / STATE_FILE
    if path.exists():
        return json.loads(path.read_text())
    return {"apiserver": {h: cfg.from_version for h in cfg.control_plane},
            "kubelet": {h: cfg.from_version for h in cfg.hosts}}


def check_layout(cfg: LabConfig) -> None:
    """Refuse a cell whose state an older lab made (its manifests, certificates and kubeadm-config name other
    addresses), naming the fix; record the layout of a new one."""
    if (cfg.run / STATE_FILE).exists() and _read(cfg.run / LAYOUT_FILE) != CELL_LAYOUT + "\n":
        raise LabError("cell %s was made by an older lab (layout %s; this lab makes layout %s, CELL_LAYOUT in "
                       "lab/gpufleet_lab/cluster.py says what changed); forget its state with `GPUFLEET_LAB_CELL=%s "
                       "bin/lab reset`, then `bin/lab up`" % (
                           cfg.cell, (_read(cfg.run / LAYOUT_FILE) or "1").strip(), CELL_LAYOUT, cfg.cell))
    write_atomic(cfg.run / LAYOUT_FILE, CELL_LAYOUT + "\n")


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
    jobs = [("etcd", v) for v in cfg.etcd_versions] + [("kwok", cfg.kwok_version)]
    jobs += [("kubernetes", v) for v in cfg.versions]
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
# The cell's etcd: one member per control-plane host (three in `lab` and `lab-b`), each the host's static pod
# /etc/kubernetes/manifests/etcd.yaml (kubeadm.etcd_static_pod), as kubeadm's guide to an external etcd run by
# kubelets writes it; kubeadm-config names them as external etcd. SIMULATION of the hosts' kubelets: the lab
# controller runs each member here, on the lab machine, from its manifest - the etcd build of the image's version,
# stopped while the manifest is gone, restarted when it changes (controller.StaticPods) - with its data directory in
# the host's state directory, which the host sees at ETCD_DATA_ON_HOST: a restore's etcdutl and its swap of data
# directories, and an upgrade's new image, act on the real member.
ETCD_DATA_ON_HOST = "/var/lib/gpufleet-lab/etcd-data"
ETCD_IMAGE = "registry.k8s.io/etcd"
# LAB ONLY: the members run before the lab's other processes on the machine's two cores (nice -10), as a real
# cell's etcd has hosts or cores of its own: a quorum write waits for two members, and a member starved by a busy
# lab machine made a clean apiserver's write p99 fail the control-plane soak (0.34 s against 0.15 s).
ETCD_NICE = -10


def etcd_members(cfg: LabConfig) -> List[str]:
    """The hosts whose static pod is an etcd member (each member is named after its host)."""
    return list(cfg.control_plane)


def etcd_url(cfg: LabConfig, host: str) -> str:
    """``host``'s member's client URL on the lab machine's loopback: what it advertises, where etcdctl on the hosts
    (host network) and the lab's own checks reach it."""
    return "https://127.0.0.1:%d" % (cfg.ports["etcd"] + etcd_members(cfg).index(host))


def etcd_urls(cfg: LabConfig) -> List[str]:
    return [etcd_url(cfg, h) for h in etcd_members(cfg)]


def etcd_peer_url(cfg: LabConfig, host: str) -> str:
    return "http://127.0.0.1:%d" % (cfg.ports["etcd_peer"] + etcd_members(cfg).index(host))


def etcd_endpoints(cfg: LabConfig) -> List[str]:
    """Every member's client URL on the lab's bridge: where the apiservers, each in its host's network namespace,
    reach etcd (kubeadm-config's external etcd endpoints)."""
    return ["https://%s:%d" % (network.lab_address(cfg), cfg.ports["etcd"] + i)
            for i, _ in enumerate(etcd_members(cfg))]


def etcd_data(cfg: LabConfig, host: str) -> pathlib.Path:
    return cfg.run / "hosts" / host / pathlib.PurePosixPath(ETCD_DATA_ON_HOST).name


def etcd_process(host: str) -> str:
    return "etcd-" + host


def etcd_manifest_version(text: str) -> str:
    """The etcd release a member's static pod runs: its image's tag (kubeadm's form, 3.6.16-0) as v3.6.16."""
    from gpufleet_lab import kubeadm
    return "v" + kubeadm.manifest_version(text).split("-")[0].lstrip("v")


# LAB ONLY: raft's heartbeat every 500 ms and an election after 5 s without one (etcd's defaults: 100 ms and 1 s, its
# tuning guide's values for a LAN). Three idle members of each cell sent and answered ten heartbeats a second on the
# lab machine's two shared cores; the members still elect in seconds, and a leader that is stopped hands its
# leadership over first, as etcd does on a clean shutdown.
ETCD_LAB_TIMING = ["--heartbeat-interval=500", "--election-timeout=5000"]
# A leader that is stopped hands its leadership over first and waits for that up to its request timeout, 5 s + twice
# the election timeout: 15 s here. A member's stop allows more before SIGKILL (a leader killed mid-hand-over left a
# CI run's etcd window with a new member that could not bind its peer port, the old one still exiting).
ETCD_GRACE_SECONDS = 30.0
# LAB ONLY: the Go runtime's garbage collector lets the heap grow to five times the live data between collections,
# not twice (GOGC=400; Go's default is 100), in the lab's etcd members, apiservers, controller managers, schedulers and
# KWOK: every lab cell runs beside the others on two cores, and collecting was a good part of an idle control plane's
# CPU (an idle lab-b cell's apiservers 8.9 -> 7.7 CPU-s a minute, etcd 5.7 -> 5.2, measured beside an unchanged
# cell). The cost is memory: an apiserver's RSS about 1.0 GB, not 0.4 GB (about 10 GB for the apiservers of the four
# cells up at once in CI; the machine has 24 GiB). The soak's memory signal compares an apiserver with its own reading
# before and its peers, all run alike.
# (GOMAXPROCS=1 as well cut an idle lab-b cell's CPU 10.8 -> 9.4 CPU-s a minute. Under CI's load it is unmeasured:
# the one run with it was as slow as the next one without it, both on a machine 20-30 % slower per task than the
# morning's runs (docs/measurements.md). Not kept until a paired run shows it helps.)
GO_LAB_ENV = {"GOGC": "400"}


def etcd_argv(cfg: LabConfig, host: str, text: str) -> Tuple[str, List[str]]:
    """The version and command line of ``host``'s member as its manifest ``text`` asks for it; a version the lab
    has not built is refused (LabError), as a kubelet's image pull would fail."""
    version = etcd_manifest_version(text)
    binary = cfg.bin_dir("etcd", version) / "etcd"
    if not binary.exists():
        raise LabError("etcd's manifest on %s asks for etcd %s, which the lab has not built (it builds %s)" % (
            host, version, ", ".join(cfg.etcd_versions)))
    p = cfg.pki
    members = etcd_members(cfg)
    i = members.index(host)
    cluster_list = ",".join("%s=%s" % (h, etcd_peer_url(cfg, h)) for h in members)
    client = "https://127.0.0.1:%d,https://%s:%d" % (cfg.ports["etcd"] + i, network.lab_address(cfg),
                                                     cfg.ports["etcd"] + i)
    return version, [
        str(binary), "--name=%s" % host, "--data-dir=%s" % etcd_data(cfg, host),
        "--listen-client-urls=%s" % client, "--advertise-client-urls=%s" % etcd_url(cfg, host),
        "--listen-peer-urls=%s" % etcd_peer_url(cfg, host),
        "--initial-advertise-peer-urls=%s" % etcd_peer_url(cfg, host),
        "--initial-cluster=%s" % cluster_list, "--initial-cluster-token=gpufleet-%s" % cfg.cell,
        "--cert-file=%s" % (p / "etcd-server.crt"), "--key-file=%s" % (p / "etcd-server.key"),
        "--trusted-ca-file=%s" % (p / "ca.crt"), "--client-cert-auth=true", "--unsafe-no-fsync=true",
        "--quota-backend-bytes=2147483648", "--log-level=warn"] + ETCD_LAB_TIMING


def start_etcd_member(cfg: LabConfig, host: str, text: Optional[str] = None, wait: bool = True) -> str:
    """Start ``host``'s member from its manifest ``text`` (default: the file on the host) unless it runs; with
    ``wait``, until it answers healthy (a lone member of three does not: start them all, then wait). What runs is
    recorded as the host's running etcd manifest; returns its version."""
    from gpufleet_lab import kubeadm
    if text is None:
        text = (kubeadm.manifests_dir(cfg, host) / "etcd.yaml").read_text()
    version, argv = etcd_argv(cfg, host, text)
    data = etcd_data(cfg, host)
    data.mkdir(parents=True, exist_ok=True)
    data.chmod(0o700)
    name = etcd_process(host)
    if not procs.pid_of(cfg.run, name):
        say("starting etcd %s, member %s, on %s" % (version, host, etcd_url(cfg, host)))
        procs.start(cfg.run, name, ["nice", "-n", str(ETCD_NICE)] + argv, env=GO_LAB_ENV)  # nice execs it
    write_atomic(kubeadm.running_manifest(cfg, host, "etcd"), text)
    if wait:
        procs.wait_https(etcd_url(cfg, host) + "/health", cfg.pki, cfg.run, name, client="etcd-client")
    return version


def start_etcd(cfg: LabConfig) -> None:
    """Every member from its host's manifest, side by side (a new cluster has no quorum until they all run), then
    each waited for."""
    for host in etcd_members(cfg):
        start_etcd_member(cfg, host, wait=False)
    for host in etcd_members(cfg):
        procs.wait_https(etcd_url(cfg, host) + "/health", cfg.pki, cfg.run, etcd_process(host),
                         client="etcd-client")


# -- the control plane's static pods ---------------------------------------------------------------------------------
# Where a control-plane host's files are on the lab machine: the lab plays the host's kubelet, so it runs a static
# pod's command with the host's paths made the lab's - the certificate directory the host mounts at
# /etc/kubernetes/pki, and the kubeconfigs kubeadm's manifests name (kubeadm.init_kubeconfigs writes them per host).
PKI_ON_HOST = "/etc/kubernetes/pki/"
PROCESS = {"kube-apiserver": "apiserver", "kube-controller-manager": "controller-manager",
           "kube-scheduler": "scheduler"}
COMPONENT_USERS = ("controller-manager", "scheduler")  # kubeadm's /etc/kubernetes/USER.conf, the lab's PKI names


def process_name(component: str, host: str) -> str:
    """The lab's name for the process that runs ``host``'s static pod ``component`` (its pid file and log)."""
    return "%s-%s" % (PROCESS[component], host)


def host_kubeconfig(cfg: LabConfig, host: str, user: str) -> pathlib.Path:
    """``host``'s /etc/kubernetes/USER.conf (controller-manager, scheduler) as the lab keeps it."""
    return cfg.run / "hosts" / host / "etc-kubernetes" / (user + ".conf")


# The audit policy every control-plane host has (the ClusterConfiguration's apiServer.extraVolumes mount it and the
# log's directory, kubeadm.AUDIT_VOLUMES): Metadata for every request but the health and metrics endpoints, which is
# enough for the k8s.io/deprecated and k8s.io/removed-release annotations (docs/stages.md).
AUDIT_POLICY = """apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  - level: None
    nonResourceURLs: ["/healthz*", "/livez*", "/readyz*", "/metrics", "/version"]
  - level: Metadata
"""
AUDIT_POLICY_ON_HOST = "/etc/kubernetes/audit-policy.yaml"
AUDIT_LOG_ON_HOST = "/var/log/kubernetes/audit/"


def audit_policy(cfg: LabConfig) -> pathlib.Path:
    """The cell's audit policy file, written when missing or different."""
    path = cfg.run / "audit-policy.yaml"
    if not path.exists() or path.read_text() != AUDIT_POLICY:
        write_atomic(path, AUDIT_POLICY)
    return path


def audit_log_dir(cfg: LabConfig, host: str) -> pathlib.Path:
    """``host``'s /var/log/kubernetes/audit as the lab keeps it (its apiserver writes it, its sshd reads it)."""
    path = cfg.run / "hosts" / host / "audit-log"
    path.mkdir(parents=True, exist_ok=True)
    return path


def host_paths(cfg: LabConfig, host: str) -> List[Tuple[str, str]]:
    """(path on the host, the lab machine's path) for each file of ``host`` kubeadm's manifests name."""
    return [(PKI_ON_HOST, str(cfg.pki) + "/"), (AUDIT_POLICY_ON_HOST, str(audit_policy(cfg))),
            (AUDIT_LOG_ON_HOST, str(audit_log_dir(cfg, host)) + "/")] + [
        ("/etc/kubernetes/%s.conf" % user, str(host_kubeconfig(cfg, host, user))) for user in COMPONENT_USERS]


def component_argv(cfg: LabConfig, host: str, component: str, manifest: str) -> Tuple[str, List[str]]:
    """The version and command line of ``host``'s static pod manifest of ``component`` (kubeadm's), as the lab runs
    it: the built binary of the image's version, every flag as the manifest gives it, the host's paths made the
    lab machine's (host_paths)."""
    from gpufleet_lab import kubeadm
    version = kubeadm.manifest_version(manifest)
    command = (yaml.safe_load(manifest)["spec"]["containers"][0].get("command") or [])
    if command[:1] != [component]:
        raise LabError("%s manifest runs %r, not %s" % (component, command[:1], component))
    binary = cfg.bin_dir("kubernetes", version) / component
    if not binary.exists():
        raise LabError("the lab has no %s %s (it builds %s)" % (component, version, ", ".join(cfg.versions)))
    argv = [str(binary)]
    for given in command[1:]:
        for on_host, here in host_paths(cfg, host):
            given = given.replace(on_host, here)  # noqa: PLW2901 - each mapping applies to the flag mapped so far
        argv.append(given)
    return version, argv


def probe_url(cfg: LabConfig, host: str, manifest: str) -> str:
    """The URL a kubelet probes a static pod at before it counts as up: the manifest's readiness probe, else its
    startup or liveness probe (kubeadm's: HTTPS on the host's address or 127.0.0.1); with no host, the pod's
    address, which for a host-network pod is the host's."""
    container = yaml.safe_load(manifest)["spec"]["containers"][0]
    named = {p.get("name"): p.get("containerPort") for p in container.get("ports") or []}
    for kind in ("readinessProbe", "startupProbe", "livenessProbe"):
        get = (container.get(kind) or {}).get("httpGet")
        if get:
            port = named.get(get.get("port"), get.get("port"))  # kubeadm names its port: probe-port
            if not isinstance(port, int):
                raise LabError("%s's %s probes port %r, which is neither a number nor a port the container names" % (
                    container.get("name"), kind, get.get("port")))
            return "%s://%s:%d%s" % (str(get.get("scheme") or "HTTP").lower(), get.get("host") or
                                     cfg.node_address(host), port, get.get("path") or "/")
    raise LabError("%s's manifest on %s has no HTTP probe; the lab waits on one" % (container.get("name"), host))


def write_atomic(path: pathlib.Path, text: str) -> None:
    """Write ``path`` whole or not at all (a reader in another thread or process never sees half of it)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(".%s.%d.%d.tmp" % (path.name, os.getpid(), threading.get_ident()))
    tmp.write_text(text)
    tmp.replace(path)


def start_component(cfg: LabConfig, host: str, component: str, text: Optional[str] = None,
                    cancel: Optional[Callable[[], bool]] = None) -> str:
    """Start ``host``'s static pod ``component`` from its manifest ``text`` (default: the file kubeadm wrote) in the
    host's network namespace, and wait until its probe passes; a process already running other flags is
    restarted. What runs is recorded as the host's running manifest (its mirror pod's source); returns its
    version. ``cancel``: the wait gives up (LabError) once it says so (the manifest changed meanwhile)."""
    from gpufleet_lab import kubeadm
    name = process_name(component, host)
    if text is None:
        text = (kubeadm.manifests_dir(cfg, host) / (component + ".yaml")).read_text()
    version, argv = component_argv(cfg, host, component, text)
    url = probe_url(cfg, host, text)
    pid = procs.pid_of(cfg.run, name)
    live = procs.cmdline(pid) if pid else []
    if live[:1] == ["nsenter"]:  # started a moment ago: nsenter has not exec'd it yet
        live = live[live.index("--") + 1:] if "--" in live else live
    if pid and live != argv:
        say("%s for %s runs other flags than its manifest; restarting it" % (component, host))
        procs.stop(cfg.run, name, timeout=APISERVER_GRACE_SECONDS)
        pid = None
    if not pid:
        say("starting %s %s for %s (network namespace %s)" % (component, version, host, network.netns(cfg, host)))
        procs.start(cfg.run, name, argv, env=GO_LAB_ENV, netns=network.netns(cfg, host))
    procs.wait_probe(url, cfg.run, name, timeout=180 if component == "kube-apiserver" else 90,
                     netns=network.netns(cfg, host), cancel=cancel)
    write_atomic(kubeadm.running_manifest(cfg, host, component), text)
    return version


# The lab plays the kubelet for the control plane's static pods: SIGTERM, then SIGKILL after this grace period. An
# apiserver still holding clients' watch connections (the controllers', KWOK's, through the lab's load balancer)
# waits for them before it exits - up to the stop's whole timeout, 15 s per restart here. kubeadm's static pods
# give 30 s; nothing gpufleet checks depends on the old apiserver's goodbye, so the lab gives 3.
APISERVER_GRACE_SECONDS = 3.0


def restart_component(cfg: LabConfig, host: str, component: str, text: str,
                      cancel: Optional[Callable[[], bool]] = None) -> str:
    """Run manifest ``text`` in place of ``host``'s ``component``; one that cannot run (LabError) stops nothing."""
    component_argv(cfg, host, component, text)  # runnable first
    probe_url(cfg, host, text)
    procs.stop(cfg.run, process_name(component, host), timeout=APISERVER_GRACE_SECONDS)
    return start_component(cfg, host, component, text, cancel)


def running_versions(cfg: LabConfig) -> Dict[str, Dict[str, str]]:
    """Per control-plane host, the version each of its static pods runs (its running manifest's, while its process
    lives)."""
    from gpufleet_lab import kubeadm
    out: Dict[str, Dict[str, str]] = {}
    for host in cfg.control_plane:
        for component in PROCESS:
            text = _read(kubeadm.running_manifest(cfg, host, component))
            if text is not None and procs.pid_of(cfg.run, process_name(component, host)):
                out.setdefault(host, {})[component] = kubeadm.manifest_version(text)
    return out


# -- kubeconfigs, kwok -----------------------------------------------------------------------------------------------
def component_kubeconfigs(cfg: LabConfig) -> None:
    """The lab's own clients' kubeconfigs (through the load balancer). Each control-plane host's
    controller-manager.conf and scheduler.conf are kubeadm's (kubeadm.init_kubeconfigs)."""
    lb = "https://127.0.0.1:%d" % cfg.ports["apiserver_lb"]
    for user in ("admin", "kwok", "lab-controller"):
        pki.kubeconfig(cfg.pki, lb, user, cfg.run / "kubeconfigs" / (user + ".conf"))
    pki.kubeconfig(cfg.pki, lb, "admin", cfg.kubeconfig)


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
    procs.start(cfg.run, "kwok", argv, env=GO_LAB_ENV)


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
