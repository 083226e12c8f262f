"""Host work at wave scale (`make bench-hosts`): one wave's host work (benchmarks/host_wave.yml - kubeadm pinned and
held with the real apt and dpkg, then the GPU gates that run on the host) on waves of 1 to 64 lab hosts reached
over SSH, with forks 20 (ansible.cfg's) and with forks as wide as the wave. Prints how the wave's time grows
with its size and with forks, and the figures go to out/bench/scale-hosts.json.

The hosts are lightweight containers from the lab's GPU host image (sshd, apt, the lab's nvidia-smi and dcgmi
simulators - SIMULATION of the GPUs), each started fresh for every run, so every run upgrades kubeadm from the
lab's ``from`` version. They are not Nodes: nothing here talks to Kubernetes. Needs the lab's images and apt
repository (``bin/lab up`` once); the lab's own hosts are left alone.

On one machine the hosts' side of the work (sshd, the modules' Python, apt and dpkg in each container) shares the
machine's cores with the controller, so the wave's wall time grows with the machine, not only with forks; the
controller's own CPU seconds per host (ansible-playbook, its forks and ssh clients, measured apart from the
containers) is the figure that carries to a real cell, where each host does its side on its own CPUs.
"""
from __future__ import annotations

import argparse
import ctypes
import json
import os
import pathlib
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Dict, List, Tuple

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "lab"))

from gpufleet_lab import config as lab_config
from gpufleet_lab import hosts as lab_hosts

from benchlib import revision

PREFIX = "gpufleet-hostbench-"
PORT_BASE = 30000  # the bench's sshd ports: 30000 + i, above every port of ten lab cells (lab/lab.yml + 100 a cell)


def host_name(i: int) -> str:
    return "hb-%02d" % i


def check_plan(sizes: List[int], forks: List[int]) -> None:
    if not sizes or any(s < 1 or s > 128 for s in sizes) or sizes != sorted(set(sizes)):
        raise SystemExit("--sizes=%s: give rising wave sizes from 1 to 128, such as 1,8,32,64" % sizes)
    if not forks or any(f < 1 for f in forks):
        raise SystemExit("--forks=%s: give forks of 1 or more, such as 20 (ansible.cfg) and 0 for the wave's size"
                         % forks)


def forks_for(size: int, forks: int) -> int:
    """0 is 'as wide as the wave'."""
    return size if forks == 0 else forks


def parse_forks(text: str) -> List[int]:
    try:
        values = [int(x) for x in text.split(",")]
    except ValueError:
        raise SystemExit("--forks=%s: give numbers, such as 20,0 (0: as wide as the wave)" % text) from None
    if any(v < 0 for v in values):
        raise SystemExit("--forks=%s: give 0 or more" % text)
    return values


class Hosts:
    def __init__(self, cfg: lab_config.LabConfig, workdir: pathlib.Path) -> None:
        self.cfg = cfg
        self.workdir = workdir
        self.image = "localhost/gpufleet-lab-node:gpu"
        if lab_hosts.podman("image", "exists", self.image, check=False).returncode != 0:
            raise SystemExit("bench_hosts: the lab's GPU host image %s is missing; run `bin/lab up` once" %
                             self.image)
        if not cfg.apt_current.exists():
            raise SystemExit("bench_hosts: the lab's apt repository %s is missing; run `bin/lab up` once" %
                             cfg.apt_current)
        self.repo = cfg.apt_current.resolve()
        self.key = lab_hosts.ssh_key(cfg)

    def start(self, count: int) -> None:
        self.remove()

        def one(i: int) -> None:
            host = host_name(i)
            hostdir = self.workdir / host
            hostdir.mkdir(parents=True, exist_ok=True)
            state = lab_hosts.initial_host_state(self.cfg, self.cfg.gpu_hosts[0])
            state["host"] = host
            (hostdir / "state.json").write_text(json.dumps(state))
            port = PORT_BASE + i
            lab_hosts.podman(
                "run", "-d", "--name", PREFIX + host, "--hostname", host, "--network", "host",
                "--label", "gpufleet-hostbench=1", "-e", "GPUFLEET_SIM_HOST=%s" % host,
                "-v", "%s:/var/lib/gpufleet-lab" % hostdir, "-v", "%s:/srv/gpufleet-apt:ro" % self.repo,
                "-v", "%s:/root/.ssh/authorized_keys:ro" % self.key.with_suffix(".pub"), self.image,
                *lab_hosts.sshd_argv(port))

        with ThreadPoolExecutor(max_workers=4) as pool:
            list(pool.map(one, range(count)))
        deadline = time.time() + 60 + count
        for i in range(count):
            if not lab_hosts.ssh_banner(PORT_BASE + i, deadline):
                raise SystemExit("bench_hosts: sshd on 127.0.0.1:%d did not answer" % (PORT_BASE + i))

    def remove(self) -> None:
        names = lab_hosts.podman("ps", "-aq", "--filter", "label=gpufleet-hostbench=1").stdout.split()
        if names:
            lab_hosts.podman("rm", "-f", "-t", "0", *names, check=False)

    def inventory(self, count: int, target: str) -> pathlib.Path:
        baseline = yaml.safe_load((ROOT / "inventories" / "lab" / "baselines" / "h100-train.yml").read_text())
        inv = {"all": {"vars": {
            "ansible_host": "127.0.0.1", "ansible_user": "root", "ansible_ssh_private_key_file": str(self.key),
            "ansible_ssh_common_args": "-o UserKnownHostsFile=/dev/null -o StrictHostKeyChecking=no",
            "ansible_python_interpreter": "/usr/bin/python3", "host_bench_target": target,
            "host_bench_baseline": baseline},
            "children": {"bench_hosts": {"hosts": {host_name(i): {"ansible_port": PORT_BASE + i}
                                                   for i in range(count)}}}}}
        path = self.workdir / "hosts.yml"
        path.write_text(yaml.safe_dump(inv, sort_keys=False))
        return path


PR_SET_CHILD_SUBREAPER = 36  # linux/prctl.h


def subreaper(on: bool) -> None:
    """Adopt orphaned descendants while the wave runs: the ssh ControlMaster processes (ansible.cfg's
    ControlPersist) leave ansible-playbook's tree, and their CPU - the encryption of every module sent - must
    still be counted. Off outside the run, so the containers' conmon processes are not adopted."""
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1 if on else 0, 0, 0, 0)


def adopted_ssh() -> List[int]:
    """This process's children that are ssh (the control masters it adopted)."""
    pids = []
    for entry in pathlib.Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        comm, rest = stat[stat.index("(") + 1:stat.rindex(")")], stat[stat.rindex(")") + 2:].split()
        if comm == "ssh" and int(rest[1]) == os.getpid():
            pids.append(int(entry.name))
    return pids


def reap(pids: List[int], deadline: float) -> None:
    """Wait for the ssh masters told to exit, so their CPU is in RUSAGE_CHILDREN."""
    left = set(pids)
    while left and time.time() < deadline:
        for pid in list(left):
            try:
                done, _ = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                done = pid
            if done:
                left.discard(pid)
        time.sleep(0.1)
    if left:
        raise SystemExit("bench_hosts: ssh control masters %s still running after they were told to exit" %
                         sorted(left))


def run_wave(inventory: pathlib.Path, forks: int, log: pathlib.Path) -> Tuple[float, float]:
    """The wave's wall seconds, and the controller's CPU seconds: ansible-playbook, its forks, their ssh clients
    and the ssh control masters (adopted, told to exit and reaped after the run); the hosts' side runs in the
    containers, outside this process tree."""
    # short: a socket path has at most 107 bytes, and ssh adds 17 while it makes one
    control = pathlib.Path(tempfile.mkdtemp(prefix="hb-cp-", dir="/tmp"))
    # the change records of these runs go beside the log, not to the operator's out/; the ssh control sockets in
    # a directory of their own (not the operator's ~/.ansible/cp), so this run's masters can be found and ended
    env = dict(os.environ, ANSIBLE_FORKS=str(forks), GPUFLEET_CHANGE_RECORD_DIR=str(log.parent / "records"),
               ANSIBLE_SSH_CONTROL_PATH_DIR=str(control))
    argv = [str(pathlib.Path(sys.executable).parent / "ansible-playbook"), "benchmarks/host_wave.yml",
            "-i", str(inventory)]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subreaper(True)
    try:
        started = time.perf_counter()
        with open(log, "w") as handle:
            proc = subprocess.run(argv, cwd=ROOT, env=env, stdout=handle, stderr=subprocess.STDOUT, check=False)
        seconds = time.perf_counter() - started
        masters = adopted_ssh()
        for sock in control.iterdir():
            subprocess.run(["ssh", "-o", "ControlPath=%s" % sock, "-O", "exit", "bench"], capture_output=True,
                           check=False)
        reap(masters, time.time() + 30)
    finally:
        subreaper(False)
    shutil.rmtree(control, ignore_errors=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if proc.returncode != 0:
        raise SystemExit("bench_hosts: the wave failed (exit %d); see %s:\n%s" % (
            proc.returncode, log, log.read_text()[-3000:]))
    return seconds, cpu


def interrupted(*_: Any) -> None:
    raise KeyboardInterrupt


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="1,8,32,64")
    parser.add_argument("--forks", default="20,0", help="forks to try; 0: as wide as the wave")
    parser.add_argument("--out", default=str(ROOT / "out" / "bench" / "scale-hosts.json"))
    args = parser.parse_args()
    try:
        sizes = [int(s) for s in args.sizes.split(",")]
    except ValueError:
        raise SystemExit("--sizes=%s: give numbers, such as 1,8,32,64" % args.sizes) from None
    forks = parse_forks(args.forks)
    check_plan(sizes, [forks_for(max(sizes), f) for f in forks])
    signal.signal(signal.SIGTERM, interrupted)
    cfg = lab_config.load()
    rows: List[Dict[str, Any]] = []
    out = pathlib.Path(args.out)
    logs = out.parent / (out.stem + "-logs")  # kept after a failure: the message names the log
    logs.mkdir(parents=True, exist_ok=True)

    def write() -> None:  # after every row: a failure at 64 hosts keeps the rows before it
        out.write_text(json.dumps({"revision": revision(), "cores": os.cpu_count(), "rows": rows}, indent=2) + "\n")

    with tempfile.TemporaryDirectory(prefix="gpufleet-hostbench-") as tmp:
        hosts = Hosts(cfg, pathlib.Path(tmp))
        try:
            one_node = None
            for size in sizes:
                # Ansible starts at most as many workers as the batch has hosts: forks above the wave's size are
                # the same run
                tried = sorted({min(size, forks_for(size, f)) for f in forks})
                for width in tried:
                    hosts.start(size)
                    inventory = hosts.inventory(size, cfg.to_version)
                    seconds, cpu = run_wave(inventory, width, logs / ("wave-%d-%d.log" % (size, width)))
                    if size == 1 and one_node is None:
                        one_node = seconds
                    row = {"hosts": size, "forks": width, "seconds": round(seconds, 1),
                           "controller_cpu_s": round(cpu, 1), "controller_cpu_s_per_host": round(cpu / size, 2),
                           "batches": -(-size // width),
                           "vs_one_host": round(seconds / one_node, 2) if one_node else None}
                    rows.append(row)
                    write()
                    print("bench_hosts: %3d hosts forks %3d: %6.1f s%s, controller %6.1f CPU-s (%.2f a host)" % (
                        size, width, seconds, "  (%.2f x one host)" % row["vs_one_host"] if one_node else "",
                        cpu, cpu / size), flush=True)
        finally:
            hosts.remove()
    print("bench_hosts: figures in %s" % out)


if __name__ == "__main__":
    main()
