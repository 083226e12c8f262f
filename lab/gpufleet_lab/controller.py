"""The lab controller: a long-running process started by `lab up`.

1. A TCP load balancer in front of every live apiserver (what a real HA control plane has), so clients keep
   working while one apiserver restarts at a new version, and may hit either version meanwhile.
2. Requests from the simulated kubelet on the hosts (files under run/requests): set a Node's kubeletVersion
   (SIMULATION of the kubelet registering), or pause a host (the pause-in-upgrade fault).
3. Device-plugin SIMULATION: a GPU host whose state reports fewer GPUs gets that allocatable nvidia.com/gpu.
4. Training-gang SIMULATION (JobSet pods, Kueue Workload activation, checkpoint-and-yield): see training.py.
5. Canary-workload SIMULATION (the containers of gpufleet's canary gang and latency probe): see workloads.py.
6. Inference-service SIMULATION: the cell's request latency histogram on /metrics, for the fleet's p99 reading:
   see inference.py.
7. Static-pod SIMULATION (the kubelet's part, StaticPods): each control-plane host's kube-apiserver,
   kube-controller-manager and kube-scheduler run what their manifests in /etc/kubernetes/manifests say (kubeadm's:
   the image's version, the command's flags), in the host's network namespace, restarted when the real kubeadm
   writes a new one, stopped while it is gone (and the etcd host's etcd likewise); the control-plane mirror pods
   carry the hash of the manifest that runs (kubeadm.sync_mirror_pods), which is what `kubeadm upgrade apply` and
   `node` wait for.
8. Kubelet-server SIMULATION: each GPU host's /configz over HTTPS on its Node address, what that release's kubelet
   code makes of the host's config file when the kubelet starts (kubelets.py).
"""
from __future__ import annotations

import asyncio
import hashlib
import itertools
import json
import pathlib
import signal
import sys
import threading
import time
import traceback
from typing import Any, Callable, Dict, List, Optional, Set, Tuple

from kubernetes import client

from gpufleet_lab import cluster, faults, inference, kube, kubeadm, network, procs
from gpufleet_lab.config import LabConfig
from gpufleet_lab.procs import LabError

# How often each loop looks (the controller runs beside every cell for the whole CI run, so it polls no faster than a
# kubelet or a controller would notice): the hosts' tool requests and GPU counts, and the static pod manifests. The
# static pods' pass reads files only (the mirror pods' manifests are parsed once per text): each control-plane move
# waits for it three times (apiserver, controller manager, scheduler), so it looks twice a second.
REQUESTS_SECONDS = 0.5
STATIC_PODS_SECONDS = 0.5
# The training gangs and canary workloads (four LISTs a pass; polled every second, they were about half an idle
# cell's apiserver requests, then every 2 s) are played when a Pod, Job, JobSet or Workload of the cell changes
# (watched, as a controller does): at once, then no more often than TRAINING_BUSY_SECONDS, which is also how often a
# pass runs while a checkpoint is pending (its confirmation is due by time, not by a change); TRAINING_SECONDS at the
# most without a change (a watch that missed something is made up for).
TRAINING_SECONDS = 10.0
TRAINING_BUSY_SECONDS = 1.0


class LoadBalancer:
    def __init__(self, cfg: LabConfig) -> None:
        self.cfg = cfg
        self.counter = itertools.count()

    def backends(self) -> List[Tuple[str, int]]:
        """Each control-plane host's apiserver: its address (in the host's network namespace) and port."""
        return [(self.cfg.node_address(h), self.cfg.apiserver_port(h)) for h in self.cfg.control_plane]

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        backends = self.backends()
        start = next(self.counter)
        upstream = None
        for i in range(len(backends)):
            address, port = backends[(start + i) % len(backends)]
            try:
                upstream = await asyncio.wait_for(asyncio.open_connection(address, port), 2)
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


_MIRROR_CLIENTS: Dict[str, client.CoreV1Api] = {}


def mirror_client(cfg: LabConfig) -> client.CoreV1Api:
    """The controller's one client for the mirror pods, made from its kubeconfig once (a new one every 5 s read the
    kubeconfig and made a new TLS context and connection pool)."""
    if str(cfg.run) not in _MIRROR_CLIENTS:
        _MIRROR_CLIENTS[str(cfg.run)] = client.CoreV1Api(kube.api(cfg, "lab-controller"))
    return _MIRROR_CLIENTS[str(cfg.run)]


def handle_request(cfg: LabConfig, body: Dict) -> Dict:
    kind, host, version = body.get("kind"), body.get("host"), body.get("version")
    if kind == "pause":  # the pause-in-upgrade fault: the host hangs mid-upgrade (see simulators/kubelet-preinst)
        if host not in cfg.hosts:
            return {"error": "%s is not a lab host" % host}
        from gpufleet_lab import hosts
        hosts.podman("pause", hosts.container(cfg, host))
        return {"ok": True, "paused": host}
    if version not in cfg.versions:
        return {"error": "the lab has no %s binaries for %s (it has %s)" % (kind, version, ", ".join(cfg.versions))}
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
        cluster.update_state(cfg, "kubelet", host, version)
        return {"ok": True, "kubelet": version}
    return {"error": "unknown request kind %r" % kind}


async def answer_request(cfg: LabConfig, reqdir: pathlib.Path, path: pathlib.Path) -> None:
    """Answer one request file (a JSON object; ``answer: false`` asks for none) in REQUEST.done. A request is
    written whole and renamed into place (simlib.request), so one that is not JSON is broken, not half written: it
    is answered with the error, as one that is not an object is."""
    text = path.read_text()
    path.unlink()
    print("request: %s" % text[:500], flush=True)
    try:
        body = json.loads(text)
        wrong = "" if isinstance(body, dict) else type(body).__name__
    except ValueError as exc:
        wrong = "text that is not JSON (%s)" % exc
    if wrong:
        answer: Dict[str, Any] = {"error": "a request is a JSON object, not %s" % wrong}
        body = {}
    else:
        try:
            answer = await asyncio.to_thread(handle_request, cfg, body)
        except Exception as exc:
            traceback.print_exc()
            answer = {"error": "%s: %s" % (type(exc).__name__, exc)}
    print("answer: %s" % answer, flush=True)
    if body.get("answer") is False:
        return
    done = reqdir / (str(body.get("id", path.stem)) + ".done")
    done.with_suffix(".tmp").write_text(json.dumps(answer))
    done.with_suffix(".tmp").replace(done)


async def requests_loop(cfg: LabConfig) -> None:
    reqdir = cfg.run / "requests"
    reqdir.mkdir(parents=True, exist_ok=True)
    gpu_seen: Dict[str, int] = {}
    mirrors_due = time.time() + 5
    while True:
        for path in sorted(reqdir.glob("*.json")):
            try:  # a request the controller cannot read or answer is reported; it never ends the controller
                await answer_request(cfg, reqdir, path)
            except Exception:
                traceback.print_exc()
        for host in cfg.gpu_hosts:
            try:
                gpus = faults.visible_gpus(cfg, host)
                if gpu_seen.get(host) != gpus:
                    await asyncio.to_thread(kube.set_allocatable_gpus, cfg, host, gpus)
                    gpu_seen[host] = gpus
            except Exception:
                traceback.print_exc()
        if time.time() >= mirrors_due:  # a kubelet makes a deleted mirror pod again; so does the lab
            mirrors_due = time.time() + 5
            try:
                made = await asyncio.to_thread(kubeadm.sync_mirror_pods, cfg, mirror_client(cfg))
                if made:
                    print("made again: %s" % ", ".join(made), flush=True)
            except Exception:
                traceback.print_exc()
        await asyncio.sleep(REQUESTS_SECONDS)


SETTLE_SECONDS = 0.5  # how long a manifest's text (or its absence) must hold before the lab acts on it
# A crashed static pod's restarts back off from 5 s, doubling, to 40 s, and start from 5 s again once it has run
# 80 s (a kubelet's: 10 s to 5 min, reset after 10 min; the lab's restores and rollouts take minutes, not hours)
CRASH_BACKOFF = (5.0, 40.0)
STABLE_SECONDS = 2 * CRASH_BACKOFF[1]


def _read(path: pathlib.Path) -> Optional[str]:
    try:
        return path.read_text()
    except FileNotFoundError:
        return None


class StaticPods:
    """SIMULATION of a kubelet's static pods, for the real processes the lab runs in their place.

    - Each control-plane host's kube-apiserver, kube-controller-manager and kube-scheduler run their manifests, in
      the host's network namespace: when the text of /etc/kubernetes/manifests/COMPONENT.yaml is not the one
      running (kubeadm wrote a new one, or rolled one back), the component restarts from it
      (cluster.restart_component: the image's version, the command's flags) and waits for the manifest's probe; the
      state records each apiserver's version, and the mirror pods are synced. A manifest that cannot run (no build
      of its version, a command that is not its component) is reported once and left, as a kubelet's crash loop
      is: kubeadm sees no new mirror pod hash and rolls back. So is any new kube-apiserver manifest on a host with
      the apiserver-start-fail fault.
    - Each etcd member and each component stop when their manifest leaves the host's manifests and start again
      when it is back - what a restore's swap of etcd's data directory relies on (playbooks/etcd_restore.yml); a
      member whose manifest changes restarts from it (its image's etcd build: playbooks/etcd_upgrade.yml).
    A host's components are played only after `lab up` first started them (their running manifests exist). What
    runs is written to the host's containers.json, which the host's crictl lists (SIMULATION)."""

    def __init__(self, cfg: LabConfig) -> None:
        self.cfg = cfg
        self.stopped: Set[Tuple[str, str]] = set()
        self.seen: Set[Tuple[str, str]] = set()  # manifests `lab up` has written (before that, nothing to act on)
        self.listed: Dict[str, str] = {}
        self.observed: Dict[Tuple[str, str], Tuple[Optional[str], float]] = {}  # manifest -> (text, since)
        self.refused: Dict[Tuple[str, str], str] = {}  # (host, component) -> the manifest text that could not run
        self.held: Dict[str, str] = {}  # host -> the apiserver manifest text the fault holds back (said once)
        self.backoff: Dict[Tuple[str, str], Tuple[float, float]] = {}  # pod -> (no restart before, last delay)
        self.started: Dict[Tuple[str, str], float] = {}  # pod -> when it last started (time.monotonic)
        # each pod's worker: a daemon thread, so the controller's exit (SIGTERM from `lab down`) never waits for a
        # probe in flight
        self.busy: Dict[Tuple[str, str], threading.Thread] = {}

    def pods(self) -> List[Tuple[str, str, str]]:
        """(host, component, lab process): every static pod the lab plays. Each is acted on by a worker of its own,
        so they start side by side, as a kubelet's do: an apiserver waits (its probe) for etcd, a controller manager
        or scheduler for its apiserver."""
        return [(h, "etcd", cluster.etcd_process(h)) for h in cluster.etcd_members(self.cfg)] + [
            (h, c, cluster.process_name(c, h)) for h in self.cfg.control_plane for c in kubeadm.COMPONENTS]

    def settled(self, key: Tuple[str, str], text: Optional[str]) -> bool:
        """Whether a manifest has held ``text`` (None: no file) for SETTLE_SECONDS: kubeadm moves a manifest aside
        and another in, so for a moment a file may be missing or half written."""
        now = time.monotonic()
        seen = self.observed.get(key)
        if seen is None or seen[0] != text:
            self.observed[key] = (text, now)
            return False
        return now - seen[1] >= SETTLE_SECONDS

    def reconcile(self) -> None:
        """One pass over every static pod: what a manifest asks for is done by a worker of its own (a kubelet does
        not hold one pod's start up for another's probe), one at a time per pod."""
        for host, component, name in self.pods():
            key = (host, component)
            busy = self.busy.get(key)
            if busy is not None and busy.is_alive():
                continue
            text = _read(kubeadm.manifests_dir(self.cfg, host) / (component + ".yaml"))
            if self.settled(key, text):
                worker = threading.Thread(target=self.act, args=(host, component, name, text), daemon=True,
                                          name="static-pod-%s-%s" % key)
                self.busy[key] = worker
                worker.start()
        self.write_containers()

    def act(self, host: str, component: str, name: str, text: Optional[str]) -> None:
        """Do what ``host``'s settled manifest ``text`` of ``component`` (None: gone) asks for; sync the mirror pods
        when something started."""
        try:
            if self.step(host, component, name, text):
                made = kubeadm.sync_mirror_pods(self.cfg, mirror_client(self.cfg))
                print("static pods: %s" % (", ".join(made) or "mirror pods in place"), flush=True)
        except Exception:
            traceback.print_exc()

    def step(self, host: str, component: str, name: str, text: Optional[str]) -> bool:
        if text is None:
            self.refused.pop((host, component), None)
            self.backoff.pop((host, component), None)
            if (host, component) in self.seen and procs.pid_of(self.cfg.run, name):
                print("static pod %s on %s: its manifest is gone; stopping %s" % (component, host, name), flush=True)
                grace = cluster.ETCD_GRACE_SECONDS if component == "etcd" else procs.STOP_SECONDS
                procs.stop(self.cfg.run, name, timeout=grace)
                self.stopped.add((host, component))
            return False
        self.seen.add((host, component))
        if (host, component) in self.stopped:
            print("static pod %s on %s: its manifest is back; starting %s" % (component, host, name), flush=True)
            started = False
            if component == "etcd":
                cluster.start_etcd_member(self.cfg, host, text)
            else:
                started = self.play(host, component, text, restart=False)
            self.stopped.discard((host, component))
            return started
        if component == "etcd":
            return self.play_etcd(host, name, text)
        return self.play(host, component, text, restart=True)

    def play_etcd(self, host: str, name: str, text: str) -> bool:
        """A member whose manifest changed (an etcd upgrade's new image) is restarted from it, as a kubelet
        recreates a static pod; one whose image the lab has not built is stopped and reported once, as a pull
        that fails would leave it; a member that does not run while its manifest is the one that ran (the old
        image put back) is started again."""
        key = (host, "etcd")
        running = _read(kubeadm.running_manifest(self.cfg, host, "etcd"))
        alive = procs.pid_of(self.cfg.run, name)
        if not (self.cfg.run / cluster.UP_MARK).exists() or running is None or (running == text and alive):
            return False
        if self.refused.get(key) == text:
            return False
        if running != text:
            print("static pod etcd on %s: its manifest changed (%s -> %s); restarting the member" % (
                host, cluster.etcd_manifest_version(running), cluster.etcd_manifest_version(text)), flush=True)
            procs.stop(self.cfg.run, name, timeout=cluster.ETCD_GRACE_SECONDS)
        else:  # its image was put back after a new one could not run: the kubelet starts the container again
            print("static pod etcd on %s: the member is not running; starting it" % host, flush=True)
        try:
            cluster.start_etcd_member(self.cfg, host, text)
        except LabError as exc:
            print("static pod etcd on %s: %s" % (host, exc), flush=True)
            procs.stop(self.cfg.run, name)
            self.refused[key] = text
        return False

    def play(self, host: str, component: str, text: str, restart: bool) -> bool:
        """Run ``host``'s manifest ``text`` of ``component`` when it does not run; returns whether it started it.

        - A new manifest (not the one that ran) that cannot run (no build of its version, not its component) stops
          nothing; one that does not come up is stopped, as its crash loop would leave it; either is tried again
          only when the manifest changes (kubeadm rolls back).
        - The manifest that ran, whose process is gone (it exited - a controller manager or scheduler that loses
          its apiserver exits, "leaderelection lost" - or its manifest was away and is back), is started again as a
          kubelet restarts a container: at once, then backing off (CRASH_BACKOFF) until it has run STABLE_SECONDS;
          one not ready in time is left running, never given up."""
        key, name = (host, component), cluster.process_name(component, host)
        path = kubeadm.running_manifest(self.cfg, host, component)
        running = _read(path)
        alive = procs.pid_of(self.cfg.run, name)
        if restart and (not (self.cfg.run / cluster.UP_MARK).exists() or running is None
                        or (running == text and alive)):
            return False  # `lab up` has not finished starting the control plane, or this manifest runs
        again = running == text
        now = time.monotonic()
        if again:
            last = self.backoff.get(key)
            if last is not None and now < last[0]:
                return False
            stable = now - self.started.get(key, now) >= STABLE_SECONDS
            delay = CRASH_BACKOFF[0] if last is None or stable else min(2 * last[1], CRASH_BACKOFF[1])
            self.backoff[key] = (now + delay, delay)  # the next start, should this one exit too
        elif self.refused.get(key) == text:
            return False
        elif (component == "kube-apiserver" and "apiserver-start-fail" in faults.host_faults(self.cfg, host)):
            if self.held.get(host) != text:
                print("static pod kube-apiserver on %s: the apiserver-start-fail fault keeps the new manifest (%s) "
                      "from starting" % (host, kubeadm.manifest_version(text)), flush=True)
                self.held[host] = text
            return False
        self.held.pop(host, None)
        try:
            cluster.component_argv(self.cfg, host, component, text)
            cluster.probe_url(self.cfg, host, text)
        except procs.LabError as exc:
            print("static pod %s on %s: cannot run its manifest: %s" % (component, host, exc), flush=True)
            self.refused[key] = text
            return False
        manifest = kubeadm.manifests_dir(self.cfg, host) / (component + ".yaml")

        def changed() -> bool:  # kubeadm wrote another manifest (or moved it away) while this one started
            return _read(manifest) != text
        try:
            version = (cluster.restart_component(self.cfg, host, component, text, cancel=changed) if restart
                       else cluster.start_component(self.cfg, host, component, text, cancel=changed))
        except procs.LabError as exc:
            if again:  # left to its restart loop: running and not ready yet, or started again if it exits
                print("static pod %s on %s: not ready after a restart (%s); started again, if it exits, after "
                      "%.0f s" % (component, host, str(exc).splitlines()[0], self.backoff[key][1]), flush=True)
                return False
            print("static pod %s on %s: its manifest did not come up: %s" % (component, host, exc), flush=True)
            procs.stop(self.cfg.run, name, timeout=cluster.APISERVER_GRACE_SECONDS)
            self.refused[key] = text
            return False
        self.refused.pop(key, None)
        self.started[key] = time.monotonic()
        if not again:
            self.backoff.pop(key, None)
        if component == "kube-apiserver":
            cluster.update_state(self.cfg, "apiserver", host, version)
        print("static pod %s on %s: running %s from its manifest" % (component, host, version), flush=True)
        return True

    def write_containers(self) -> None:
        pods = [(pod_host, component, procs.pid_of(self.cfg.run, name)) for pod_host, component, name in self.pods()]
        for host in self.cfg.control_plane:
            running = []
            for pod_host, component, pid in pods:
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


async def reconcile_loop(reconcile, seconds: float) -> None:
    """Call ``reconcile`` on a thread every ``seconds``; an error is printed and the next call tries again."""
    while True:
        try:
            await asyncio.to_thread(reconcile)
        except Exception:
            traceback.print_exc()
        await asyncio.sleep(seconds)


async def static_pods_loop(cfg: LabConfig) -> None:
    await reconcile_loop(StaticPods(cfg).reconcile, STATIC_PODS_SECONDS)


# What the training and canary pass acts on: (what, group, version, plural) of the cell's objects it watches. Jobs
# too: the job controller marks a gang's Job complete, or finishes deleting it, after its pods' last change.
TRAINING_WATCHED = (("Pods", "", "v1", "pods"), ("Jobs", "batch", "v1", "jobs"),
                    ("JobSets", "jobset.x-k8s.io", "v1alpha2", "jobsets"),
                    ("Workloads", "kueue.x-k8s.io", "v1beta2", "workloads"))
WATCH_RETRY_SECONDS = 1.0  # the least time between two watches of one kind (one that failed or ended at once)


def watch_training(cfg: LabConfig, wake: Callable[[], None],
                   stop: Optional[threading.Event] = None) -> List[threading.Thread]:
    """A daemon thread per kind in TRAINING_WATCHED that calls ``wake`` on every event of it in any namespace (and
    whenever its watch ends: an apiserver restarting behind the load balancer, a kind not served yet, the watch's
    timeout), then watches again, until ``stop`` is set; a watch that keeps failing is reported once, with why, until
    one works again."""
    stop = stop or threading.Event()
    from kubernetes import watch

    def lister(group: str, version: str, plural: str) -> Tuple[Callable[..., Any], tuple, Dict[str, Any]]:
        api = kube.api(cfg, "lab-controller")
        if plural == "pods":  # not kube-system's: mirror pods, CoreDNS, kube-proxy
            return (client.CoreV1Api(api).list_pod_for_all_namespaces, (),
                    {"field_selector": "metadata.namespace!=kube-system"})
        if plural == "jobs":
            return client.BatchV1Api(api).list_job_for_all_namespaces, (), {}
        return client.CustomObjectsApi(api).list_cluster_custom_object, (group, version, plural), {}

    def follow(what: str, group: str, version: str, plural: str) -> None:
        failing = ""
        while not stop.is_set():
            began = time.monotonic()
            try:
                func, args, kw = lister(group, version, plural)
                # events as dicts: only that something changed matters here, not typed objects
                for _ in watch.Watch().stream(func, *args, timeout_seconds=240, _request_timeout=300,
                                              deserialize=False, **kw):
                    wake()
                failing = ""
            except Exception as exc:  # any failure is a watch to start again
                if not failing:
                    print("lab controller: the watch of %s failed (%s: %s); watching again" % (
                        what, type(exc).__name__, str(exc)[:200]), flush=True)
                failing = type(exc).__name__
            wake()
            time.sleep(max(0.0, WATCH_RETRY_SECONDS - (time.monotonic() - began)))

    threads = [threading.Thread(target=follow, args=kind, daemon=True, name="watch-" + kind[0])
               for kind in TRAINING_WATCHED]
    for thread in threads:
        thread.start()
    return threads


async def paced(reconcile: Callable[[], Any], wake: asyncio.Event, busy: Callable[[], bool]) -> None:
    """Call ``reconcile`` (on a thread) now and whenever ``wake`` is set, at most once per TRAINING_BUSY_SECONDS;
    without a wake-up after TRAINING_SECONDS, or TRAINING_BUSY_SECONDS while ``busy()``. A wake-up during a pass
    makes the next one (the event is cleared before each pass). Waits are asyncio's, so the controller's exit never
    waits on them."""
    while True:
        began = time.monotonic()
        wake.clear()
        await asyncio.to_thread(reconcile)
        try:
            await asyncio.wait_for(wake.wait(), TRAINING_BUSY_SECONDS if busy() else TRAINING_SECONDS)
        except TimeoutError:
            pass
        await asyncio.sleep(max(0.0, TRAINING_BUSY_SECONDS - (time.monotonic() - began)))


async def training_loop(cfg: LabConfig) -> None:
    from gpufleet_lab.training import Training
    from gpufleet_lab.workloads import Workloads
    loop = asyncio.get_running_loop()
    wake = asyncio.Event()
    watch_training(cfg, lambda: loop.call_soon_threadsafe(wake.set))
    sims: List = []
    said: Set[str] = set()
    await paced(lambda: guarded_pass(sims, lambda: [Training(cfg), Workloads(cfg)], said), wake,
                lambda: any(getattr(sim, "pending", None) for sim in sims))


def guarded_pass(sims: List, make: Callable[[], List], said: Set[str]) -> None:
    """One training and canary pass: the simulators made by ``make`` when there are none (their making reads the
    cell's API, which may not answer yet - the apiservers start after the controller), then each reconciled. Any
    failure, in the making too, is reported and the simulators are made again on the next pass: the controller
    never exits for a cell that is slow to start or restarting. Each failure is printed once (its traceback) until
    a pass succeeds: a cell that takes a minute to answer logs it once, not every pass."""
    try:
        if not sims:
            sims.extend(make())
        for sim in sims:
            sim.reconcile()
        said.clear()
    except Exception as exc:
        message = str(exc)
        what = "%s: %s" % (type(exc).__name__, message.splitlines()[0][:300] if message else "")
        if what not in said:
            said.add(what)
            traceback.print_exc()
        sims.clear()
        time.sleep(2)


async def soak_faults_loop(cfg: LabConfig) -> None:
    from gpufleet_lab import soakfaults
    soakfaults.serve_webhook(cfg)
    print("lab controller: soak-latency webhook on https://%s:%d/validate" % (
        network.lab_address(cfg), soakfaults.webhook_port(cfg)), flush=True)
    await reconcile_loop(soakfaults.SoakFaults(cfg).reconcile, 1)


async def amain(cfg: LabConfig) -> None:
    lb = LoadBalancer(cfg)
    server = await asyncio.start_server(lb.handle, "127.0.0.1", cfg.ports["apiserver_lb"])
    print("lab controller: load balancer on 127.0.0.1:%d -> %s" % (
        cfg.ports["apiserver_lb"], ", ".join("%s:%d" % b for b in lb.backends())), flush=True)
    inference.serve(cfg)
    print("lab controller: inference metrics on 127.0.0.1:%d/metrics" % cfg.ports["inference"], flush=True)
    from gpufleet_lab import kubelets
    for served in kubelets.serve(cfg):
        print("lab controller: kubelet of %s on https://%s:%d (/configz)" % (
            served.host, *served.server_address[:2]), flush=True)
    async with server:
        await asyncio.gather(server.serve_forever(), requests_loop(cfg), training_loop(cfg), static_pods_loop(cfg),
                             soak_faults_loop(cfg))


def main(cfg: LabConfig) -> None:
    # `bin/lab down` stops the controller with SIGTERM. Exit through SystemExit so the interpreter's exit handlers
    # run: the kubernetes client removes the client-key files it wrote from the kubeconfig's *-data fields in one
    # (killed by the default SIGTERM action, every controller left its key file in $TMPDIR).
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(0))
    asyncio.run(amain(cfg))
