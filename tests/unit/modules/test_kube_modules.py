"""The Kubernetes action modules through AnsibleModule, with kube.connect patched to an in-memory cluster:
argument specs, check mode (nothing changes), changed reporting, and the failure message a user sees."""
from __future__ import annotations

import json

import pytest

from ansible_collections.gpufleet.upgrade.plugins.module_utils import kube
from tests.conftest import fixture_text
from ansible_collections.gpufleet.upgrade.plugins.modules import cluster_checks, gang, node_drain, node_state
from tests.unit.fakes.kube import FakeKube, node, pod


@pytest.fixture
def cluster(monkeypatch):
    api = FakeKube()
    api.nodes = {n: node(n) for n in ("gpu-a1", "gpu-a2")}
    monkeypatch.setattr(kube, "connect", lambda module: api)
    return api


def test_node_state_cordon_check_mode_then_real_then_idempotent(run, cluster):
    args = {"nodes": ["gpu-a1"], "state": "cordoned", "target": "v1.36.3"}
    check = run(node_state, args, check_mode=True)
    assert check.result["changed"] and check.result["changed_nodes"] == ["gpu-a1"] and not cluster.calls
    real = run(node_state, args)
    assert real.result["changed"] and real.result["nodes"][0]["unschedulable"]
    again = run(node_state, args)
    assert not again.result["changed"]


def test_node_state_read_returns_the_node_objects_only_when_asked(run, cluster):
    cluster.nodes["gpu-a2"]["status"]["nodeInfo"] = {"kubeletVersion": "v1.36.3"}
    plain = run(node_state, {"nodes": ["gpu-a2", "gpu-a1"], "target": "v1.36.3"})
    assert not plain.failed and "resources" not in plain.result
    read = run(node_state, {"nodes": ["gpu-a2", "gpu-a1"], "target": "v1.36.3", "objects": True})
    assert [n["metadata"]["name"] for n in read.result["resources"]] == ["gpu-a2", "gpu-a1"]
    assert read.result["resources"][0]["status"]["nodeInfo"]["kubeletVersion"] == "v1.36.3"
    assert not read.result["changed"] and not cluster.calls
    missing = run(node_state, {"nodes": ["gpu-zz"], "target": "v1.36.3", "objects": True})
    assert missing.failed and "gpu-zz" in missing.result["msg"]


def test_node_state_reads_each_kubelet_s_configz_only_when_asked(run, cluster):
    real = fixture_text("k8s", "kubelet-code-1.36.3-configz-h100-train.json")
    cluster.configz["gpu-a1"] = real
    read = run(node_state, {"nodes": ["gpu-a1"], "target": "v1.36.3", "configz": True})
    assert read.result["configz"]["gpu-a1"] == json.loads(real) and not cluster.calls
    assert "configz" not in run(node_state, {"nodes": ["gpu-a1"], "target": "v1.36.3"}).result
    cluster.configz["gpu-a1"] = "<html><body>502 Bad Gateway</body></html>"  # a proxy's page, not the kubelet's
    page = run(node_state, {"nodes": ["gpu-a1"], "target": "v1.36.3", "configz": True})
    assert page.failed and "kubelet configz of gpu-a1: output is not JSON" in page.result["msg"]
    del cluster.configz["gpu-a1"]
    gone = run(node_state, {"nodes": ["gpu-a1"], "target": "v1.36.3", "configz": True})
    assert gone.failed and "the kubelet of gpu-a1 did not answer /configz" in gone.result["msg"]


def test_node_state_failed_without_reason_is_refused(run, cluster):
    out = run(node_state, {"nodes": ["gpu-a1"], "state": "marked", "phase": "failed", "target": "v1.36.3"})
    assert out.failed and "needs a reason" in out.result["msg"] and not cluster.calls


def test_node_state_ends_a_failed_wave_then_guards_the_next(run, cluster):
    cluster.nodes["gpu-b1"] = node("gpu-b1")
    for name in ("gpu-a1", "gpu-a2"):
        run(node_state, {"nodes": [name], "state": "cordoned", "target": "v1.36.3"})
    held = run(node_state, {"nodes": ["gpu-a1", "gpu-a2"], "state": "held", "target": "v1.36.3",
                            "failures": {"gpu-a2": "Gate: gpu_health gate failed", "gpu-a1": ""},
                            "in_rescue": ["gpu-a1", "gpu-a2"]})
    assert held.result["changed"] and held.result["held"] == ["gpu-a1"] and held.result["failed_nodes"] == ["gpu-a2"]
    assert "gpu-a1 held (held: wave-mate gpu-a2 failed Gate: gpu_health gate failed)" in held.result["message"]
    guard = run(node_state, {"nodes": ["gpu-a1", "gpu-a2"], "state": "finished", "target": "v1.36.3"})
    assert guard.failed and "Later waves (and control-plane hosts) were not started" in guard.result["msg"]
    assert "gpu-a2 is failed (Gate: gpu_health gate failed)" in guard.result["msg"]
    # a node the run lost (still in a working phase) is recorded failed by the guard
    run(node_state, {"nodes": ["gpu-b1"], "state": "cordoned", "target": "v1.36.3"})
    lost = run(node_state, {"nodes": ["gpu-b1"], "state": "finished", "target": "v1.36.3"})
    assert lost.failed and lost.result["changed_nodes"] == ["gpu-b1"]
    assert cluster.nodes["gpu-b1"]["metadata"]["annotations"][kube.ANN_REASON].startswith("unreachable during drain")


def test_node_drain_reports_blockers(run, cluster):
    cluster.pods.append(pod("web-1", "gpu-a1", labels={"app": "web"}))
    cluster.add_pdb("web", "default", {"app": "web"}, allowed=0)
    out = run(node_drain, {"nodes": ["gpu-a1"], "timeout": 0, "retry_interval": 0})
    assert out.failed and out.result["error_type"] == "DrainBlocked"
    assert out.result["blockers"][0]["pod"] == "default/web-1"
    assert "PodDisruptionBudget default/web" in out.result["msg"]


def test_node_drain_check_mode(run, cluster):
    cluster.pods.append(pod("web-1", "gpu-a1"))
    out = run(node_drain, {"nodes": ["gpu-a1"]}, check_mode=True)
    assert out.result["would_evict"] == ["default/web-1"] and cluster.pods


def test_gang_stop_requires_a_run_id(run, cluster):
    out = run(gang, {"nodes": ["gpu-a1"], "state": "stopped"})
    assert out.failed and "run_id is required" in out.result["msg"]


def test_gang_stop_and_resume(run, cluster):
    cluster.add_gang("llm", ["gpu-a1", "gpu-a2"])
    cluster.answer_after = 1
    out = run(gang, {"nodes": ["gpu-a1"], "state": "stopped", "run_id": "r1", "poll_interval": 0})
    assert out.result["changed"] and out.result["stopped"] == ["training/llm"]
    assert out.result["checkpointed"][0]["gang"] == "training/llm"
    assert run(gang, {"state": "resumed", "run_id": "r1"}).result["resumed"] == ["workload training/jobset-llm"]


def test_gang_check_mode_stops_nothing(run, cluster):
    cluster.add_gang("llm", ["gpu-a1"])
    out = run(gang, {"nodes": ["gpu-a1"], "state": "stopped", "run_id": "r1"}, check_mode=True)
    assert out.result["changed"] and out.result["stopped"] == ["training/llm"]
    assert not [c for c in cluster.calls if c[0] == "patch_custom"]


def test_cluster_checks_blocks_on_a_dead_webhook(run):
    hook = {"kind": "MutatingWebhookConfiguration", "metadata": {"name": "inject"},
            "webhooks": [{"name": "inject.example.com", "failurePolicy": "Fail",
                          "clientConfig": {"service": {"namespace": "sys", "name": "injector"}}}]}
    out = run(cluster_checks, {"webhook_configurations": [hook]})
    assert out.failed and "preflight blocked" in out.result["msg"] and "sys/injector" in out.result["msg"]
    ok = run(cluster_checks, {"webhook_configurations": [hook], "blocking": []})
    assert not ok.failed and ok.result["findings"][0]["subject"].startswith("MutatingWebhookConfiguration inject")


def test_cluster_checks_reads_the_objects_itself_and_refuses_lists_beside_read(run, monkeypatch):
    hook = {"kind": "MutatingWebhookConfiguration", "metadata": {"name": "inject"},
            "webhooks": [{"name": "inject.example.com", "failurePolicy": "Fail",
                          "clientConfig": {"service": {"namespace": "sys", "name": "injector"}}}]}

    class Cluster:
        reads = 0

        def upgrade_blocker_objects(self):
            Cluster.reads += 1
            return {"webhook_configurations": [hook], "crds": [], "endpointslices": [], "pdbs": []}
    monkeypatch.setattr(kube, "connect", lambda module: Cluster())
    out = run(cluster_checks, {"read": True})
    assert out.failed and "sys/injector" in out.result["msg"] and Cluster.reads == 1
    both = run(cluster_checks, {"read": True, "pdbs": [{"metadata": {"name": "x"}}]})
    assert both.failed and "give none of them as options" in both.result["msg"] and "pdbs" in both.result["msg"]
    assert Cluster.reads == 1  # refused before reading
    given = run(cluster_checks, {"webhook_configurations": [hook], "blocking": []})
    assert not given.failed and Cluster.reads == 1  # without read, nothing is read


def test_cluster_checks_refuses_an_odd_object_it_read_naming_it_and_the_field(run, monkeypatch):
    """An object of the wrong shape read from the API (an old client's CRD) is a clear failure, not a pass."""
    class Cluster:
        def upgrade_blocker_objects(self):
            return {"webhook_configurations": [], "endpointslices": [], "pdbs": [],
                    "crds": [{"metadata": {"name": "old.example.com"}, "spec": {"versions": 5}}]}
    monkeypatch.setattr(kube, "connect", lambda module: Cluster())
    out = run(cluster_checks, {"read": True})
    assert out.failed and out.result["error_type"] == "InputError"
    assert "CustomResourceDefinition old.example.com: spec.versions: expected a list, got int 5" in out.result["msg"]


def test_addon_support_reads_the_workloads_itself_when_none_are_given(run, monkeypatch):
    from ansible_collections.gpufleet.upgrade.plugins.modules import addon_support

    class Cluster:
        calls = 0

        def workload_images(self):
            Cluster.calls += 1
            image = "registry.k8s.io/kueue/kueue:v0.12.1"
            return [{"kind": "Deployment", "metadata": {"namespace": "kueue-system", "name": "kueue"},
                     "spec": {"template": {"spec": {"containers": [{"image": image}]}}}}]
    monkeypatch.setattr(kube, "connect", lambda module: Cluster())
    out = run(addon_support, {"target_version": "v1.34.1"})
    assert out.failed and Cluster.calls == 1
    assert "Kueue 0.12 (Deployment kueue-system/kueue image registry.k8s.io/kueue/kueue:v0.12.1) supports Kubernetes " \
           "1.29-1.33, not the target 1.34" in out.result["msg"]
    given = run(addon_support, {"target_version": "v1.34.1", "workloads": []})
    assert given.result["passed"] and Cluster.calls == 1  # given workloads: the cluster is not read
