"""The lab controller: a long-running process started by `lab up`.

1. A TCP load balancer in front of every live apiserver (what a real HA control plane has), so clients keep
   working while one apiserver restarts at a new version, and may hit either version meanwhile.
2. Control-plane requests from the simulated kubeadm/kubelet on the hosts (files under run/requests): restart a
   host's real kube-apiserver at a new version (then keep kube-controller-manager and kube-scheduler at the oldest
   apiserver version) and move the control-plane mirror pods and kubeadm-config with it (SIMULATION of the
   kubelet's mirror pods: lab/gpufleet_lab/kubeadm.py), or set a Node's kubeletVersion (SIMULATION of the kubelet
   registering).
3. Device-plugin SIMULATION: a GPU host whose state reports fewer GPUs gets that allocatable nvidia.com/gpu.
4. Training-gang SIMULATION (JobSet pods, Kueue Workload activation, checkpoint-and-yield): see training.py.
5. Canary-workload SIMULATION (the containers of gpufleet's canary gang and latency probe): see workloads.py.
6. Inference-service SIMULATION: the cell's request latency histogram on /metrics, for the fleet's p99 reading:
   see inference.py.
7. Static-pod SIMULATION (the kubelet's part): a control-plane host's kube-apiserver, and the etcd host's etcd,
   stop when their manifest leaves /etc/kubernetes/manifests and start when it is back (StaticPods).
8. Kubelet-server SIMULATION: each GPU host's /configz over HTTPS on its Node address, what that release's kubelet
   code makes of the host's config file when the kubelet starts (kubelets.py).
"""
from __future__ import annotations

import asyncio
import hashlib
import itertools
import json
import signal
import sys
import time
import traceback
from typing import Dict, List, Set, Tuple

from gpufleet_lab import cluster, faults, inference, kube, procs
from gpufleet_lab.config import LabConfig


class LoadBalancer:
    def __init__(self, cfg: LabConfig) -> None:
        self.cfg = cfg
        self.counter = itertools.count()

    def backends(self) -> List[int]:
        return [self.cfg.apiserver_port(h) for h in self.cfg.control_plane]

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        ports = self.backends()
        start = next(self.counter)
        upstream = None
        for i in range(len(ports)):
            port = ports[(start + i) % len(ports)]
            try:
                upstream = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), 2)
                break
            except (TimeoutError, OSError):
                continue
        if upstream is None:
            writer.close()
            return
        up_reader, up_writer = upstream

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            try:
                while True:
                    data = await src.read(65536)
                    if not data:
                        break
                    dst.write(data)
                    await dst.drain()
            except (ConnectionError, OSError):
                pass
            finally:
                try:
                    dst.close()
                except Exception:
                    pass

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))


def reconcile_controllers(cfg: LabConfig, state: Dict) -> None:
    want = cluster.oldest(list(state["apiserver"].values()))
    if cluster.controllers_version(cfg) != want:
        procs.stop(cfg.run, "controller-manager")
        procs.stop(cfg.run, "scheduler")
        cluster.start_controllers(cfg, want)


def handle_request(cfg: LabConfig, body: Dict) -> Dict:
    kind, host, version = body.get("kind"), body.get("host"), body.get("version")
    if kind == "pause":  # the pause-in-upgrade fault: the host hangs mid-upgrade (see simulators/kubelet-preinst)
        if host not in cfg.hosts:
            return {"error": "%s is not a lab host" % host}
        from gpufleet_lab import hosts
        hosts.podman("pause", hosts.container(cfg, host))
        return {"ok": True, "paused": host}
    state = cluster.load_state(cfg)
    if version not in cfg.versions:
        return {"error": "the lab has no %s binaries for %s (it has %s)" % (kind, version, ", ".join(cfg.versions))}
    if kind == "apiserver":
        if host not in cfg.control_plane:
            return {"error": "%s is not a control-plane host" % host}
        cluster.restart_apiserver(cfg, host, version)
        state["apiserver"][host] = version
        cluster.save_state(cfg, state)
        reconcile_controllers(cfg, state)
        from gpufleet_lab import kubeadm  # the mirror pods and kubeadm-config follow the switch, as a kubelet's would
        kubeadm.sync(cfg, kube.api(cfg, "lab-controller"), state)
        return {"ok": True, "apiserver": version}
    if kind == "kubelet":
        if host not in cfg.hosts:
            return {"error": "%s is not a lab host" % host}
        if host in cfg.gpu_hosts:  # it reads its config file as that release's kubelet does, or refuses to start
            from gpufleet_lab import kubelets
            try:
                kubelets.start(cfg, host, version)
            except procs.LabError as exc:
                return {"error": str(exc)}
        kube.set_kubelet_version(cfg, host, version)
        state["kubelet"][host] = version
        cluster.save_state(cfg, state)
        return {"ok": True, "kubelet": version}
    return {"error": "unknown request kind %r" % kind}


async def requests_loop(cfg: LabConfig) -> None:
    reqdir = cfg.run / "requests"
    reqdir.mkdir(parents=True, exist_ok=True)
    gpu_seen: Dict[str, int] = {}
    mirrors_due = time.time() + 5
    while True:
        for path in sorted(reqdir.glob("*.json")):
            try:
                body = json.loads(path.read_text())
            except ValueError:
                continue
            path.unlink()
            print("request: %s" % body, flush=True)
            try:
                answer = await asyncio.to_thread(handle_request, cfg, body)
            except Exception as exc:
                traceback.print_exc()
                answer = {"error": "%s: %s" % (type(exc).__name__, exc)}
            print("answer: %s" % answer, flush=True)
            if body.get("answer") is False:
                continue
            done = reqdir / (body.get("id", path.stem) + ".done")
            done.with_suffix(".tmp").write_text(json.dumps(answer))
            done.with_suffix(".tmp").replace(done)
        for host in cfg.gpu_hosts:
            gpus = faults.visible_gpus(cfg, host)
            if gpu_seen.get(host) != gpus:
                try:
                    await asyncio.to_thread(kube.set_allocatable_gpus, cfg, host, gpus)
                    gpu_seen[host] = gpus
                except Exception:
                    traceback.print_exc()
        if time.time() >= mirrors_due:  # a kubelet makes a deleted mirror pod again; so does the lab
            mirrors_due = time.time() + 5
            try:
                from gpufleet_lab import kubeadm
                made = await asyncio.to_thread(kubeadm.restore_mirror_pods, cfg, kube.api(cfg, "lab-controller"),
                                               cluster.load_state(cfg))
                if made:
                    print("made again: %s" % ", ".join(made), flush=True)
            except Exception:
                traceback.print_exc()
        await asyncio.sleep(0.3)


class StaticPods:
    """SIMULATION of a kubelet's static pods, for the real processes the lab runs in their place: the etcd host's
    etcd and each control-plane host's kube-apiserver stop when their manifest leaves the host's
    /etc/kubernetes/manifests and start again when it is back (etcd first) - what a restore's swap of etcd's data
    directory relies on (playbooks/etcd_restore.yml). It starts only what a missing manifest stopped, so `lab up`,
    `lab down` and version switches keep their say. What runs is written to the host's containers.json, which the
    host's crictl lists (SIMULATION)."""

    def __init__(self, cfg: LabConfig) -> None:
        self.cfg = cfg
        self.stopped: Set[Tuple[str, str]] = set()
        self.seen: Set[Tuple[str, str]] = set()  # manifests `lab up` has written (before that, nothing to act on)
        self.listed: Dict[str, str] = {}

    def pods(self) -> List[Tuple[str, str, str]]:
        """(host, component, lab process), etcd first: an apiserver started before its etcd would not get ready."""
        return [(cluster.etcd_host(self.cfg), "etcd", "etcd")] + [
            (h, "kube-apiserver", "apiserver-" + h) for h in self.cfg.control_plane]

    def reconcile(self) -> None:
        for host, component, name in self.pods():
            present = (self.cfg.run / "hosts" / host / "manifests" / (component + ".yaml")).exists()
            if present:
                self.seen.add((host, component))
            if not present and (host, component) in self.seen and procs.pid_of(self.cfg.run, name):
                print("static pod %s on %s: its manifest is gone; stopping %s" % (component, host, name), flush=True)
                procs.stop(self.cfg.run, name)
                self.stopped.add((host, component))
            elif present and (host, component) in self.stopped:
                print("static pod %s on %s: its manifest is back; starting %s" % (component, host, name), flush=True)
                if component == "etcd":
                    cluster.start_etcd(self.cfg)
                else:
                    cluster.start_apiserver(self.cfg, host, cluster.load_state(self.cfg)["apiserver"][host])
                self.stopped.discard((host, component))
        self.write_containers()

    def write_containers(self) -> None:
        for host in self.cfg.control_plane:
            running = []
            for pod_host, component, name in self.pods():
                pid = procs.pid_of(self.cfg.run, name)
                if pod_host == host and pid:
                    uid = "%s/%s/%d" % (host, component, pid)
                    running.append({"name": component, "id": hashlib.sha256(uid.encode()).hexdigest(),
                                    "labels": {"io.kubernetes.pod.namespace": "kube-system",
                                               "io.kubernetes.pod.name": "%s-%s" % (component, host),
                                               "io.kubernetes.container.name": component}})
            text = json.dumps({"containers": running})
            if self.listed.get(host) != text:
                path = self.cfg.run / "hosts" / host / "containers.json"
                path.parent.mkdir(parents=True, exist_ok=True)
                path.with_suffix(".tmp").write_text(text)
                path.with_suffix(".tmp").replace(path)
                self.listed[host] = text


async def static_pods_loop(cfg: LabConfig) -> None:
    pods = StaticPods(cfg)
    while True:
        try:
            await asyncio.to_thread(pods.reconcile)
        except Exception:
            traceback.print_exc()
        await asyncio.sleep(0.5)


async def training_loop(cfg: LabConfig) -> None:
    from gpufleet_lab.training import Training
    from gpufleet_lab.workloads import Workloads
    sims: List = []
    while True:
        try:
            if not sims:
                sims = [await asyncio.to_thread(Training, cfg), await asyncio.to_thread(Workloads, cfg)]
            for sim in sims:
                await asyncio.to_thread(sim.reconcile)
        except Exception:
            traceback.print_exc()
            sims = []
            await asyncio.sleep(2)
        await asyncio.sleep(1)


async def amain(cfg: LabConfig) -> None:
    lb = LoadBalancer(cfg)
    server = await asyncio.start_server(lb.handle, "127.0.0.1", cfg.ports["apiserver_lb"])
    print("lab controller: load balancer on 127.0.0.1:%d -> %s" % (cfg.ports["apiserver_lb"], lb.backends()),
          flush=True)
    inference.serve(cfg)
    print("lab controller: inference metrics on 127.0.0.1:%d/metrics" % cfg.ports["inference"], flush=True)
    from gpufleet_lab import kubelets
    for served in kubelets.serve(cfg):
        print("lab controller: kubelet of %s on https://%s:%d (/configz)" % (
            served.host, *served.server_address[:2]), flush=True)
    async with server:
        await asyncio.gather(server.serve_forever(), requests_loop(cfg), training_loop(cfg), static_pods_loop(cfg))


def main(cfg: LabConfig) -> None:
    # `bin/lab down` stops the controller with SIGTERM. Exit through SystemExit so the interpreter's exit handlers
    # run: the kubernetes client removes the client-key files it wrote from the kubeconfig's *-data fields in one
    # (killed by the default SIGTERM action, every controller left its key file in $TMPDIR).
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(0))
    asyncio.run(amain(cfg))
