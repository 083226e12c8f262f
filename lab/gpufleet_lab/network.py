"""The lab's own network: a Linux bridge with no uplink, holding each cell host's address (LabConfig.node_address).
Its Node reports that address, and its simulated kubelet (kubelets.py) answers on it - the apiserver refuses to
proxy to loopback, so a kubelet's /configz read through the apiserver needs an address like a real host's. The
hosts still share the lab machine's network namespace (their sshd on loopback ports, hosts.py); only the lab's own
processes and hosts reach these addresses."""
from __future__ import annotations

import json
import subprocess
from typing import List

from gpufleet_lab.config import LabConfig
from gpufleet_lab.procs import LabError


def ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run(["ip", *args], capture_output=True, text=True, check=False)
    if check and proc.returncode != 0:
        raise LabError("ip %s failed (%d): %s; the lab needs root (CAP_NET_ADMIN) to make its bridge" % (
            " ".join(args), proc.returncode, (proc.stderr or proc.stdout).strip()[-500:]))
    return proc


def addresses(bridge: str) -> List[str]:
    """The IPv4 addresses on ``bridge`` ([] when there is no such interface)."""
    proc = ip("-j", "-4", "addr", "show", "dev", bridge, check=False)
    if proc.returncode != 0 or not proc.stdout.strip():
        return []
    return [a["local"] for link in json.loads(proc.stdout) for a in link.get("addr_info", [])]


def ensure_network(cfg: LabConfig) -> List[str]:
    """Make the bridge (once per machine: every cell shares it) and put this cell's host addresses on it; returns
    the addresses added."""
    bridge = cfg.network["bridge"]
    if ip("link", "show", "dev", bridge, check=False).returncode != 0:
        ip("link", "add", bridge, "type", "bridge")
    ip("link", "set", bridge, "up")
    have = set(addresses(bridge))
    added = []
    for host in cfg.hosts:
        address = cfg.node_address(host)
        if address not in have:
            ip("addr", "add", address + "/32", "dev", bridge)
            added.append(address)
    return added
