"""Canary workloads: the inputs, the objects they create, reading and judging their results, and the run loop
against a fake cluster (the lab test runs them against the lab's real apiserver, job controller and scheduler)."""
from __future__ import annotations

import copy
import json
import re

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
CANARY = {"training_busbw_gbps": {"1G": 450.0, "8G": 470.0}, "inference_p99_ms": 250, "training_nodes": 2}


def baseline(**canary_fields):
    return pool_baseline(canary=dict(CANARY, **canary_fields))


def gang(name, hosts=("n1", "n2"), ranks=True):
    """all_reduce_perf output of a gang over ``hosts`` (8 GPUs each) as rank 0 writes it: from "# Using devices"
    on, the fixture's rank lines repeated per host and renumbered, then its table and footer."""
    lines = fixture_text("nccl", name).splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("# Using devices"))
    rank_lines = [line for line in lines if re.match(r"^#\s+Rank\s", line)]
    body = [line for line in lines[start + 1:] if not re.match(r"^#\s+Rank\s", line)]
    head = ["#  Rank %2d Group  0 Pid  1000 on %10s device %2d [0000:18:00] NVIDIA H100 80GB HBM3" % (
        h * len(rank_lines) + i, host, i) for h, host in enumerate(hosts) for i in range(len(rank_lines))]
    return "\n".join([lines[start]] + (head if ranks else []) + body) + "\n"


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
    ({"training": {"image": "i", "env": {"TOKEN": {"valueFrom": {"secretKeyRef": {}}}}}}, "training.env.TOKEN"),
    ({"training": {"image": "i", "tolerations": [{"key": "k", "operater": "Exists"}]}}, "tolerations[0]"),
    ({"inference": {"image": "i", "port": 80, "probe": {"image": "p", "pod_annotations": {"a": None}}}},
     "inference.probe.pod_annotations.a"),
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
    assert pool_baseline()["canary"] == {"training_nodes": 2, "training_tolerance_pct": 10.0,
                                         "inference_max_error_pct": 0.0}


def test_plan_refuses_before_anything_and_keeps_pending_nodes():
    pools = {"p": {"baseline": baseline()}, "bare": {"baseline": pool_baseline()}}
    runs = [{"workload": "training", "pool": "p", "nodes": ["n1", "n2"]}]
    serve = [{"workload": "inference", "pool": "p", "nodes": ["n1", "n2"]}]
    # the gang always spans every canary node of the pool; the service runs on the nodes still to do
    assert canary.plan_runs(runs + serve, pools, WORKLOADS, pending=["n2"])["runs"][0]["nodes"] == ["n1", "n2"]
    assert canary.plan_runs(runs + serve, pools, WORKLOADS, pending=["n2"])["runs"][1]["nodes"] == ["n2"]
    assert canary.plan_runs(runs, pools, WORKLOADS, pending=["zz"])["runs"] == []
    with pytest.raises(InputError) as err:
        canary.plan_runs([dict(runs[0], nodes=["n1"])], pools, WORKLOADS)
    assert "a gang of 2 node(s), but the pool has 1 canary node(s)" in err.value.msg
    for bad, words in (([dict(runs[0], pool="zz")], "no baseline"), ([dict(runs[0], pool="bare")], "canary."),
                       ([dict(runs[0], nodes=["n1", "n1"])], "each canary node once"), ([], "empty")):
        with pytest.raises(InputError) as err:
            canary.plan_runs(bad, pools, WORKLOADS)
        assert words in err.value.msg
    with pytest.raises(InputError) as err:
        canary.plan_runs(runs, pools, {"inference": WORKLOADS["inference"]})
    assert "workloads.training: not configured" in err.value.msg


def test_canary_runs_per_workload_and_pool():
    hosts = {"a1": "pa", "a2": "pa", "b1": "pb"}
    runs = canary.canary_runs(canary.parse_inputs(WORKLOADS), ["a1", "b1", "a2"], hosts)
    assert runs == [{"workload": "training", "pool": "pa", "nodes": ["a1", "a2"]},
                    {"workload": "training", "pool": "pb", "nodes": ["b1"]},
                    {"workload": "inference", "pool": "pa", "nodes": ["a1", "a2"]},
                    {"workload": "inference", "pool": "pb", "nodes": ["b1"]}]
    assert canary.canary_runs({}, ["a1"], {"a1": "pa"}) == []
    pools = {"pa": {"baseline": baseline()}, "pb": {"baseline": baseline(training_nodes=1)}}
    assert len(canary.canary_runs(canary.parse_inputs(WORKLOADS), ["a1", "b1", "a2"], hosts, pools)) == 4
    with pytest.raises(InputError, match="pool pa: .* a gang of 2 node"):
        canary.canary_runs(canary.parse_inputs(WORKLOADS), ["a1", "b1"], hosts, pools)


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
    pods = [pod("r0", "n1", message=gang("synthetic-allreduce-8gpu-run1.txt"), index=0), pod("r1", "n2", index=1)]
    out = canary.judge_training(pods, ["n1", "n2"], 8, baseline(), "pool gang")
    assert out["passed"], out["failures"]
    assert out["busbw"] == {"1G": 477.76, "8G": 480.0}


@pytest.mark.parametrize("change, check", [
    (lambda p: p[0]["status"]["containerStatuses"][0]["state"]["terminated"].update(
        message=gang("synthetic-allreduce-8gpu-slow.txt")), "canary_training_busbw"),
    (lambda p: p[0]["status"]["containerStatuses"][0]["state"]["terminated"].update(
        message=gang("synthetic-allreduce-8gpu-wrong.txt")), "canary_training_wrong_elements"),
    (lambda p: p[0]["status"]["containerStatuses"][0]["state"]["terminated"].update(message=""),
     "canary_training_busbw"),
    (lambda p: p[0]["status"]["containerStatuses"][0]["state"]["terminated"].update(
        message=fixture_text("nccl", "synthetic-allreduce-truncated.txt")), "canary_training_busbw"),
    (lambda p: p[1]["status"]["containerStatuses"][0]["state"]["terminated"].update(exitCode=1), "rank_exit"),
    (lambda p: p[1]["spec"].update(nodeName="n1"), "canary_training_placement"),
    (lambda p: p.pop(), "canary_training_placement"),
    (lambda p: p[0]["metadata"]["labels"].pop(canary.JOB_INDEX), "canary_training_busbw"),
])
def test_training_fails_closed(change, check):
    pods = [pod("r0", "n1", message=gang("synthetic-allreduce-8gpu-run1.txt"), index=0), pod("r1", "n2", index=1)]
    change(pods)
    out = canary.judge_training(pods, ["n1", "n2"], 8, baseline(), "pool gang")
    assert not out["passed"]
    assert any(c["name"].endswith(check) and not c["passed"] for c in out["checks"]), out["failures"]


def test_training_tolerance_comes_from_the_canary_section():
    pods = [pod("r0", "n1", message=gang("synthetic-allreduce-8gpu-slow.txt", hosts=["n1"]), index=0)]
    assert canary.judge_training(pods, ["n1"], 8, baseline(training_tolerance_pct=30), "g")["passed"]


@pytest.mark.parametrize("message, measured", [
    (gang("synthetic-allreduce-8gpu-run1.txt", hosts=["n1"]), "8 ranks on 1 hosts"),      # one node's NVLink only
    (gang("synthetic-allreduce-8gpu-run1.txt", ranks=False), "0 ranks on 0 hosts"),       # the rank lines left out
])
def test_a_result_that_does_not_span_every_canary_node_fails(message, measured):
    pods = [pod("r0", "n1", message=message, index=0), pod("r1", "n2", index=1)]
    out = canary.judge_training(pods, ["n1", "n2"], 8, baseline(), "gang")
    span = next(c for c in out["checks"] if c["name"] == "canary_training_span")
    assert not out["passed"] and not span["passed"] and span["measured"] == measured


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


def test_a_probe_that_sent_fewer_requests_than_asked_fails():
    out = canary.judge_inference(1, 1, ["n1"], ["n1"], probe(dict(LATENCY, requests=1)), baseline(), "svc",
                                 requests=200)
    assert [c["name"] for c in out["checks"] if not c["passed"]] == ["canary_inference_requests"]


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
    """Objects by (kind, name). A created JobSet ends with ``jobset`` (its condition, '' = never) and has
    ``rank_pods``; a Deployment gets ``ready`` ready replicas on ``serving``; a probe Job completes with ``probe``."""

    def __init__(self, rank_pods=(), jobset="Completed", ready=None, probe=None, serving=("n1", "n2")):
        self.objects, self.calls, self.refuse = {}, [], ""
        self.rank_pods, self.jobset, self.ready = list(rank_pods), jobset, ready
        self.probe, self.serving = probe, serving

    def ensure_namespace(self, name, labels):
        self.calls.append(("ns", name))
        return False

    def create_object(self, body, dry_run=False):
        if self.refuse and body["kind"] == self.refuse:
            raise InputError("dry-run create %s: HTTP 404 the server could not find the requested resource" % (
                body["kind"]))
        if dry_run:
            self.calls.append(("dry-run", body["kind"], body["metadata"]["name"]))
            return body
        self.calls.append(("create", body["kind"], body["metadata"]["name"]))
        obj = copy.deepcopy(body)
        kind = body["kind"]
        if kind == "JobSet" and self.jobset:
            obj["status"] = {"conditions": [{"type": self.jobset, "status": "True"}]}
        if kind == "Deployment":
            obj["status"] = {"readyReplicas": len(self.serving) if self.ready is None else self.ready}
        if kind == "Job" and self.probe is not None:
            obj["status"] = {"conditions": [{"type": "Complete", "status": "True"}]}
        self.objects[(kind, body["metadata"]["name"])] = obj
        return obj

    def get_object(self, api_version, kind, namespace, name):
        return self.objects.get((kind, name))

    def delete_object(self, api_version, kind, namespace, name):
        self.calls.append(("delete", kind, name))
        return self.objects.pop((kind, name), None) is not None

    def list_pods(self, namespace, selector):
        name = selector.split("=")[1]
        if ("JobSet", name) in self.objects:
            return self.rank_pods
        if ("Deployment", name) in self.objects:
            count = len(self.serving) if self.ready is None else self.ready
            return [pod("s%d" % i, n, exit_code=None, ready=True, phase="Running")
                    for i, n in enumerate(self.serving[:count])]
        if ("Job", name) in self.objects and self.probe is not None:
            return [probe(self.probe)]
        return []


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds


RANKS = [pod("r0", "n1", message=gang("synthetic-allreduce-8gpu-run1.txt"), index=0), pod("r1", "n2", index=1)]
BOTH = [{"workload": "training", "pool": "p", "nodes": ["n1", "n2"]},
        {"workload": "inference", "pool": "p", "nodes": ["n1", "n2"]}]


def run_all(kube, runs=BOTH, **workloads):
    plan = canary.plan_runs(runs, {"p": {"baseline": baseline()}}, dict(WORKLOADS, **workloads))
    clock = Clock()
    return canary.run_all(kube, plan, "run", clock=clock, sleep=clock.sleep), clock


def test_both_workloads_pass_and_leave_nothing_behind():
    kube = FakeKube(RANKS, probe=LATENCY)
    out, _ = run_all(kube)
    assert out["passed"], out["failures"]
    assert out["canary"][0]["busbw"] == {"1G": 477.76, "8G": 480.0} and out["canary"][1]["latency"] == LATENCY
    assert ("create", "JobSet", "gpufleet-canary-train-p") in kube.calls and not kube.objects


@pytest.mark.parametrize("fake, check", [
    (dict(jobset=""), "canary_training_finished"),                   # never finishes: timed out
    (dict(jobset="Failed"), "canary_training_finished"),             # the JobSet failed
    (dict(ready=1), "canary_inference_ready"),                       # one replica never ready
    (dict(probe=None), "canary_inference_finished"),                 # the probe never finishes
    (dict(probe=dict(LATENCY, p99_ms=900.0)), "canary_inference_p99_ms"),
])
def test_a_workload_that_fails_or_never_finishes_fails_and_is_deleted_all_the_same(fake, check):
    kube = FakeKube(RANKS, **dict(dict(probe=LATENCY), **fake))
    out, _ = run_all(kube, timeout=60)
    assert out["passed"] is False
    assert any(c["name"] == check and not c["passed"] for c in out["checks"]), out["checks"]
    assert not kube.objects  # nothing kept to be drained, or to come back onto the canaries


def test_a_timeout_says_what_the_pods_waited_for():
    out, clock = run_all(FakeKube([], jobset=""), runs=BOTH[:1], timeout=60)
    assert clock.now >= 60 and "did not finish within 60 s" in out["canary"][0]["note"]
    assert "0 of 2 pod(s) created" in out["msg"]


def test_check_mode_creates_nothing():
    kube = FakeKube([])
    plan = canary.plan_runs(BOTH, {"p": {"baseline": baseline()}}, WORKLOADS)
    out = canary.run_all(kube, plan, "run", check_mode=True)
    assert kube.calls == [] and out["passed"] is None and "would serve" in out["msg"]


def test_what_an_earlier_try_left_goes_before_the_first_workload_starts():
    kube = FakeKube(RANKS, probe=LATENCY)
    kube.objects[("Deployment", "gpufleet-canary-serve-p")] = {"left": True}  # holds a GPU the gang needs
    run_all(kube)
    order = [c for c in kube.calls if c[0] in ("create", "delete")]
    assert order.index(("delete", "Deployment", "gpufleet-canary-serve-p")) < order.index(
        ("create", "JobSet", "gpufleet-canary-train-p"))


def test_prepare_removes_what_a_cut_short_try_left_and_dry_runs_every_object():
    kube = FakeKube([])
    kube.objects[("JobSet", "gpufleet-canary-train-p")] = {"left": True}
    plan = canary.plan_runs(BOTH, {"p": {"baseline": baseline()}}, WORKLOADS)
    clock = Clock()
    out = canary.prepare(kube, plan, "run", clock=clock, sleep=clock.sleep)
    assert out["changed"] and out["removed"] == ["JobSet gpufleet-canary/gpufleet-canary-train-p"] and not kube.objects
    assert [c[1] for c in kube.calls if c[0] == "dry-run"] == ["JobSet", "Deployment", "Service", "Job"]
    assert not [c for c in kube.calls if c[0] == "create"]
    again = canary.prepare(kube, plan, "run", clock=clock, sleep=clock.sleep)
    assert not again["changed"] and again["removed"] == []


def test_prepare_refuses_a_workload_the_apiserver_would_refuse_before_the_drain():
    kube = FakeKube([])
    kube.refuse = "JobSet"  # the JobSet CRD is not installed
    plan = canary.plan_runs(BOTH, {"p": {"baseline": baseline()}}, WORKLOADS)
    with pytest.raises(InputError) as err:
        canary.prepare(kube, plan, "run")
    assert "cannot run" in err.value.msg and "dry-run create JobSet" in err.value.msg
    assert "before the canaries are drained" in err.value.msg


@pytest.mark.parametrize("namespace", ["gpufleet-canary\n", "canary-\u0661", "\uff43anary"])
def test_a_namespace_with_a_trailing_newline_or_unicode_is_refused(namespace):
    with pytest.raises(InputError, match="is not a Kubernetes name"):
        canary.parse_inputs({"namespace": namespace, "training": {"image": "i"}})
