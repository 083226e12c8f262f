"""The canary workloads against the lab: a JobSet gang (real child Jobs, placed by the real scheduler on a cordoned
KWOK node it tolerates) and an inference Deployment with its latency probe, judged against the lab pool's
baseline. The lab plays the containers (lab/gpufleet_lab/workloads.py): its host faults make each judgement fail.
Then the canary wave itself (canary.yml, after control_plane.yml): a failing canary workload holds the canary with
its reason and leaves no object behind, and the rerun passes. This moves the control plane (tests/conftest.py runs
this file after the tests that need the lab on `from`; the story starts from a reset)."""
from __future__ import annotations

import pytest
from kubernetes import client, config

from tests.lab.conftest import lab_cli
from tests.lab.test_security import latest_record, run

ANN = "gpufleet.io/upgrade-"
pytestmark = pytest.mark.lab
NS = "gpufleet-canary"


@pytest.fixture(scope="module")
def apis(lab, tmp_path_factory):
    api = config.new_client_from_config(str(lab.kubeconfig))
    return {"core": client.CoreV1Api(api), "batch": client.BatchV1Api(api), "apps": client.AppsV1Api(api),
            "custom": client.CustomObjectsApi(api), "records": tmp_path_factory.mktemp("canary-records")}


@pytest.fixture(scope="module")
def node(lab, apis):
    """A GPU node with every GPU free (the lab's training gang holds two of them), cordoned as a canary is."""
    core = apis["core"]
    busy = {p.spec.node_name for p in core.list_pod_for_all_namespaces().items
            if p.spec.node_name and p.status.phase in ("Pending", "Running")
            and any((c.resources.requests or {}).get("nvidia.com/gpu") for c in p.spec.containers)}
    free = [h for h in lab.gpu_hosts if h not in busy]
    assert free, "every lab GPU node runs GPU work: %s" % sorted(busy)
    host = free[-1]
    core.patch_node(host, {"spec": {"unschedulable": True}})
    yield host
    lab_cli("clear", host)
    core.patch_node(host, {"spec": {"unschedulable": None}})


def canary(lab, apis, host):
    proc = run(lab, apis["records"], "tests/lab/playbooks/canary_check.yml", "-e", '{"canary_nodes": ["%s"]}' % host)
    return proc, latest_record(apis["records"])


def test_canaries_run_work_on_the_cordoned_node_and_clean_up(lab, apis, node):
    proc, record = canary(lab, apis, node)
    assert proc.returncode == 0, proc.stdout[-4000:]
    runs = {r["workload"]: r for r in record["canary_workloads"]}
    assert runs["training"]["passed"] and runs["inference"]["passed"]
    assert set(runs["training"]["busbw"]) == {"1G", "8G"}
    assert all(v >= 450 * 0.9 for v in runs["training"]["busbw"].values())
    assert runs["inference"]["latency"]["p99_ms"] <= 250 and runs["inference"]["latency"]["errors"] == 0
    gates = {g["check"] for g in record["gates"] if g["passed"]}
    assert {"canary_training_busbw", "canary_training_placement", "canary_inference_ready",
            "canary_inference_p99_ms"} <= gates
    # passed: nothing kept (the JobSet's child Jobs and pods go with it)
    assert not apis["custom"].list_namespaced_custom_object("jobset.x-k8s.io", "v1alpha2", NS, "jobsets")["items"]
    assert not apis["apps"].list_namespaced_deployment(NS).items
    assert "## Canary workloads" in next(iter(sorted(apis["records"].glob("*.md")))).read_text()


def test_a_slow_fabric_and_a_slow_service_fail_their_canary_and_leave_nothing(lab, apis, node):
    lab_cli("fault", node, "nccl-slow")
    lab_cli("fault", node, "inference-slow")
    proc, record = canary(lab, apis, node)
    assert proc.returncode != 0
    failed = {g["check"] for g in record["gates"] if not g["passed"] and g["severity"] == "fail"}
    assert {"canary_training_busbw", "canary_inference_p99_ms"} <= failed, failed
    assert "canary_training_placement" not in failed and "canary_inference_ready" not in failed
    runs = {r["workload"]: r for r in record["canary_workloads"]}
    assert not runs["training"]["passed"] and not runs["inference"]["passed"]
    assert runs["training"]["busbw"]["8G"] < 470 * 0.9 and runs["inference"]["latency"]["p99_ms"] > 250
    assert "FAILED" in proc.stdout
    assert not apis["batch"].list_namespaced_job(NS).items and not apis["apps"].list_namespaced_deployment(NS).items

    lab_cli("clear", node)
    proc, record = canary(lab, apis, node)
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert all(r["passed"] for r in record["canary_workloads"])


def test_a_failing_canary_workload_holds_the_canary_wave_and_the_rerun_passes(lab, apis, node):
    """Through node_pool.yml (canary.yml): the canary gpu-a1 is drained, upgraded and gated; its inference canary
    fails (inference-slow): gpu-a1 stays cordoned with the canary's reason, nothing of the workloads is left, the
    rerun drains nothing new, runs both workloads and puts gpu-a1 back in service."""
    records = apis["records"]
    proc = run(lab, records, "playbooks/control_plane.yml")
    assert proc.returncode == 0, proc.stdout[-4000:]
    lab_cli("fault", "gpu-a1", "inference-slow")
    try:
        proc = run(lab, records, "playbooks/canary.yml")
    finally:
        lab_cli("clear", "gpu-a1")
    assert proc.returncode != 0
    a1 = apis["core"].read_node("gpu-a1")
    reason = (a1.metadata.annotations or {}).get(ANN + "reason", "")
    assert a1.spec.unschedulable and (a1.metadata.annotations or {}).get(ANN + "phase") == "failed", reason
    assert "canary workloads on gpu-a1" in reason and "canary_inference_p99_ms" in reason, reason
    runs = {r["workload"]: r["passed"] for r in latest_record(records)["canary_workloads"]}
    assert runs == {"training": True, "inference": False}
    assert not apis["batch"].list_namespaced_job(NS).items and not apis["apps"].list_namespaced_deployment(NS).items

    proc = run(lab, records, "playbooks/canary.yml")
    assert proc.returncode == 0, proc.stdout[-4000:]
    a1 = apis["core"].read_node("gpu-a1")
    assert not a1.spec.unschedulable and (a1.metadata.annotations or {}).get(ANN + "phase") == "done"
    assert [(r["workload"], r["passed"]) for r in latest_record(records)["canary_workloads"]] == [
        ("training", True), ("inference", True)]
