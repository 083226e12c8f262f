"""A skip-level cycle on the lab's `skip-level` cell (lab/lab.yml): one control-plane host, gpu-a1 in the training
pool h100-train (skip_level true, the default) and gpu-b1 given its own pool h100-serve with skip_level false.

The cycle ends at the lab's third minor (`versions.later[0]`), one run per control-plane hop:
  run 1  target `to`: the control plane moves one minor, h100-serve follows it, h100-train stays at `from`;
  run 2  target `later[0]`: the control plane moves again and h100-train jumps two minors in one drain.
The last run's change record counts each node's drains in the cycle: one for the training node, one per hop for
the node that follows the control plane (and for the control-plane host).

Needs its own cell (make lab-tests-skip brings it up); it is reset to `from` first when it is not there."""
from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess
import sys
import time

import pytest
import yaml
from kubernetes import client, config

from tests.lab import conftest
from tests.lab.conftest import ROOT

from gpufleet_lab import config as lab_config
from gpufleet_lab import kubeadm as lab_kubeadm

pytestmark = pytest.mark.lab
BIN = pathlib.Path(sys.executable).parent
CELL = "skip-level"
ANN = "gpufleet.io/"


def lab_cli(*args):
    return conftest.lab_cli(*args, cell=CELL)


def apiservers():
    return json.loads(lab_cli("status").stdout)["apiserver_versions"]


@pytest.fixture(scope="module")
def cycle(tmp_path_factory):
    """The cell up on `from`, and an inventory of it with two pools: a copy of the cell's (links followed), gpu-b1
    in h100-serve (its baseline the training pool's, renamed), and the cycle's settings as extra vars."""
    cfg = lab_config.load(cell=CELL)
    assert cfg.later_versions, "lab/lab.yml versions.later: the cycle needs a third minor"
    lab_cli("up")
    if set(apiservers().values()) != {cfg.from_version}:
        lab_cli("reset")
        lab_cli("up")
    work = tmp_path_factory.mktemp("skip-level")
    inventory = work / "inventory"
    shutil.copytree(cfg.inventory, inventory, symlinks=False)
    (inventory / "host_vars").mkdir(exist_ok=True)
    (inventory / "host_vars" / "gpu-b1.yml").write_text("---\ngpufleet_pool: h100-serve\n")
    serve = yaml.safe_load((inventory / "baselines" / "h100-train.yml").read_text())
    serve["name"] = "h100-serve"
    (inventory / "baselines" / "h100-serve.yml").write_text(yaml.safe_dump(serve))
    settings = yaml.safe_load((ROOT / "inventories" / "lab" / "group_vars" / "all.yml").read_text())
    end = cfg.later_versions[0]
    end_minor = end.lstrip("v").rsplit(".", 1)[0]
    extra = {
        "gpufleet_cycle_target_version": end,
        "gpufleet_pool_policies": {"h100-serve": {"skip_level": False}},
        "gpufleet_baseline_dir": str(inventory / "baselines"),
        "gpufleet_out_dir": str(work / "out"),
        # LAB ONLY, as inventories/lab/group_vars/all.yml declares Cilium for the rehearsal's minors: the cycle's
        # last minor too (a real cell cites its vendor's row)
        "gpufleet_addon_support": [dict(row, kube_max=end_minor) for row in settings["gpufleet_addon_support"]],
    }
    (work / "cycle.yml").write_text(yaml.safe_dump(extra))
    yield cfg, inventory, work
    for host in cfg.gpu_hosts:
        lab_cli("clear", host)


def run(cfg, inventory, work, target):
    env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_CALLBACK_RESULT_FORMAT="json", GPUFLEET_CHANGE_RECORD_DIR=str(work / ("records-%s" % target)),
               PATH="%s:%s" % (BIN, os.environ["PATH"]))
    started = time.time()
    proc = subprocess.run([str(BIN / "ansible-playbook"), "playbooks/upgrade_wave.yml", "-i", str(inventory),
                           "-e", "@%s" % (work / "cycle.yml"), "-e", "gpufleet_target_version=%s" % target],
                          cwd=ROOT, env=env, capture_output=True, text=True, check=False, timeout=3000)
    print("upgrade_wave.yml to %s: rc=%d in %.0f s" % (target, proc.returncode, time.time() - started))
    (work / ("wave-%s.log" % target)).write_text(proc.stdout + proc.stderr)
    assert proc.returncode == 0, "the hop to %s failed:\n%s" % (target, proc.stdout[-6000:])
    records = sorted((work / ("records-%s" % target)).glob("*-upgrade_wave.yml.json"))
    assert records, "no change record for the hop to %s" % target
    return proc, json.loads(records[-1].read_text()), records[-1].with_suffix(".md").read_text()


def nodes(cfg):
    api = client.CoreV1Api(config.new_client_from_config(str(cfg.inventory / "kubeconfig")))
    return {n.metadata.name: n for n in api.list_node().items}


def addons(cfg):
    """kube-proxy's and CoreDNS's images: what kubeadm's addon phase moves once the control plane is through."""
    apps = client.AppsV1Api(config.new_client_from_config(str(cfg.inventory / "kubeconfig")))
    return {"kube-proxy": apps.read_namespaced_daemon_set("kube-proxy", "kube-system"),
            "coredns": apps.read_namespaced_deployment("coredns", "kube-system")}


def images(cfg):
    return {name: obj.spec.template.spec.containers[0].image for name, obj in addons(cfg).items()}


def kubeadms(cfg, version):
    pins = lab_kubeadm.kubeadm_images(cfg, version)
    return {"kube-proxy": pins["kube-proxy"], "coredns": pins["coredns"]}


def test_the_training_pool_waits_out_a_hop_and_then_jumps_two_minors_in_one_drain(cycle):
    cfg, inventory, work = cycle
    first, end = cfg.to_version, cfg.later_versions[0]

    before = images(cfg)
    proc, record, _ = run(cfg, inventory, work, first)
    assert set(apiservers().values()) == {first}
    assert images(cfg) == kubeadms(cfg, first) != before  # kubeadm's addon phase, once every apiserver moved
    now = nodes(cfg)
    kubelets = {name: n.status.node_info.kubelet_version for name, n in now.items()}
    assert kubelets == {"cp-1": first, "gpu-b1": first, "gpu-a1": cfg.from_version}
    train = now["gpu-a1"]
    assert not train.spec.unschedulable and ANN + "cycle-drains" not in (train.metadata.annotations or {})
    assert "Pool(s) h100-train stay at their kubelet" in proc.stdout
    assert record["disruptions"]["nodes"] == {"cp-1": [first], "gpu-a1": [], "gpu-b1": [first]}

    proc, record, markdown = run(cfg, inventory, work, end)
    assert set(apiservers().values()) == {end}
    assert images(cfg) == kubeadms(cfg, end)
    now = nodes(cfg)
    assert {name: n.status.node_info.kubelet_version for name, n in now.items()} == {
        "cp-1": end, "gpu-a1": end, "gpu-b1": end}
    assert not any(n.spec.unschedulable for n in now.values())
    # One drain per training node over the cycle; the pool that follows the control plane, one per hop
    assert record["disruptions"] == {"cycle": end, "nodes": {"cp-1": [first, end], "gpu-a1": [end],
                                                             "gpu-b1": [first, end]}}
    assert "- gpu-a1: 1 (%s)" % end in markdown and "- gpu-b1: 2 (%s, %s)" % (first, end) in markdown
    assert (now["gpu-a1"].metadata.annotations or {})[ANN + "cycle-drains"] == end
    assert "stay at their kubelet" not in proc.stdout
