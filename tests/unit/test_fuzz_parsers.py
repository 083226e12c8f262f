"""Bounded property/fuzz test of every parser and gate (the harness: tests/unit/property.py).

Each target gets real-format fixtures mutated the ways broken tools, truncated pipes and hostile files break them
(truncation, a line dropped or doubled, a value replaced by N/A, [N/A], inf, 1e309, nan, an empty string, garbage,
a huge or absurd number, deep nesting, YAML aliases), and random text; a failing tool output, mutated in any way
that keeps its evidence, never passes its gate.
"""
from __future__ import annotations

import json
from typing import Any, Dict

import pytest
from hypothesis import strategies as st

from ansible_collections.gpufleet.upgrade.plugins.module_utils import (
    baseline, dcgm, etcd, gpu_health, kubeadm_plan, nccl, node_gate, removed_apis, versions)
from ansible_collections.gpufleet.upgrade.plugins.module_utils.cell import build
from ansible_collections.gpufleet.upgrade.plugins.module_utils.textparse import load_json
from tests.conftest import fixture_text, pool_baseline
from tests.unit.property import check_property, json_tree, mutations, structured

BASE = pool_baseline(nccl={"busbw_gbps": {"1G": 450.0, "8G": 470.0}, "tolerance_pct": 10, "min_runs": 1},
                     node={"kubelet_config": {}})
V136 = versions.parse_version("v1.36.3")
V138 = versions.parse_version("v1.38.0")  # the real capture's DRA beta is removed in 1.38


# Each target: (strategy, judge -> True when the gate passed, False when it failed; must_fail: the input's evidence
# makes it a failing output, so a PASS is a wrong verdict).
def _nccl(text):
    return nccl.judge_runs([nccl.parse_output(text)], BASE, "n")["passed"]


def _dcgm(text):
    return dcgm.judge_diag(dcgm.parse_diag(text), BASE, "n")["passed"]


def _gpus(text):
    remap = fixture_text("nvidia_smi", "remapped-rows-ok.csv")
    log = gpu_health.scan_kernel_log(fixture_text("nvidia_smi", "kern-clean.log"))
    return gpu_health.judge_health(gpu_health.parse_query_gpu(text), gpu_health.parse_remapped_rows(remap), log,
                                   BASE, "n")["passed"]


def _remaps(text):
    gpus = gpu_health.parse_query_gpu(fixture_text("nvidia_smi", "query-gpu-8-ok.csv"))
    log = gpu_health.scan_kernel_log(fixture_text("nvidia_smi", "kern-clean.log"))
    return gpu_health.judge_health(gpus, gpu_health.parse_remapped_rows(text), log, BASE, "n")["passed"]


def _kernel(text):
    gpus = gpu_health.parse_query_gpu(fixture_text("nvidia_smi", "query-gpu-8-ok.csv"))
    remap = gpu_health.parse_remapped_rows(fixture_text("nvidia_smi", "remapped-rows-ok.csv"))
    return gpu_health.judge_health(gpus, remap, gpu_health.scan_kernel_log(text), BASE, "n")["passed"]


def _node(text):
    return node_gate.judge_node(load_json(text, "Node"), None, "v1.34.2", dict(BASE, node={"allocatable_gpus": 8,
                                                                               "kubelet_config": {}}))["passed"]


def _etcd(text):
    return etcd.judge_endpoints(etcd.parse_endpoint_status(text))["passed"]


def _health(text):
    return etcd.judge_endpoint_health(etcd.parse_endpoint_health(text))["passed"]


def _snapshot(text):
    return etcd.judge_snapshot(etcd.parse_snapshot_status(text), {"min_revision": 1})["passed"]


def _kubeadm(text):
    kubeadm_plan.judge_plan(kubeadm_plan.parse_plan(text), "v1.36.3", required=True)  # raises unless offered
    return True


def _manifest(text):
    return not any(f["blocks_target"] for f in removed_apis.scan_manifest_text(text, V136, "fuzz.yaml"))


def _metrics(text):
    version = fixture_text("metrics", "real-1.35.4-version.json")
    return not any(f["blocks_target"] for f in removed_apis.scan_metrics(text, version, V138, "cp-1"))


def _helm(text):
    return not removed_apis.scan_helm_secrets([{"type": "helm.sh/release.v1", "data": {"release": text}}], V136)


def _baseline(text):
    baseline.load_text(text, "fuzz.yml")
    return True


def _version(text):
    versions.parse_release(text)
    return True


def _cell(text):
    hosts = json.loads(text)
    groups = {"kube_control_plane": ["cp-1"], "etcd": ["cp-1"], "gpu_nodes": sorted(h for h in hosts if h != "cp-1")}
    build(groups, hosts, {"gpufleet_cluster_name": "fuzz", "gpufleet_target_version": "v1.36.3",
                          "gpufleet_wave_caps": {"max_gpu_fraction": 1.0}},  # two domains of one node: a verdict
          {"h100-train": BASE})
    return True


CELL_HOST_VARS = ["gpufleet_pool", "gpufleet_failure_domain", "gpufleet_ring", "gpufleet_dr_pair", "gpufleet_canary",
                  "gpufleet_unschedulable_before", "gpufleet_observed_kubelet", "gpufleet_gpus",
                  "drain_break_glass_force"]


def _cell_hosts(var: str, value: Any) -> str:
    """The small cell's inventory with one host variable of gpu-a1 set to any JSON value."""
    hosts = json.loads(CELL_HOSTS)
    hosts["gpu-a1"][var] = value
    return json.dumps(hosts)


CELL_HOSTS = json.dumps({"cp-1": {}, "gpu-a1": {"gpufleet_pool": "h100-train", "gpufleet_failure_domain": "rs-a"},
                         "gpu-b1": {"gpufleet_pool": "h100-train", "gpufleet_failure_domain": "rs-b"}})

TARGETS: Dict[str, tuple] = {
    "nccl stdout (slow)": (mutations("nccl/synthetic-allreduce-8gpu-slow.txt"), _nccl, True),
    "nccl stdout (wrong, real)": (mutations("nccl/real-2.17.8-gh200-2node-wrong.txt"), _nccl, True),
    "nccl stdout (real)": (mutations("nccl/real-h100-8gpu-single-node.txt", "nccl/real-h100-16rank-2node.txt",
                                     "nccl/real-legacy-k80-4gpu.txt"), _nccl, False),
    "nccl stdout (tagged, real)": (mutations("nccl/real-2.18.0-mpirun-tag-output.txt",
                                             "nccl/real-srun-label-h100-16rank-2node.txt",
                                             "nccl/real-mpijob-launcher-2node-t4.txt"), _nccl, False),
    "nccl -J json": (st.one_of(mutations("nccl/synthetic-allreduce-8gpu.json"),
                               structured("nccl/synthetic-allreduce-8gpu.json")), _nccl, False),
    "dcgmi diag (fail)": (st.one_of(mutations("dcgm/synthetic-4.2.3-r1-fail.json"),
                                    structured("dcgm/synthetic-4.2.3-r1-fail.json")), _dcgm, True),
    "dcgmi diag (real, GB10)": (st.one_of(mutations("dcgm/real-4.2.3-gb10-r1.json"),
                                          structured("dcgm/real-4.2.3-gb10-r1.json")), _dcgm, True),
    "dcgmi diag (pass)": (st.one_of(mutations("dcgm/synthetic-4.2.3-r1-pass.json", "dcgm/synthetic-3.3.7-r2-fail.json"),
                                    structured("dcgm/synthetic-4.2.3-r1-pass.json")), _dcgm, False),
    "nvidia-smi --query-gpu (7 of 8)": (mutations("nvidia_smi/query-gpu-7-of-8.csv"), _gpus, True),
    "nvidia-smi --query-gpu (ok)": (mutations("nvidia_smi/query-gpu-8-ok.csv"), _gpus, False),
    "nvidia-smi --query-remapped-rows (pending)": (mutations("nvidia_smi/remapped-rows-pending.csv"), _remaps, True),
    "nvidia-smi -q (real) where the CSV goes": (mutations("nvidia_smi/smi-q-remapped-rows-pending.txt"), _remaps,
                                                "Pending                           : Yes"),
    "journalctl -k (XID 79, real)": (mutations("nvidia_smi/kern-real-xid79-dmesg.log"), _kernel, "Xid"),
    "journalctl -k (off the bus, no Xid, real)": (mutations("nvidia_smi/kern-real-fallen-off-bus-no-xid-dmesg.log"),
                                                  _kernel, "fallen off the bus"),
    "journalctl -k (NVLink Fatal, real)": (mutations("nvidia_smi/kern-real-nvlink5-fatal.log"), _kernel, "Fatal"),
    "Node object": (st.one_of(mutations("k8s/node-gpu-a1-ready.json"), structured("k8s/node-gpu-a1-degraded.json")),
                    _node, False),
    "etcdctl endpoint status": (st.one_of(mutations("etcd/real-3.6.16-endpoint-status-3.json"),
                                          structured("etcd/real-3.6.16-endpoint-status-alarm.json")), _etcd, False),
    "etcdctl endpoint health (member down)": (st.one_of(
        mutations("etcd/real-3.6.16-endpoint-health-member-down.json"),
        structured("etcd/real-3.6.16-endpoint-health-member-down.json")), _health, '"health":false'),
    "etcd snapshot status": (st.one_of(mutations("etcd/real-3.6.16-etcdutl-snapshot-status.json"),
                                       structured("etcd/real-3.6.16-etcdutl-snapshot-status.json")), _snapshot, False),
    "kubeadm upgrade plan": (st.one_of(mutations("kubeadm/real-1.36.3-plan.txt",
                                                 "kubeadm/upstream-1.36.3-plan_test-structured.yaml",
                                                 "kubeadm/upstream-grouped-plan_test-multiple-kubelets.txt"),
                                       structured("kubeadm/real-1.36.3-plan.json")), _kubeadm, False),
    "manifests": (mutations("manifests/broken.yaml", "baselines/h100-train.yml"), _manifest, False),
    "apiserver /metrics": (mutations("metrics/real-1.35.4-deprecated-excerpt.prom"), _metrics,
                           'resource="resourceclaims",subresource="",version="v1beta1"} 1'),
    "helm release secret": (st.one_of(st.text(max_size=200), st.binary(max_size=200).map(lambda b: b.hex())),
                            _helm, False),
    "baseline YAML": (mutations("baselines/h100-train.yml"), _baseline, False),
    "versions": (st.one_of(st.text(max_size=40), st.from_regex(r"v?[0-9]{1,14}\.[0-9]{1,14}(\.[0-9]{1,14})?",
                                                               fullmatch=True)), _version, False),
    "cell inventory": (st.builds(_cell_hosts, st.sampled_from(CELL_HOST_VARS), json_tree()), _cell, False),
}


@pytest.mark.parametrize("name", sorted(TARGETS))
def test_parsers_never_hang_crash_or_pass_a_failing_output(name):
    strategy, judge, must_fail = TARGETS[name]
    check_property(name, strategy, judge, must_fail)
