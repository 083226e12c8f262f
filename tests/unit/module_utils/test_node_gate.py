from __future__ import annotations

import json

import pytest

from ansible_collections.gpufleet.upgrade.plugins.module_utils.errors import InputError, ParseError
from ansible_collections.gpufleet.upgrade.plugins.module_utils.node_gate import (config_changes, judge_node,
                                                                                kubelet_config, node_facts)
from tests.conftest import fixture_text, pool_baseline

POLICY = pool_baseline()  # kubelet_config: topologyManagerPolicy, cpuManagerPolicy, memoryManagerPolicy
NO_CONFIG = pool_baseline(node={"kubelet_config": {}})


def node(name):
    return json.loads(fixture_text("k8s", name))


def test_ready_node_passes():
    summary = judge_node(node("node-gpu-a1-ready.json"), fixture_text("k8s", "configz-gpu-a1.json"), "v1.34.2", POLICY)
    assert summary["passed"], summary["failures"]
    assert summary["node"]["allocatable_gpus"] == 8 and summary["node"]["labels"]["gpufleet.io/rack-set"] == "rs-a"


def test_degraded_node_names_every_failure():
    configz = json.loads(fixture_text("k8s", "configz-gpu-a1.json"))
    configz["kubeletconfig"]["topologyManagerPolicy"] = "none"
    summary = judge_node(node("node-gpu-a1-degraded.json"), configz, "v1.34.2", POLICY, require_schedulable=True)
    assert summary["failures"] == [
        "gpu-a1: check node_ready: measured False, baseline True",
        "gpu-a1: check kubelet_version: measured v1.33.5, baseline v1.34.2",
        "gpu-a1: check allocatable_gpus: measured 7, baseline 8 (nvidia.com/gpu allocatable (a node Ready with fewer "
        "GPUs than expected is worse than a failed node))",
        "gpu-a1 topologyManagerPolicy: check kubelet_config: measured none, baseline single-numa-node",
        "gpu-a1: check schedulable: measured False, baseline True",
    ]


def test_config_keys_need_configz():
    with pytest.raises(InputError, match="no configz was given"):
        judge_node(node("node-gpu-a1-ready.json"), None, None, POLICY)


def test_bad_inputs():
    with pytest.raises(InputError, match="expected a Kubernetes Node"):
        node_facts({"kind": "Pod"})
    with pytest.raises(ParseError, match="'kubeletconfig'"):
        judge_node(node("node-gpu-a1-ready.json"), {"kubelet": {}}, None, POLICY)
    broken = node("node-gpu-a1-ready.json")
    broken["status"]["allocatable"]["nvidia.com/gpu"] = "eight"
    with pytest.raises(ParseError, match="not an integer"):
        node_facts(broken)


def test_missing_ready_condition_is_not_ready():
    n = node("node-gpu-a1-ready.json")
    n["status"]["conditions"] = []
    assert judge_node(n, None, None, NO_CONFIG)["failures"] == [
        "gpu-a1: check node_ready: measured unknown, baseline True"]


def test_allocatable_is_always_judged_against_the_gpu_count():
    # a baseline without a node section still checks allocatable nvidia.com/gpu = gpu.count
    n = node("node-gpu-a1-ready.json")
    n["status"]["allocatable"].pop("nvidia.com/gpu")
    failures = judge_node(n, None, None, NO_CONFIG)["failures"]
    assert failures[0].startswith("gpu-a1: check allocatable_gpus: measured not reported, baseline 8")
    four = pool_baseline(node={"kubelet_config": {}}, gpu={"count": 4})
    assert judge_node(node("node-gpu-a1-ready.json"), None, None, four)["failures"][0].startswith(
        "gpu-a1: check allocatable_gpus: measured 8, baseline 4")


def test_no_node_object_is_a_clear_error():
    with pytest.raises(InputError, match="does the Node exist"):
        judge_node({}, None, None, NO_CONFIG)


# What a kubelet of 1.36.3 serves at /configz for the lab pool's config file (kubeadm's kubelet-config phase with
# the pool's patch): tests/fixtures/k8s/README.md says how it was made.
REAL = "kubelet-code-1.36.3-configz-h100-train.json"
EXAMPLE = {"topologyManagerPolicy": "single-numa-node", "cpuManagerPolicy": "static", "memoryManagerPolicy": "Static"}


def test_the_example_baseline_passes_on_what_the_kubelet_serves():
    policy = pool_baseline(node={"kubelet_config": EXAMPLE})
    summary = judge_node(node("node-gpu-a1-ready.json"), fixture_text("k8s", REAL), "v1.34.2", policy)
    assert summary["passed"], summary["failures"]
    assert [c["subject"] for c in summary["checks"] if c["name"] == "kubelet_config"] == [
        "gpu-a1 cpuManagerPolicy", "gpu-a1 memoryManagerPolicy", "gpu-a1 topologyManagerPolicy"]


def test_a_key_the_kubelet_does_not_report_fails_the_gate():
    configz = json.loads(fixture_text("k8s", REAL))
    del configz["kubeletconfig"]["memoryManagerPolicy"]
    summary = judge_node(node("node-gpu-a1-ready.json"), configz, None,
                         pool_baseline(node={"kubelet_config": EXAMPLE}))
    assert summary["failures"] == [
        "gpu-a1 memoryManagerPolicy: check kubelet_config: measured not in its configz, baseline Static"]


@pytest.mark.parametrize("answer, words", [
    ("<html><body>502 Bad Gateway</body></html>", "kubelet configz of gpu-a1: output is not JSON; it starts with "
                                                  "'<html><body>502 Bad Gateway</body></html>'"),
    ("", "kubelet configz of gpu-a1: output is empty"),
    ('{"kubeproxyconfig": {"mode": "iptables"}}', "expected an object with a 'kubeletconfig' key .*got kubeproxy"),
    ('{"kubeletconfig": {"kind": "KubeProxyConfiguration"}}', "kubeletconfig is a KubeProxyConfiguration"),
    ("[]", "expected an object with a 'kubeletconfig' key .*got list"),
])
def test_an_answer_that_is_not_the_kubelet_s_configz_fails_naming_the_node(answer, words):
    with pytest.raises(ParseError, match=words):
        judge_node(node("node-gpu-a1-ready.json"), answer, None, pool_baseline(node={"kubelet_config": EXAMPLE}))
    with pytest.raises(ParseError, match="gpu-a1"):
        kubelet_config(answer, "gpu-a1")


def test_config_changes_name_every_setting_that_moved():
    before = json.loads(fixture_text("k8s", REAL))
    after = json.loads(fixture_text("k8s", REAL))
    assert config_changes(before, after, "gpu-a1") == {}
    after["kubeletconfig"]["cpuManagerPolicy"] = "none"
    del after["kubeletconfig"]["memoryManagerPolicy"]
    after["kubeletconfig"]["imageMaximumGCAge"] = "168h0m0s"
    assert config_changes(before, after, "gpu-a1") == {
        "cpuManagerPolicy": {"before": "static", "after": "none"},
        "imageMaximumGCAge": {"before": "0s", "after": "168h0m0s"},
        "memoryManagerPolicy": {"before": "Static", "after": None}}
    with pytest.raises(ParseError, match="gpu-a1"):
        config_changes(before, "<html>", "gpu-a1")
