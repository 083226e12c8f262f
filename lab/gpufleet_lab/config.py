"""Lab configuration: versions, hosts, ports, paths. Defaults live in lab/lab.yml; the CLI may override."""
from __future__ import annotations

import itertools
import os
import pathlib
import re
from dataclasses import dataclass, field
from typing import Any, Dict, List

import yaml

REPO = pathlib.Path(__file__).resolve().parents[2]
LAB_DIR = REPO / "lab"
DEFAULT_CELL = "lab"  # when lab.yml lists no `cells`
CELL_PORT_STEP = 100  # cell N of lab.yml's `cells` takes every port of `ports` + N x 100
CELL_NAME = re.compile(r"^[a-z][a-z0-9-]{0,30}$")  # part of container names, ports' order and run-CELL/ paths
CELL_KINDS = ("canary", "dev", "staging", "inference", "training")  # as plugins/module_utils/fleet.py KINDS
MAX_HOSTS_PER_CELL = 50  # each host's sshd takes the cell's ssh port + its index: under CELL_PORT_STEP


class ConfigError(Exception):
    """A lab setting that cannot be used (the message names the variable and the fix)."""


@dataclass
class LabConfig:
    from_version: str
    to_version: str
    later_versions: List[str]
    etcd_version: str
    etcd_next_version: str
    kwok_version: str
    versitygw_version: str
    helm_version: str
    control_plane: List[str]
    rack_sets: Dict[str, List[str]]
    backup_hosts: List[str]
    s3: Dict[str, str]
    gpus_per_node: int
    gpu_product: str
    drivers: Dict[str, str]
    ports: Dict[str, int]
    image_tag: str
    network: Dict[str, str]
    cache: pathlib.Path
    run: pathlib.Path
    inventory: pathlib.Path
    out_dir: pathlib.Path
    cell: str = DEFAULT_CELL
    cell_index: int = 0  # 0: the first cell (its hosts are gpufleet-lab-HOST, its state in run/)
    kind: str = "training"  # what the cell stands for in `bin/lab fleet` (lab.yml `cells[].kind`)
    extra: Dict[str, Any] = field(default_factory=dict)

    @property
    def gpu_hosts(self) -> List[str]:
        return [h for hosts in self.rack_sets.values() for h in hosts]

    @property
    def hosts(self) -> List[str]:
        return self.control_plane + self.gpu_hosts

    @property
    def machines(self) -> List[str]:
        """Every SSH host of the lab: the cell's hosts (each a Node), then the backup hosts off the cell."""
        return self.hosts + self.backup_hosts

    @property
    def versions(self) -> List[str]:
        return [self.from_version, self.to_version] + self.later_versions

    @property
    def etcd_versions(self) -> List[str]:
        """The etcd builds: what the members start on, then the etcd window's target."""
        return [self.etcd_version, self.etcd_next_version]

    def bin_dir(self, what: str, version: str) -> pathlib.Path:
        return self.cache / "bin" / ("%s-%s" % (what, version))

    def node_address(self, host: str) -> str:
        """The address ``host``'s Node reports and its kubelet answers on: on the lab's own bridge
        (network.py), PREFIX.CELL.(10 + the host's place in the cell), so cells never share one."""
        return "%s.%d.%d" % (self.network["prefix"], self.cell_index, 10 + self.hosts.index(host))

    def apiserver_port(self, host: str) -> int:
        return self.ports["apiserver"] + self.control_plane.index(host)

    def apiserver_url(self, host: str) -> str:
        """A control-plane host's own kube-apiserver: its address (in the host's network namespace) and port."""
        return "https://%s:%d" % (self.node_address(host), self.apiserver_port(host))

    @property
    def pki(self) -> pathlib.Path:
        return self.run / "pki"

    @property
    def apt_current(self) -> pathlib.Path:
        """The stable link to the current apt repository (Molecule platforms mount it)."""
        return self.cache / "apt" / "current"

    @property
    def kubeconfig(self) -> pathlib.Path:
        return self.inventory / "kubeconfig"

    def rack_set_of(self, host: str) -> str:
        for name, hosts in self.rack_sets.items():
            if host in hosts:
                return name
        return ""


def cell_layout(doc: Dict[str, Any], cell: str, cache: pathlib.Path) -> Dict[str, Any]:
    """Where cell ``cell`` of lab.yml's ``cells`` lives: its index, ports, run directory, inventory and outputs.
    The first cell is the lab users know (run/, inventories/lab, ./out); every other one has its own processes,
    hosts and ports, its state and inventory under run-CELL/ outside the checkout."""
    specs = cell_specs(doc)
    names = [c["name"] for c in specs]
    if cell not in names:
        raise ConfigError("GPUFLEET_LAB_CELL=%s is not a lab cell: use one of %s (lab/lab.yml `cells`)" % (
            cell, ", ".join(names)))
    index = names.index(cell)
    ports = {k: int(v) + CELL_PORT_STEP * index for k, v in doc["ports"].items()}
    if index == 0:
        return {"ports": ports, "run": cache / "run", "inventory": REPO / "inventories" / "lab",
                "out_dir": REPO / "out", "index": 0, "spec": specs[0]}
    run = cache / ("run-" + cell)
    return {"ports": ports, "run": run, "inventory": run / "inventory", "out_dir": run / "out", "index": index,
            "spec": specs[index]}


def _shape(where: str, hosts: Any) -> Dict[str, Any]:
    """A cell's hosts (lab.yml ``hosts``, or a cell's own ``hosts``), checked: at least one control-plane host,
    GPU hosts in rack sets (at least two GPU hosts: the training gang has two ranks), no name twice."""
    if not isinstance(hosts, dict):
        raise ConfigError("lab/lab.yml %s: give a mapping with control_plane, rack_sets and backup" % where)
    control_plane = hosts.get("control_plane")
    rack_sets = hosts.get("rack_sets")
    backup = hosts.get("backup") or []
    if not (isinstance(control_plane, list) and control_plane and all(isinstance(h, str) for h in control_plane)):
        raise ConfigError("lab/lab.yml %s.control_plane: give a list of at least one host name" % where)
    if not (isinstance(rack_sets, dict) and rack_sets and all(
            isinstance(v, list) and v and all(isinstance(h, str) for h in v) for v in rack_sets.values())):
        raise ConfigError("lab/lab.yml %s.rack_sets: give rack set names, each with a list of GPU host names" % where)
    if not (isinstance(backup, list) and all(isinstance(h, str) for h in backup)):
        raise ConfigError("lab/lab.yml %s.backup: give a list of host names (or leave it out)" % where)
    gpu = [h for v in rack_sets.values() for h in v]
    every = control_plane + gpu + backup
    if len(gpu) < 2:
        raise ConfigError("lab/lab.yml %s.rack_sets: give at least two GPU hosts (the training gang has two "
                          "ranks of a node each)" % where)
    if len(set(every)) != len(every) or not all(CELL_NAME.match(h) for h in every):
        raise ConfigError("lab/lab.yml %s: host names must be distinct, of lower-case letters, digits and '-'" % where)
    if len(every) > MAX_HOSTS_PER_CELL:
        raise ConfigError("lab/lab.yml %s: %d hosts; at most %d a cell" % (where, len(every), MAX_HOSTS_PER_CELL))
    return {"control_plane": list(control_plane), "rack_sets": {str(k): list(v) for k, v in rack_sets.items()},
            "backup": list(backup)}


def cell_specs(doc: Dict[str, Any]) -> List[Dict[str, Any]]:
    """lab.yml's ``cells``, each as {name, kind, hosts}: an entry is a name (the shape of lab.yml's ``hosts``, kind
    training) or a mapping with ``name`` and its own ``kind`` and ``hosts``."""
    default_hosts = _shape("hosts", doc.get("hosts"))
    specs = []
    for index, given in enumerate(doc.get("cells") or [DEFAULT_CELL]):
        where = "cells[%d]" % index
        entry = {"name": given} if isinstance(given, str) else given
        if not isinstance(entry, dict):
            raise ConfigError("lab/lab.yml %s: give a cell name or a mapping with name, kind and hosts" % where)
        unknown = sorted(set(entry) - {"name", "kind", "hosts"})
        if unknown:
            raise ConfigError("lab/lab.yml %s: unknown key(s) %s; a cell has name, kind and hosts" % (
                where, ", ".join(map(str, unknown))))
        name = entry.get("name")
        if not (isinstance(name, str) and CELL_NAME.match(name)):
            raise ConfigError("lab/lab.yml %s.name: give a name of lower-case letters, digits and '-' (at most 31)"
                              % where)
        kind = entry.get("kind", "training")
        if kind not in CELL_KINDS:
            raise ConfigError("lab/lab.yml %s.kind: %r; give one of %s" % (where, kind, ", ".join(CELL_KINDS)))
        hosts = _shape(where + ".hosts", entry["hosts"]) if "hosts" in entry else default_hosts
        specs.append({"name": name, "kind": kind, "hosts": hosts})
    names = [c["name"] for c in specs]
    if len(set(names)) != len(names):
        raise ConfigError("lab/lab.yml cells: %s is listed twice; give distinct names" % next(
            n for n in names if names.count(n) > 1))
    return specs


def _doc(path: pathlib.Path) -> Dict[str, Any]:
    return yaml.safe_load(path.read_text())


def cells(path: pathlib.Path = LAB_DIR / "lab.yml") -> List[str]:
    return [c["name"] for c in cell_specs(_doc(path))]


def fleet_cells(path: pathlib.Path = LAB_DIR / "lab.yml") -> List[str]:
    """The cells `bin/lab fleet` makes a fleet of, one ring each in this order (lab.yml ``fleet``)."""
    doc = _doc(path)
    names = [c["name"] for c in cell_specs(doc)]
    fleet = doc.get("fleet")
    if not (isinstance(fleet, list) and fleet and all(isinstance(n, str) for n in fleet)):
        raise ConfigError("lab/lab.yml fleet: give the list of cells (from `cells`) that `bin/lab fleet` rings")
    unknown = [n for n in fleet if n not in names]
    if unknown or len(set(fleet)) != len(fleet):
        raise ConfigError("lab/lab.yml fleet: %s; give distinct cells of `cells` (%s)" % (
            "%s is not a cell" % ", ".join(unknown) if unknown else "a cell is listed twice", ", ".join(names)))
    return list(fleet)


def _later(doc: Dict[str, Any]) -> List[str]:
    """lab.yml versions.later: the minors after `to`, one each, in order (the skip-level cycle's hops)."""
    later = doc["versions"].get("later") or []
    if not (isinstance(later, list) and all(isinstance(v, str) and v.startswith("v1.") for v in later)):
        raise ConfigError("lab/lab.yml versions.later: give a list of releases such as [v1.37.2]")
    minors = [int(v.split(".")[1]) for v in [doc["versions"]["to"]] + later]
    if any(b != a + 1 for a, b in itertools.pairwise(minors)):
        raise ConfigError("lab/lab.yml versions.later: %s - each must be one minor above the one before it "
                          "(starting from `to`)" % ", ".join(later))
    return list(later)


def _network(doc: Dict[str, Any]) -> Dict[str, str]:
    """lab.yml ``network``: the bridge the lab makes (a Linux interface name) and the first two octets of its
    private IPv4 addresses."""
    net = doc.get("network")
    if not (isinstance(net, dict) and isinstance(net.get("bridge"), str) and re.match(r"^[a-z][a-z0-9-]{0,14}$",
                                                                                      net["bridge"])):
        raise ConfigError("lab/lab.yml network.bridge: give an interface name of at most 15 lower-case letters, "
                          "digits and '-'")
    prefix = str(net.get("prefix", ""))
    octets = prefix.split(".")
    if not (len(octets) == 2 and all(o.isdigit() and int(o) < 256 for o in octets) and (
            octets[0] == "10" or (octets[0] == "172" and 16 <= int(octets[1]) < 32) or prefix == "192.168")):
        raise ConfigError("lab/lab.yml network.prefix: %r; give the first two octets of a private IPv4 range "
                          "(such as 10.217)" % prefix)
    return {"bridge": net["bridge"], "prefix": prefix}


def load(path: pathlib.Path = LAB_DIR / "lab.yml", cell: str = "") -> LabConfig:
    """The lab's settings for ``cell`` (default: $GPUFLEET_LAB_CELL, else the first of lab.yml's `cells`)."""
    doc = _doc(path)
    cache = pathlib.Path(os.environ.get("GPUFLEET_LAB_CACHE", str(pathlib.Path.home() / ".cache/gpufleet/lab")))
    cell = cell or os.environ.get("GPUFLEET_LAB_CELL") or cell_specs(doc)[0]["name"]
    layout = cell_layout(doc, cell, cache)
    run = layout["run"]
    shape = layout["spec"]["hosts"]
    return LabConfig(
        from_version=os.environ.get("GPUFLEET_LAB_FROM", doc["versions"]["from"]),
        to_version=os.environ.get("GPUFLEET_LAB_TO", doc["versions"]["to"]),
        later_versions=_later(doc),
        etcd_version=doc["versions"]["etcd"],
        etcd_next_version=doc["versions"]["etcd_next"],
        kwok_version=doc["versions"]["kwok"],
        versitygw_version=doc["versions"]["versitygw"],
        helm_version=doc["versions"]["helm"],
        control_plane=shape["control_plane"],
        rack_sets=shape["rack_sets"],
        backup_hosts=shape["backup"],
        s3={k: str(v) for k, v in doc["s3"].items()},
        gpus_per_node=int(doc["gpu"]["count"]),
        gpu_product=doc["gpu"]["product"],
        drivers=dict(doc["gpu"]["drivers"]),
        ports=layout["ports"],
        image_tag=doc["image_tag"],
        network=_network(doc),
        cache=cache,
        run=run,
        inventory=layout["inventory"],
        out_dir=layout["out_dir"],
        cell=cell,
        cell_index=layout["index"],
        kind=layout["spec"]["kind"],
        extra=doc.get("extra") or {},
    )
