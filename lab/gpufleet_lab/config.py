"""Lab configuration: versions, hosts, ports, paths. Defaults live in lab/lab.yml; the CLI may override."""
from __future__ import annotations

import os
import pathlib
from dataclasses import dataclass, field
from typing import Any, Dict, List

import yaml

REPO = pathlib.Path(__file__).resolve().parents[2]
LAB_DIR = REPO / "lab"


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
    def kubeconfig(self) -> pathlib.Path:
        return self.inventory / "kubeconfig"

    def rack_set_of(self, host: str) -> str:
        for name, hosts in self.rack_sets.items():
            if host in hosts:
                return name
        return ""


def load(path: pathlib.Path = LAB_DIR / "lab.yml") -> LabConfig:
    doc = yaml.safe_load(path.read_text())
    cache = pathlib.Path(os.environ.get("GPUFLEET_LAB_CACHE", str(pathlib.Path.home() / ".cache/gpufleet/lab")))
    run = pathlib.Path(os.environ.get("GPUFLEET_LAB_RUN", str(cache / "run")))
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
        ports={k: int(v) for k, v in doc["ports"].items()},
        image_tag=doc["image_tag"],
        cache=cache,
        run=run,
        inventory=REPO / "inventories" / "lab",
        extra=doc.get("extra") or {},
    )
