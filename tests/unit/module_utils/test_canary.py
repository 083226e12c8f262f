"""Canary workloads: the inputs, the objects they create, reading and judging their results, and the run loop
against a fake cluster (the lab test runs them against the lab's real apiserver, job controller and scheduler)."""
from __future__ import annotations

import copy
import json

import pytest

from ansible_collections.gpufleet.upgrade.plugins.module_utils import canary
from ansible_collections.gpufleet.upgrade.plugins.module_utils.errors import BaselineError, InputError
from tests.conftest import fixture_text, pool_baseline

WORKLOADS = {
    "training": {"image": "registry.example/nccl-tests:2.17", "command": ["/bin/run"],
                 "pod_annotations": {"team": "sre"}},
    "inference": {"image": "registry.example/serve:1", "port": 8000,
                  "probe": {"image": "registry.example/probe:1"}},
}
CANARY = {"training_busbw_gbps": {"1G": 450.0, "8G": 470.0}, "inference_p99_ms": 250}


def baseline(**canary_fields):
    return pool_baseline(canary=dict(CANARY, **canary_fields))


def from_header(name):
    lines = fixture_text("nccl", name).splitlines()
    start = next(i for i, line in enumerate(lines) if "size" in line and "count" in line and "type" in line)
    return "\n".join(lines[start:]) + "\n"


def pod(name, node, exit_code=0, message="", index=None, ready=False, phase=None):
    labels = {canary.GANG_LABEL: "g"}
    if index is not None:
        labels[canary.JOB_INDEX] = str(index)
    status = {"phase": phase or ("Succeeded" if exit_code == 0 else "Failed"), "conditions": [
        {"type": "Ready", "status": "True" if ready else "False"}]}
    if exit_code is not None:
        status["containerStatuses"] = [{"name": "c", "state": {"terminated": {
            "exitCode": exit_code, "reason": "Completed" if exit_code == 0 else "Error", "message": message}}}]
    return {"metadata": {"name": name, "labels": labels}, "spec": {"nodeName": node}, "status": status}


# -- inputs -----------------------------------------------------------------------------------------------------------
def test_inputs_fill_defaults_and_unset_means_none():
    assert canary.parse_inputs(None) == {}
    out = canary.parse_inputs(WORKLOADS)
    assert out["namespace"] == "gpufleet-canary" and out["timeout"] == 900
    assert out["inference"]["readiness_path"] == "/healthz" and out["inference"]["requests"] == 200
    assert out["inference"]["probe"]["command"] == [] and out["training"]["gpus_per_node"] is None


@pytest.mark.parametrize("value, words", [
    ({"training": {"command": ["x"]}}, "image"),
    ({"training": {"image": "i", "imagez": 1}}, "imagez"),
    ({"inference": {"image": "i", "probe": {"image": "p"}}}, "port"),
    ({"inference": {"image": "i", "port": 70000, "probe": {"image": "p"}}}, "inference.port"),
    ({"inference": {"image": "i", "port": 80, "path": "x", "probe": {"image": "p"}}}, "inference.path"),
    ({"training": {"image": "i", "gpus_per_node": 0}}, "gpus_per_node"),
    ({"namespace": "Bad_NS", "training": {"image": "i"}}, "namespace"),
    ({"timeout": 5, "training": {"image": "i"}}, "timeout"),
    ({"namespace": "x"}, "neither training nor inference"),
    (["training"], "expected a mapping"),
])
def test_bad_inputs_name_the_field(value, words):
    with pytest.raises(InputError) as err:
        canary.parse_inputs(value)
    assert words in err.value.msg and canary.VAR in err.value.msg


def test_baseline_gaps_name_pool_and_field():
    pools = {"a": {"baseline": pool_baseline()}, "b": {"baseline": baseline()}}
    gaps = canary.baseline_gaps(canary.parse_inputs(WORKLOADS), pools)
    assert len(gaps) == 2 and all(g.startswith("pool a:") for g in gaps)
    assert any("canary.training_busbw_gbps" in g for g in gaps) and any("canary.inference_p99_ms" in g for g in gaps)
    assert canary.baseline_gaps(canary.parse_inputs({"training": WORKLOADS["training"]}),
                                {"b": {"baseline": baseline()}}) == []


def test_baseline_canary_section_is_checked():
    with pytest.raises(BaselineError) as err:
        pool_baseline(canary={"training_busbw_gbps": {"1Q": 1.0}})
    assert "canary.training_busbw_gbps" in err.value.msg
    with pytest.raises(BaselineError):
        pool_baseline(canary={"inference_p99_ms": 0})
    assert pool_baseline()["canary"] == {"training_tolerance_pct": 10.0, "inference_max_error_pct": 0.0}


def test_plan_refuses_before_anything_and_keeps_pending_nodes():
    pools = {"p": {"baseline": baseline()}, "bare": {"baseline": pool_baseline()}}
    runs = [{"workload": "training", "pool": "p", "nodes": ["n1", "n2"]}]
    plan = canary.plan_runs(runs, pools, WORKLOADS, pending=["n2"])
    assert plan["runs"][0]["nodes"] == ["n2"]
    assert canary.plan_runs(runs, pools, WORKLOADS, pending=["zz"])["runs"] == []
    for bad, words in (([dict(runs[0], pool="zz")], "no baseline"), ([dict(runs[0], pool="bare")], "canary."),
                       ([dict(runs[0], nodes=["n1", "n1"])], "each canary node once"), ([], "empty")):
        with pytest.raises(InputError) as err:
            canary.plan_runs(bad, pools, WORKLOADS)
        assert words in err.value.msg
    with pytest.raises(InputError) as err:
        canary.plan_runs(runs, pools, {"inference": WORKLOADS["inference"]})
    assert "workloads.training: not configured" in err.value.msg


def test_canary_runs_per_workload_and_pool():
    runs = canary.canary_runs(canary.parse_inputs(WORKLOADS), ["a1", "b1", "a2"], {"a1": "pa", "a2": "pa", "b1": "pb"})
    assert runs == [{"workload": "training", "pool": "pa", "nodes": ["a1", "a2"]},
                    {"workload": "training", "pool": "pb", "nodes": ["b1"]},
                    {"workload": "inference", "pool": "pa", "nodes": ["a1", "a2"]},
                    {"workload": "inference", "pool": "pb", "nodes": ["b1"]}]
    assert canary.canary_runs({}, ["a1"], {"a1": "pa"}) == []


# -- the objects -------------------------------------------------------------------------------------------------------
def test_jobset_one_rank_per_node_pinned_tolerating_cordon():
    spec = canary.parse_inputs(WORKLOADS)["training"]
    js = canary.training_jobset("gang", "ns", ["n1", "n2"], spec, 8, ["-b", "1G"], "run-1")
    rj = js["spec"]["replicatedJobs"][0]
    assert rj["replicas"] == 2 and rj["template"]["spec"]["backoffLimit"] == 0
    assert js["spec"]["failurePolicy"] == {"maxRestarts": 0}
    pod_spec = rj["template"]["spec"]["template"]["spec"]
    terms = pod_spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert terms["nodeSelectorTerms"][0]["matchFields"][0]["values"] == ["n1", "n2"]
    assert canary.UNSCHEDULABLE in pod_spec["tolerations"]
    c = pod_spec["containers"][0]
    assert c["resources"]["limits"] == {"nvidia.com/gpu": "8"} and c["command"] == ["/bin/run"]
    env = {e["name"]: e["value"] for e in c["env"]}
    assert env["GPUFLEET_CANARY_RANKS"] == "2" and env["GPUFLEET_NCCL_ARGS"] == "-b 1G"
    assert rj["template"]["spec"]["template"]["metadata"]["annotations"] == {"team": "sre"}


def test_inference_objects_and_probe():
    spec = canary.parse_inputs(WORKLOADS)["inference"]
    dep, svc = canary.inference_objects("serve", "ns", ["n1"], spec, "r")
    assert dep["spec"]["replicas"] == 1 and svc["spec"]["selector"] == dep["spec"]["selector"]["matchLabels"]
    probe = dep["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]
    assert probe["httpGet"] == {"path": "/healthz", "port": 8000}
    job = canary.probe_job("serve-probe", "ns", "serve", spec, "r")
    env = {e["name"]: e["value"] for e in job["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["GPUFLEET_CANARY_URL"] == "http://serve.ns.svc:8000/" and env["GPUFLEET_CANARY_REQUESTS"] == "200"


def test_object_names_fit():
    long = canary.object_name("train", "a-very-long-pool-name-for-the-h100-training-fleet")
    assert len(long) <= 40 and long != canary.object_name("train", "a-very-long-pool-name-for-the-h100-training-fleeu")
    assert canary.object_name("serve", "h100.train") == "gpufleet-canary-serve-h100-train"


# -- judging -----------------------------------------------------------------------------------------------------------
def test_training_passes_on_a_good_gang():
    pods = [pod("r0", "n1", message=from_header("allreduce-8gpu-run1.txt"), index=0), pod("r1", "n2", index=1)]
    out = canary.judge_training(pods, ["n1", "n2"], baseline(), "pool gang")
    assert out["passed"], out["failures"]
    assert out["busbw"] == {"1G": 477.76, "8G": 480.0}


@pytest.mark.parametrize("change, check", [
    (lambda p: p[0]["status"]["containerStatuses"][0]["state"]["terminated"].update(
        message=from_header("allreduce-8gpu-slow.txt")), "canary_training_busbw"),
    (lambda p: p[0]["status"]["containerStatuses"][0]["state"]["terminated"].update(
        message=from_header("allreduce-8gpu-wrong.txt")), "canary_training_wrong_elements"),
    (lambda p: p[0]["status"]["containerStatuses"][0]["state"]["terminated"].update(message=""),
     "canary_training_busbw"),
    (lambda p: p[0]["status"]["containerStatuses"][0]["state"]["terminated"].update(
        message=fixture_text("nccl", "allreduce-truncated.txt")), "canary_training_busbw"),
    (lambda p: p[1]["status"]["containerStatuses"][0]["state"]["terminated"].update(exitCode=1), "rank_exit"),
    (lambda p: p[1]["spec"].update(nodeName="n1"), "canary_training_placement"),
    (lambda p: p.pop(), "canary_training_placement"),
    (lambda p: p[0]["metadata"]["labels"].pop(canary.JOB_INDEX), "canary_training_busbw"),
])
def test_training_fails_closed(change, check):
    pods = [pod("r0", "n1", message=from_header("allreduce-8gpu-run1.txt"), index=0), pod("r1", "n2", index=1)]
    change(pods)
    out = canary.judge_training(pods, ["n1", "n2"], baseline(), "pool gang")
    assert not out["passed"]
    assert any(c["name"].endswith(check) and not c["passed"] for c in out["checks"]), out["failures"]


def test_training_tolerance_comes_from_the_canary_section():
    pods = [pod("r0", "n1", message=from_header("allreduce-8gpu-slow.txt"), index=0)]
    assert canary.judge_training(pods, ["n1"], baseline(training_tolerance_pct=30), "g")["passed"]


LATENCY = {"requests": 200, "errors": 0, "p50_ms": 40.0, "p99_ms": 120.0}


def probe(result, exit_code=0):
    return pod("probe", "cp-1", exit_code=exit_code, message=json.dumps(result) if not isinstance(result, str)
               else result)


def test_inference_passes_and_reports_latency():
    out = canary.judge_inference(1, 1, ["n1"], ["n1"], probe(LATENCY), baseline(), "svc")
    assert out["passed"], out["failures"]
    assert out["latency"]["p99_ms"] == 120.0


@pytest.mark.parametrize("args, check", [
    ((0, 1, [], ["n1"], None), "canary_inference_ready"),
    ((1, 1, ["n2"], ["n1"], probe(LATENCY)), "canary_inference_placement"),
    ((1, 1, ["n1"], ["n1"], probe(dict(LATENCY, p99_ms=700.0))), "canary_inference_p99_ms"),
    ((1, 1, ["n1"], ["n1"], probe(dict(LATENCY, errors=3))), "canary_inference_errors_pct"),
    ((1, 1, ["n1"], ["n1"], probe(LATENCY, exit_code=2)), "canary_inference_probe"),
    ((1, 1, ["n1"], ["n1"], probe("p99=3ms")), "canary_inference_probe"),
    ((1, 1, ["n1"], ["n1"], pod("probe", "x", exit_code=None, phase="Running")), "canary_inference_probe"),
])
def test_inference_fails_closed(args, check):
    out = canary.judge_inference(*args, baseline=baseline(), subject="svc")
    assert not out["passed"]
    assert any(c["name"] == check and not c["passed"] for c in out["checks"]), out["checks"]


def test_inference_error_budget_from_baseline():
    out = canary.judge_inference(1, 1, ["n1"], ["n1"], probe(dict(LATENCY, errors=2)),
                                 baseline(inference_max_error_pct=1.0), "svc")
    assert out["passed"]


@pytest.mark.parametrize("text, words", [
    ("", "no result"), ("[1]", "not a JSON object"), ('{"requests": 1}', "lacks errors"),
    ('{"requests": 1, "errors": 0, "p50_ms": NaN, "p99_ms": 1}', "finite"),
    ('{"requests": 1.5, "errors": 0, "p50_ms": 1, "p99_ms": 1}', "whole"),
    ('{"requests": 0, "errors": 0, "p50_ms": 1, "p99_ms": 1}', "no request"),
    ('{"requests": 1, "errors": 2, "p50_ms": 1, "p99_ms": 1}', "2 errors of 1"),
    ('{"requests": true, "errors": 0, "p50_ms": 1, "p99_ms": 1}', "requests"),
])
def test_latency_parse_refuses(text, words):
    with pytest.raises(Exception) as err:
        canary.parse_latency(text)
    assert words in str(err.value.msg)


def test_waiting_reason_says_what_the_scheduler_said():
    pending = {"metadata": {"name": "r0"}, "status": {"phase": "Pending", "conditions": [
        {"type": "PodScheduled", "status": "False",
         "message": "0/6 nodes are available: 1 Insufficient nvidia.com/gpu"}]}}
    text = canary.waiting_reason([pending], 2)
    assert "1 of 2 pod(s) created" in text and "Insufficient nvidia.com/gpu" in text


# -- the run loop against a fake cluster ----------------------------------------------------------------------------
class FakeKube:
    """Objects by (kind, name); a JobSet completes at once with the given rank pods."""

    def __init__(self, rank_pods, finish=True):
        self.objects, self.rank_pods, self.finish, self.calls = {}, rank_pods, finish, []

    def ensure_namespace(self, name, labels):
        self.calls.append(("ns", name))

    def create_object(self, body):
        self.calls.append(("create", body["kind"], body["metadata"]["name"]))
        obj = copy.deepcopy(body)
        if body["kind"] == "JobSet" and self.finish:
            obj["status"] = {"conditions": [{"type": "Completed", "status": "True"}]}
        self.objects[(body["kind"], body["metadata"]["name"])] = obj
        return obj

    def get_object(self, api_version, kind, namespace, name):
        return self.objects.get((kind, name))

    def delete_object(self, api_version, kind, namespace, name):
        self.calls.append(("delete", kind, name))
        return self.objects.pop((kind, name), None) is not None

    def list_pods(self, namespace, selector):
        return self.rank_pods if selector.endswith("-train-p") and ("JobSet", selector.split("=")[1]) in self.objects \
            else []


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds


def test_run_training_passes_and_cleans_up():
    kube = FakeKube([pod("r0", "n1", message=from_header("allreduce-8gpu-run1.txt"), index=0)])
    plan = canary.plan_runs([{"workload": "training", "pool": "p", "nodes": ["n1"]}], {"p": {"baseline": baseline()}},
                            WORKLOADS)
    clock = Clock()
    out = canary.run_all(kube, plan, "run", clock=clock, sleep=clock.sleep)
    assert out["passed"] and out["canary"][0]["busbw"] and not out["canary"][0]["kept"]
    assert ("create", "JobSet", "gpufleet-canary-train-p") in kube.calls and not kube.objects


def test_run_training_times_out_and_keeps_the_objects():
    kube = FakeKube([], finish=False)
    plan = canary.plan_runs([{"workload": "training", "pool": "p", "nodes": ["n1"]}], {"p": {"baseline": baseline()}},
                            dict(WORKLOADS, timeout=60))
    clock = Clock()
    out = canary.run_all(kube, plan, "run", clock=clock, sleep=clock.sleep)
    assert out["passed"] is False and clock.now >= 60
    assert out["canary"][0]["kept"] == ["JobSet gpufleet-canary/gpufleet-canary-train-p"]
    assert "did not finish within 60 s" in out["canary"][0]["note"] and "0 of 1 pod(s) created" in out["msg"]


def test_check_mode_creates_nothing():
    kube = FakeKube([])
    plan = canary.plan_runs([{"workload": "inference", "pool": "p", "nodes": ["n1"]}], {"p": {"baseline": baseline()}},
                            WORKLOADS)
    out = canary.run_all(kube, plan, "run", check_mode=True)
    assert kube.calls == [] and out["passed"] is None and "would serve" in out["msg"]


def test_what_every_earlier_try_kept_goes_before_the_first_workload_starts():
    kube = FakeKube([pod("r0", "n1", message=from_header("allreduce-8gpu-run1.txt"), index=0)])
    kube.objects[("Deployment", "gpufleet-canary-serve-p")] = {"kept": True}  # holds a GPU the gang needs
    plan = canary.plan_runs([{"workload": "training", "pool": "p", "nodes": ["n1"]},
                             {"workload": "inference", "pool": "p", "nodes": ["n1"]}],
                            {"p": {"baseline": baseline()}}, WORKLOADS)
    clock = Clock()
    canary.run_all(kube, plan, "run", clock=clock, sleep=clock.sleep)
    order = [c for c in kube.calls if c[0] in ("create", "delete")]
    assert order.index(("delete", "Deployment", "gpufleet-canary-serve-p")) < order.index(
        ("create", "JobSet", "gpufleet-canary-train-p"))
