"""Lab configuration: versions, hosts, ports, paths. Defaults live in lab/lab.yml; the CLI may override."""
from __future__ import annotations

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


class ConfigError(Exception):
    """A lab setting that cannot be used (the message names the variable and the fix)."""


@dataclass
class LabConfig:
    from_version: str
    to_version: str
    etcd_version: str
    kwok_version: str
    versitygw_version: str
    control_plane: List[str]
    rack_sets: Dict[str, List[str]]
    backup_hosts: List[str]
    s3: Dict[str, str]
    gpus_per_node: int
    gpu_product: str
    drivers: Dict[str, str]
    ports: Dict[str, int]
    image_tag: str
    cache: pathlib.Path
    run: pathlib.Path
    inventory: pathlib.Path
    out_dir: pathlib.Path
    cell: str = DEFAULT_CELL
    cell_index: int = 0  # 0: the first cell (its hosts are gpufleet-lab-HOST, its state in run/)
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
        return [self.from_version, self.to_version]

    def bin_dir(self, what: str, version: str) -> pathlib.Path:
        return self.cache / "bin" / ("%s-%s" % (what, version))

    def apiserver_port(self, host: str) -> int:
        return self.ports["apiserver"] + self.control_plane.index(host)

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
    The first cell is the lab users know (run/, inventories/lab, ./out); every other one is a twin of the same shape
    with its own processes, hosts and ports, its state and inventory under run-CELL/ outside the checkout."""
    cells = _cells(doc)
    if cell not in cells:
        raise ConfigError("GPUFLEET_LAB_CELL=%s is not a lab cell: use one of %s (lab/lab.yml `cells`)" % (
            cell, ", ".join(cells)))
    index = cells.index(cell)
    ports = {k: int(v) + CELL_PORT_STEP * index for k, v in doc["ports"].items()}
    if index == 0:
        return {"ports": ports, "run": cache / "run", "inventory": REPO / "inventories" / "lab",
                "out_dir": REPO / "out", "index": 0}
    run = cache / ("run-" + cell)
    return {"ports": ports, "run": run, "inventory": run / "inventory", "out_dir": run / "out", "index": index}


def _cells(doc: Dict[str, Any]) -> List[str]:
    cells = [str(c) for c in (doc.get("cells") or [DEFAULT_CELL])]
    bad = [c for c in cells if not CELL_NAME.match(c)]
    if bad or len(set(cells)) != len(cells):
        raise ConfigError("lab/lab.yml cells: %s; give distinct names of lower-case letters, digits and '-'" % (
            ", ".join(bad) if bad else "a cell is listed twice"))
    return cells


def cells(path: pathlib.Path = LAB_DIR / "lab.yml") -> List[str]:
    return _cells(yaml.safe_load(path.read_text()))


def load(path: pathlib.Path = LAB_DIR / "lab.yml", cell: str = "") -> LabConfig:
    """The lab's settings for ``cell`` (default: $GPUFLEET_LAB_CELL, else the first of lab.yml's `cells`)."""
    doc = yaml.safe_load(path.read_text())
    cache = pathlib.Path(os.environ.get("GPUFLEET_LAB_CACHE", str(pathlib.Path.home() / ".cache/gpufleet/lab")))
    cell = cell or os.environ.get("GPUFLEET_LAB_CELL") or _cells(doc)[0]
    layout = cell_layout(doc, cell, cache)
    run = layout["run"]
    return LabConfig(
        from_version=os.environ.get("GPUFLEET_LAB_FROM", doc["versions"]["from"]),
        to_version=os.environ.get("GPUFLEET_LAB_TO", doc["versions"]["to"]),
        etcd_version=doc["versions"]["etcd"],
        kwok_version=doc["versions"]["kwok"],
        versitygw_version=doc["versions"]["versitygw"],
        control_plane=list(doc["hosts"]["control_plane"]),
        rack_sets={k: list(v) for k, v in doc["hosts"]["rack_sets"].items()},
        backup_hosts=list(doc["hosts"].get("backup") or []),
        s3={k: str(v) for k, v in doc["s3"].items()},
        gpus_per_node=int(doc["gpu"]["count"]),
        gpu_product=doc["gpu"]["product"],
        drivers=dict(doc["gpu"]["drivers"]),
        ports=layout["ports"],
        image_tag=doc["image_tag"],
        cache=cache,
        run=run,
        inventory=layout["inventory"],
        out_dir=layout["out_dir"],
        cell=cell,
        cell_index=layout["index"],
        extra=doc.get("extra") or {},
    )
