"""lab: the gpufleet lab CLI.

  lab up [--fleet]     build what is missing (cached), start the control plane and the hosts, write inventories/lab/
  lab down [--all|--fleet]  stop everything the lab cell started (state is kept for the next up); --all: every
                       cell; --fleet: the fleet cells (lab.yml `fleet`)
  lab reset [--all|--fleet]  down, then forget all state: the next up starts on the `from` version again
  lab status           what runs, at which version
  lab fault HOST KIND  inject a fault (lab fault --list for the kinds)
  lab clear HOST       clear every fault on HOST
  lab ee               build the execution-environment image (ansible-builder, layer-cached) and print its name
  lab env              the selected cell's paths and ports as shell assignments (Molecule scenarios read them)
  lab fleet            the fleet cells (lab.yml `fleet`) as a fleet, one ring each (gpufleet_fleet, YAML for
                       `ansible-playbook playbooks/fleet.yml -e @`)

GPUFLEET_LAB_CELL picks the cell (lab/lab.yml `cells`; default: the first, `lab`): each cell has its own etcd,
apiservers, controllers, KWOK, hosts and ports (and its own shape where lab.yml gives one), so tests can run on
several at once.
GPUFLEET_LAB_CACHE moves the cache (default ~/.cache/gpufleet/lab). GPUFLEET_LAB_STOP_BEFORE_BUILD=1 makes `up` set up
and check the first build that is needed and stop before its downloads (the fresh-machine test).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import sys
import time
from typing import List, Optional

from gpufleet_lab import cluster, config, faults, hosts, inference, kube, kubeadm, network, pki, procs
from gpufleet_lab.procs import LabError

say = cluster.say


def up(cfg: config.LabConfig) -> None:
    """Bring the cell up; one `up` at a time per cache (cells share its builds, images and apt repository)."""
    import fcntl
    cfg.cache.mkdir(parents=True, exist_ok=True)
    with open(cfg.cache / "up.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        _up(cfg)


def _up(cfg: config.LabConfig) -> None:
    started = time.time()
    say("cell %s: apiservers behind 127.0.0.1:%d, state in %s" % (cfg.cell, cfg.ports["apiserver_lb"], cfg.run))
    if os.environ.get("GPUFLEET_LAB_STOP_BEFORE_BUILD") and cluster.build(cfg, dry_run=True):
        say("stopping before the first build (GPUFLEET_LAB_STOP_BEFORE_BUILD): the set-up got this far")
        return
    cluster.check_layout(cfg)
    cluster.build(cfg)
    added = network.ensure_network(cfg)
    if added:
        say("network %s: %s" % (cfg.network["bridge"], ", ".join(added)))
    pki.ensure(cfg.pki, [network.lab_address(cfg)] + [cfg.node_address(h) for h in cfg.control_plane])
    pki.ensure_front_proxy(cfg.pki)
    pki.ensure_kubelets(cfg.pki, {h: cfg.node_address(h) for h in cfg.hosts})
    state = cluster.load_state(cfg)
    cluster.save_state(cfg, state)
    (cfg.run / cluster.UP_MARK).unlink(missing_ok=True)
    cluster.component_kubeconfigs(cfg)
    kubeadm.write_etcd_manifests(cfg)
    cluster.start_etcd(cfg)
    if not procs.pid_of(cfg.run, "lab-controller"):
        say("starting the lab controller (apiserver load balancer on 127.0.0.1:%d, version switches)" %
            cfg.ports["apiserver_lb"])
        procs.start(cfg.run, "lab-controller", [sys.executable, "-m", "gpufleet_lab", "controller"],
                    env={"PYTHONPATH": str(config.LAB_DIR), "GPUFLEET_LAB_CELL": cfg.cell})
    kubeadm.write_manifests(cfg, state)  # kubeadm's own, from the real kubeadm (once per host)
    for host in cfg.control_plane:
        state["apiserver"][host] = cluster.start_component(cfg, host, "kube-apiserver")  # what its manifest runs
    cluster.save_state(cfg, state)
    procs.wait_https("https://127.0.0.1:%d/readyz" % cfg.ports["apiserver_lb"], cfg.pki, cfg.run, "lab-controller")
    for host in cfg.control_plane:  # each host's own, from its manifests, reaching its own apiserver
        for component in ("kube-controller-manager", "kube-scheduler"):
            cluster.start_component(cfg, host, component)
    (cfg.run / cluster.UP_MARK).write_text(time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
    cluster.start_kwok(cfg)
    cluster.start_s3(cfg)
    say("installing the Kueue %s and JobSet %s CRDs" % (kube.KUEUE_VERSION, kube.JOBSET_VERSION))
    kube.ensure_crds(cfg)
    kube.ensure_kubeadm_rbac(cfg)
    kube.ensure_nodes(cfg, state["kubelet"])
    kube.wait_nodes_ready(cfg)
    say("%d Node objects Ready" % len(cfg.hosts))
    kube.ensure_training(cfg)
    say("training gang llm-pretrain (JobSet, 2 ranks x %d GPUs) admitted by its Kueue Workload" % cfg.gpus_per_node)
    say("addons: %s" % ", ".join(kube.ensure_addons(cfg)))
    say("security: %s" % ", ".join(kube.ensure_security(cfg)))
    from gpufleet_lab import helm
    say("Helm releases (real helm %s): %s" % (cfg.helm_version, ", ".join(helm.ensure_releases(cfg)) or "in place"))
    made = kubeadm.sync(cfg, kube.api(cfg), state)
    say("what kubeadm reads (kubeadm-config, component configs, mirror pods, static pod manifests): %s" % (
        "%d object(s) made or moved" % len(made) if made else "in place"))
    hosts.ensure_hosts(cfg)
    inventory = hosts.write_inventory(cfg, kube.cluster_uid(cfg))
    say("inventory %s, kubeconfig %s" % (inventory, cfg.kubeconfig))
    say("up in %.0f s" % (time.time() - started))


def down(cfg: config.LabConfig) -> None:
    say("cell %s: stopping" % cfg.cell)
    hosts.stop_hosts(cfg)
    # an older lab's one controller manager and scheduler by those names
    for name in ["lab-controller", "s3", "kwok", "scheduler", "controller-manager"] + [
            cluster.process_name(c, h) for h in cfg.control_plane for c in reversed(kubeadm.COMPONENTS)] + [
            cluster.etcd_process(h) for h in cluster.etcd_members(cfg)] + ["etcd"]:
        if procs.stop(cfg.run, name):
            say("stopped %s" % name)
    (cfg.run / cluster.UP_MARK).unlink(missing_ok=True)
    removed = network.remove_network(cfg)
    if removed:
        say("network: removed %s" % ", ".join(removed))
    for host in cfg.control_plane:  # a stopped host runs nothing: `up` starts each apiserver from its manifest
        shutil.rmtree(cfg.run / "hosts" / host / "kubelet-running", ignore_errors=True)
    left = procs.running(cfg.run)
    if left:
        raise LabError("still running after down: %s" % ", ".join(left))


def down_all() -> int:
    """Stop every cell of lab.yml, each even when another fails (CI's clean-up), whatever GPUFLEET_LAB_CELL is."""
    failed = []
    try:
        names = config.cells()
    except config.ConfigError as exc:
        print("lab: error: %s" % exc, file=sys.stderr)
        return 2
    for name in names:
        try:
            down(config.load(cell=name))
        except (LabError, config.ConfigError, OSError) as exc:
            print("lab: error: cell %s: %s" % (name, exc), file=sys.stderr)
            failed.append(name)
    return 1 if failed else 0


def status(cfg: config.LabConfig) -> int:
    state = cluster.load_state(cfg)
    running = procs.running(cfg.run)
    out = {"processes": running, "apiserver_versions": state["apiserver"], "kubelet_versions": state["kubelet"],
           "control_plane": cluster.running_versions(cfg), "hosts": hosts.host_status(cfg),
           "faults": {h: faults.host_faults(cfg, h) for h in cfg.hosts if faults.host_faults(cfg, h)}}
    print(json.dumps(out, indent=2))
    return 0 if running else 3


def shell_env(cfg: config.LabConfig) -> str:
    """What Molecule scenarios and scripts read about the selected cell, as `export NAME=value` lines."""
    import shlex
    values = {"GPUFLEET_LAB_CELL": cfg.cell, "GPUFLEET_LAB_CACHE": cfg.cache, "GPUFLEET_LAB_RUN": cfg.run,
              "GPUFLEET_LAB_PKI": cfg.pki, "GPUFLEET_LAB_APT": cfg.apt_current,
              "GPUFLEET_LAB_KUBECONFIG": cfg.kubeconfig, "GPUFLEET_LAB_INVENTORY": cfg.inventory,
              "GPUFLEET_LAB_ETCD": cluster.etcd_urls(cfg)[0],
              # every member, as a YAML flow list (Molecule puts it into its YAML as it is)
              "GPUFLEET_LAB_ETCD_MEMBERS": json.dumps(cluster.etcd_urls(cfg)),
              "GPUFLEET_LAB_FROM": cfg.from_version, "GPUFLEET_LAB_TO": cfg.to_version}
    from gpufleet_lab import helm
    values.update({"GPUFLEET_LAB_HELM": helm.binary(cfg), "GPUFLEET_LAB_CHARTS": helm.charts_dir(cfg)})
    values.update(("GPUFLEET_LAB_APISERVER_%d" % (i + 1), cfg.apiserver_url(h))
                  for i, h in enumerate(cfg.control_plane))
    return "".join("export %s=%s\n" % (k, shlex.quote(str(v))) for k, v in values.items())


def fleet_doc(names: Optional[List[str]] = None) -> dict:
    """The lab's fleet cells (lab.yml ``fleet``, or the cells ``names``) as a fleet (docs/fleet.md), one ring each
    in that order, each cell with its lab.yml kind. Every cell declared on `from`; soaks and halt checks in
    seconds, as the lab runs."""
    names = names or config.fleet_cells()
    cells = []
    for ring, name in enumerate(names):
        cfg = config.load(cell=name)
        cells.append({"name": name, "ring": "ring%d" % ring, "kind": cfg.kind,
                      "region": "lab", "gpus": len(cfg.gpu_hosts) * cfg.gpus_per_node,
                      "inventory": str(cfg.inventory), "control_plane": cfg.from_version,
                      "pools": [{"name": "h100-train", "kubelet": cfg.from_version, "nodes": len(cfg.gpu_hosts)}],
                      # the NCCL probe: a host without the GPU fault the fleet test injects (on the first one)
                      "nccl_hosts": [cfg.gpu_hosts[-1]],
                      "inference": {"metrics_url": "http://127.0.0.1:%d/metrics" % cfg.ports["inference"],
                                    "histogram": inference.HISTOGRAM}})
    total = sum(c["gpus"] for c in cells)
    return {"gpufleet_fleet": {
        "name": "lab",
        "policy": {
            "target": config.load(cell=names[0]).to_version,
            "rings": [{"name": c["ring"], "soak_seconds": 10} for c in cells],
            "max_cells_in_flight": 1,
            # one cell at a time: the largest cell's share, rounded up (16 of 48 GPUs is 0.3334, not 0.3333)
            "max_gpu_fraction_in_flight": math.ceil(10000 * max(c["gpus"] for c in cells) / total) / 10000,
            "halt_check_seconds": 10, "metrics_window_seconds": 5, "cell_timeout_seconds": 1800,
            # LAB ONLY: the lab's apiservers share two busy cores with everything else, so a p99 of a few ms
            # swings by several times between two readings; a real fleet keeps the default floor (0.25 s).
            "halt": {"apiserver_p99_floor_seconds": 1.0},
        },
        "cells": cells}}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="lab", description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    sub = parser.add_subparsers(dest="cmd", required=True)
    for name in ("status", "controller", "ee", "env", "fleet"):
        sub.add_parser(name)
    for name in ("up", "down", "reset"):
        many = sub.add_parser(name).add_mutually_exclusive_group()
        if name != "up":
            many.add_argument("--all", action="store_true", help="every cell of lab/lab.yml")
        many.add_argument("--fleet", action="store_true", help="every fleet cell (lab/lab.yml `fleet`), in turn")
    fault = sub.add_parser("fault")
    fault.add_argument("host", nargs="?")
    fault.add_argument("kind", nargs="?")
    fault.add_argument("--list", action="store_true")
    clear = sub.add_parser("clear")
    clear.add_argument("host")
    args = parser.parse_args(argv)
    if args.cmd == "down" and args.all:
        return down_all()
    try:
        if args.cmd == "fleet":
            import yaml
            doc = fleet_doc()
            print("---\n# Written by `bin/lab fleet` (lab/gpufleet_lab/__main__.py): the lab's fleet cells as a fleet.")
            print(yaml.safe_dump(doc, sort_keys=False), end="")
            return 0
        if getattr(args, "fleet", False) or getattr(args, "all", False):
            names = config.fleet_cells() if args.fleet else config.cells()
            for name in names:
                _cell_command(args.cmd, config.load(cell=name))
            return 0
        cfg = config.load()
    except config.ConfigError as exc:
        print("lab: error: %s" % exc, file=sys.stderr)
        return 2
    except LabError as exc:
        print("lab: error: %s" % exc, file=sys.stderr)
        return 1
    try:
        if args.cmd == "env":
            print(shell_env(cfg), end="")
        elif args.cmd in ("up", "down", "reset"):
            _cell_command(args.cmd, cfg)
        elif args.cmd == "status":
            return status(cfg)
        elif args.cmd == "ee":
            from gpufleet_lab import ee
            print(ee.build(cfg))
        elif args.cmd == "controller":
            from gpufleet_lab import controller
            controller.main(cfg)
        elif args.cmd == "fault":
            if args.list or not (args.host and args.kind):
                for kind, what in sorted(faults.kinds().items()):
                    print("%-20s %s" % (kind, what))
                return 0 if args.list else 2
            say("fault %s on %s: %s" % (args.kind, args.host, faults.inject(cfg, args.host, args.kind)))
        elif args.cmd == "clear":
            faults.clear(cfg, args.host)
            say("faults cleared on %s" % args.host)
    except LabError as exc:
        print("lab: error: %s" % exc, file=sys.stderr)
        return 1
    return 0


def _cell_command(cmd: str, cfg: config.LabConfig) -> None:
    """up, down or reset of one cell."""
    if cmd == "up":
        up(cfg)
    elif cmd == "down":
        down(cfg)
    elif cmd == "reset":
        down(cfg)
        shutil.rmtree(cfg.run, ignore_errors=True)
        for name in ("hosts.yml", "kubeconfig"):
            (cfg.inventory / name).unlink(missing_ok=True)
        say("state removed (%s)" % cfg.run)


if __name__ == "__main__":
    sys.exit(main())
