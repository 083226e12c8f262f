"""The lab's own network: a Linux bridge with no uplink (lab.yml `network`), the lab machine's address on it
(``lab_address``, PREFIX.0.1/16), and each cell host's network namespace (``netns``), joined to the bridge by a veth
pair and holding the host's address (LabConfig.node_address, PREFIX.CELL.(10+i)), which its Node reports (the
apiserver refuses to proxy to loopback).

- The lab plays a control-plane host's kubelet for its static pods and runs each one in the host's namespace
  (cluster.start_component), so kubeadm's manifests run as written: every host's controller-manager and scheduler
  on its own 127.0.0.1:10257 and :10259, its apiserver on the host's address, each reaching its own apiserver
  there. The cell's etcd runs in the lab machine's namespace and listens on ``lab_address`` too, where the
  apiservers reach it.
- A GPU host's simulated kubelet (kubelets.py, in the lab controller) listens in the host's namespace, on its
  address: its listening socket is made there.
- Every host's sshd (hosts.py) still listens on a loopback port of the lab machine: the host containers share its
  namespace. Only the lab's own processes and hosts reach these addresses.
"""
from __future__ import annotations

import json
import subprocess
from typing import List

from gpufleet_lab.config import LabConfig
from gpufleet_lab.procs import LabError



def ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run(["ip", *args], capture_output=True, text=True, check=False)
    if check and proc.returncode != 0:
        raise LabError("ip %s failed (%d): %s; the lab needs root (CAP_NET_ADMIN) to make its network" % (
            " ".join(args), proc.returncode, (proc.stderr or proc.stdout).strip()[-500:]))
    return proc


def lab_address(cfg: LabConfig) -> str:
    """The lab machine's own address on the bridge: what a host's namespace reaches the lab's etcd at."""
    return "%s.0.1" % cfg.network["prefix"]


def netns(cfg: LabConfig, host: str) -> str:
    """The name of a host's network namespace (`ip netns`)."""
    return "gpufleet-%s-%s" % (cfg.cell, host)


def veth(cfg: LabConfig, host: str) -> str:
    """The bridge's side of a host's veth pair (an interface name: 15 characters at most)."""
    return "gfl%d-%d" % (cfg.cell_index, cfg.hosts.index(host))


def addresses(bridge: str, namespace: str = "") -> List[str]:
    """The IPv4 addresses on interface ``bridge`` (in ``namespace``); [] when there is no such interface."""
    where = ["-n", namespace] if namespace else []
    proc = ip(*where, "-j", "-4", "addr", "show", "dev", bridge, check=False)
    if proc.returncode != 0 or not proc.stdout.strip():
        return []
    return [a["local"] for link in json.loads(proc.stdout) for a in link.get("addr_info", [])]


def _namespaces() -> List[str]:
    proc = ip("-j", "netns", "list", check=False)
    if proc.returncode != 0:
        return []
    try:
        return [n["name"] for n in json.loads(proc.stdout or "[]")]
    except (ValueError, TypeError, KeyError) as exc:
        raise LabError("`ip -j netns list` printed what the lab cannot read (%s): %r; the lab needs iproute2 "
                       "with JSON output" % (exc, proc.stdout[:200])) from exc


def ensure_netns(cfg: LabConfig, host: str, namespaces: List[str]) -> bool:
    """``host``'s namespace with loopback and only its address on eth0, eth0 the peer of its veth on the bridge;
    returns whether it made anything. A half-made pair (a namespace deleted under a live process, an interrupted
    `lab down`) is made again. ``namespaces``: the machine's, as `_namespaces` lists them."""
    name, link, address = netns(cfg, host), veth(cfg, host), cfg.node_address(host)
    made = False
    if name not in namespaces:
        ip("netns", "add", name)
        made = True
    if made or ip("-n", name, "link", "show", "dev", "eth0", check=False).returncode != 0:
        ip("link", "del", link, check=False)  # its peer is in another (or no) namespace
        ip("-n", name, "link", "del", "eth0", check=False)
        ip("link", "add", link, "type", "veth", "peer", "name", "eth0", "netns", name)
        made = True
    ip("link", "set", link, "master", cfg.network["bridge"], "up")
    ip("-n", name, "link", "set", "lo", "up")
    ip("-n", name, "link", "set", "eth0", "up")
    have = addresses("eth0", name)
    for other in have:
        if other != address:  # lab.yml's hosts or cells changed order: this host's address is another now
            ip("-n", name, "addr", "del", other + "/16", "dev", "eth0", check=False)
    if address not in have:
        ip("-n", name, "addr", "add", address + "/16", "dev", "eth0")
        made = True
    return made


def ensure_network(cfg: LabConfig) -> List[str]:
    """Make the bridge and the lab machine's address on it (once per machine: every cell shares them) and each of
    this cell's hosts' namespaces; returns the addresses added."""
    bridge = cfg.network["bridge"]
    if ip("link", "show", "dev", bridge, check=False).returncode != 0:
        ip("link", "add", bridge, "type", "bridge")
    ip("link", "set", bridge, "up")
    have = set(addresses(bridge))
    added, namespaces = [], _namespaces()
    if lab_address(cfg) not in have:
        ip("addr", "add", lab_address(cfg) + "/16", "dev", bridge)
        added.append(lab_address(cfg))
    for host in cfg.hosts:
        address = cfg.node_address(host)
        if address in have:  # an older lab put it on the bridge; it is the host's namespace's now
            ip("addr", "del", address + "/32", "dev", bridge)
        if ensure_netns(cfg, host, namespaces):
            added.append("%s (%s)" % (address, netns(cfg, host)))
    return added


def remove_network(cfg: LabConfig) -> List[str]:
    """Take this cell's namespaces and addresses off the lab machine (`lab down`, once nothing runs in them); the
    bridge and the lab machine's address stay for the other cells. Returns what it removed."""
    removed, namespaces = [], _namespaces()
    for host in cfg.hosts:
        if netns(cfg, host) in namespaces:
            ip("netns", "del", netns(cfg, host))  # its eth0 goes with it, and the pair's other side
            removed.append(netns(cfg, host))
        ip("link", "del", veth(cfg, host), check=False)
    have = set(addresses(cfg.network["bridge"]))
    for host in cfg.hosts:
        if cfg.node_address(host) in have:  # an older lab's
            ip("addr", "del", cfg.node_address(host) + "/32", "dev", cfg.network["bridge"])
            removed.append(cfg.node_address(host))
    return removed
