"""The per-node ledger, the drain and the gang operations against an in-memory cluster (tests/unit/fakes/kube.py)."""
from __future__ import annotations

import pytest

from ansible_collections.gpufleet.upgrade.plugins.module_utils import kube
from ansible_collections.gpufleet.upgrade.plugins.module_utils.drain import DrainBlocked, classify, drain, selects
from ansible_collections.gpufleet.upgrade.plugins.module_utils.errors import InputError
from ansible_collections.gpufleet.upgrade.plugins.module_utils.gangs import GangError, Gangs, find_gangs
from ansible_collections.gpufleet.upgrade.plugins.module_utils.nodes import (
    boundary, cycle_drains, failure_text, plan_patch, progress, wave_outcome)
from tests.unit.fakes.kube import MSG_429, Clock, FakeKube, merge, node, pod

T = "v1.36.3"


# -- ledger -----------------------------------------------------------------------------------------------------
def apply(n, *args, **kwargs):
    patch = plan_patch(n, *args, **kwargs)
    if patch:
        merge(n, patch)
    return patch


def test_cordon_remembers_the_state_before_once_and_uncordon_returns_to_it():
    n = node("gpu-a1")
    assert apply(n, "cordoned", T) is not None
    assert n["spec"]["unschedulable"] and n["metadata"]["annotations"][kube.ANN_UNSCHED_BEFORE] == "false"
    assert apply(n, "cordoned", T) is None  # rerun: nothing to do, and gpufleet's own cordon is not "before"
    apply(n, "marked", T, phase="validated")
    apply(n, "uncordoned", T)
    assert not n["spec"]["unschedulable"] and kube.ANN_UNSCHED_BEFORE not in n["metadata"]["annotations"]
    assert progress(n, T)["finished"] and progress(n, T)["phase"] == "done"
    assert apply(n, "uncordoned", T) is None


def test_a_node_cordoned_by_an_operator_stays_cordoned():
    n = node("gpu-a4", unschedulable=True)
    apply(n, "cordoned", T)
    assert n["metadata"]["annotations"][kube.ANN_UNSCHED_BEFORE] == "true"
    apply(n, "uncordoned", T)
    assert n["spec"]["unschedulable"] is True
    assert progress(n, T)["finished"]


def test_recordon_keeps_how_far_the_node_got():
    n = node("gpu-a1")
    apply(n, "cordoned", T)
    apply(n, "marked", T, phase="drained")
    assert apply(n, "cordoned", T) is None
    assert progress(n, T)["phase"] == "drained"


def test_a_rerun_recordons_a_failed_node_as_a_new_attempt():
    n = node("gpu-a1")
    apply(n, "cordoned", T)
    apply(n, "marked", T, phase="failed", reason="gpu_health: 7 of 8 GPUs")
    apply(n, "cordoned", T)
    assert progress(n, T)["phase"] == "cordoned" and progress(n, T)["reason"] == ""
    assert n["metadata"]["annotations"][kube.ANN_UNSCHED_BEFORE] == "false"  # still the operator's state


def test_a_new_cordon_clears_a_stale_validated_and_a_held_node_starts_over():
    n = node("gpu-a1")
    apply(n, "cordoned", T)
    apply(n, "marked", T, phase="validated")
    apply(n, "cordoned", T)  # cordoned again (a rerun, a maintenance): its gates must run again
    assert progress(n, T)["phase"] == "upgraded"
    apply(n, "marked", T, phase="held", reason="held: wave-mate gpu-a2 failed gpu_health")
    apply(n, "cordoned", T)
    assert progress(n, T)["phase"] == "cordoned" and progress(n, T)["reason"] == ""


def test_a_failed_wave_ends_with_every_node_failed_or_held():
    out = wave_outcome(["gpu-a1", "gpu-a2", "gpu-a3"], {"gpu-a2": "Gate GPU count: gpu_health gate failed: 7 of 8"},
                       ["gpu-a1", "gpu-a2"], {"gpu-a1": "upgraded", "gpu-a2": "upgraded", "gpu-a3": "drained"})
    assert out["marks"]["gpu-a2"] == ("failed", "Gate GPU count: gpu_health gate failed: 7 of 8")
    assert out["marks"]["gpu-a3"][0] == "failed"  # not in rescue, no failure of its own: Ansible lost it
    assert out["marks"]["gpu-a3"][1].startswith("unreachable during the package upgrade (kubeadm, kubelet, GPU "
                                                "stack) (last recorded phase: drained)")
    assert out["marks"]["gpu-a1"][0] == "held"
    assert out["marks"]["gpu-a1"][1].startswith("held: wave-mate gpu-a2 failed Gate GPU count")
    assert "wave-mate gpu-a3 failed unreachable during" in out["marks"]["gpu-a1"][1]
    assert out["failed"] == ["gpu-a2", "gpu-a3"] and out["held"] == ["gpu-a1"]


def test_a_boundary_passes_only_when_every_earlier_node_is_done():
    rows = [{"name": "cp-1", "phase": "done", "reason": ""},
            {"name": "gpu-a1", "phase": "held", "reason": "held: wave-mate gpu-a2 failed"},
            {"name": "gpu-a2", "phase": "validated", "reason": ""},
            {"name": "gpu-b1", "phase": "", "reason": ""}]
    verdict = boundary(rows)
    assert not verdict["ok"] and sorted(verdict["lost"]) == ["gpu-a2"]
    assert "gpu-b1 has not been upgraded to this target (no ledger for it)" in verdict["message"]
    assert verdict["lost"]["gpu-a2"].startswith("unreachable during uncordon (last recorded phase: validated)")
    assert "gpu-a1 is held (held: wave-mate gpu-a2 failed)" in verdict["message"]
    assert boundary(rows[:1]) == {"ok": True, "lost": {}, "message": ""}


def test_a_failure_reason_from_a_no_log_task_is_censored():
    assert failure_text("Encrypt", {"msg": "key hunter2", "_ansible_no_log": True}) == \
        "Encrypt: output censored (no_log)"
    assert failure_text("Gate", {"msg": "gpu_health gate failed:\n 7 of 8"}) == "Gate: gpu_health gate failed: 7 of 8"
    assert len(failure_text("Gate", {"msg": "x" * 5000})) == 1000
    assert failure_text("Finish dpkg", {"msg": "non-zero return code", "rc": 2, "stderr": "dpkg: error: lock"}) == \
        "Finish dpkg: non-zero return code: dpkg: error: lock"


def test_failed_needs_a_reason_and_progress_is_per_target():
    n = node("gpu-a1")
    with pytest.raises(InputError, match="needs a reason"):
        plan_patch(n, "marked", T, phase="failed")
    apply(n, "marked", T, phase="failed", reason="gpu_health: 7 of 8 GPUs")
    assert progress(n, T)["reason"] == "gpu_health: 7 of 8 GPUs"
    assert progress(n, "v1.37.1")["phase"] == "" and not progress(n, "v1.37.1")["finished"]
    with pytest.raises(InputError, match="phase 'bogus'"):
        plan_patch(n, "marked", T, phase="bogus")


def test_each_target_a_node_is_cordoned_for_is_one_drain_of_its_cycle():
    cycle = "v1.37.2"
    train, serve = node("gpu-a1"), node("gpu-b1")
    apply(serve, "cordoned", "v1.36.3", cycle=cycle)  # hop 1: the pool that follows the control plane moves
    assert apply(serve, "cordoned", "v1.36.3", cycle=cycle) is None  # a rerun's re-cordon is not a new drain
    apply(serve, "uncordoned", "v1.36.3")
    apply(serve, "cordoned", cycle, cycle=cycle)  # hop 2
    apply(train, "cordoned", cycle, cycle=cycle)  # the skip-level pool's one drain, at the last hop
    assert cycle_drains(serve, cycle) == ["v1.36.3", cycle] and cycle_drains(train, cycle) == [cycle]
    assert progress(train, cycle)["cycle"] == cycle and progress(serve, cycle)["cycle_drains"] == "v1.36.3,v1.37.2"
    assert cycle_drains(train, "v1.39.1") == []  # another cycle: not drained in it
    apply(train, "uncordoned", cycle)
    apply(train, "cordoned", "v1.38.1")  # no cycle given: a cycle of one hop, counted afresh
    assert cycle_drains(train, "v1.38.1") == ["v1.38.1"] and cycle_drains(train, cycle) == []
    train["metadata"]["annotations"][kube.ANN_CYCLE_DRAINS] = "two"
    with pytest.raises(InputError, match="cycle-drains='two' is not a list of versions"):
        cycle_drains(train, "v1.38.1")


# -- drain ------------------------------------------------------------------------------------------------------
def test_classify():
    assert classify(pod("ds", "n", owner=("DaemonSet", "nvidia-dcgm-exporter"))) == "skip"
    assert classify(pod("m", "n", owner=None, annotations={"kubernetes.io/config.mirror": "x"})) == "skip"
    assert classify(pod("r", "n", labels={kube.JOBSET_NAME_LABEL: "llm"})) == "gang"
    assert classify(pod("bare", "n", owner=None)) == "unmanaged"
    assert classify(pod("bare", "n", owner=None), force=True) == "evict"
    assert classify(pod("done", "n", owner=None, phase="Succeeded")) == "evict"
    assert classify(pod("web", "n")) == "evict"


def test_selects_match_labels_and_expressions():
    p = pod("web", "n", labels={"app": "web", "tier": "fe"})
    assert selects({"spec": {"selector": {"matchLabels": {"app": "web"}}}}, p)
    assert not selects({"spec": {"selector": {"matchLabels": {"app": "db"}}}}, p)
    assert selects({"spec": {"selector": {"matchExpressions": [{"key": "tier", "operator": "In",
                                                                 "values": ["fe", "be"]}]}}}, p)
    assert not selects({"spec": {"selector": {"matchExpressions": [{"key": "tier", "operator": "DoesNotExist"}]}}}, p)
    assert not selects({"spec": {}}, p)


def test_drain_evicts_and_skips_daemonsets():
    api, clock = FakeKube(), Clock()
    api.pods += [pod("web-1", "gpu-a1"), pod("dcgm", "gpu-a1", owner=("DaemonSet", "dcgm")), pod("other", "gpu-b1")]
    result = drain(api, ["gpu-a1"], timeout=60, clock=clock, sleep=clock.sleep)
    assert result["evicted"] == ["default/web-1"] and result["skipped"] == ["default/dcgm"]
    assert [p["metadata"]["name"] for p in api.pods] == ["dcgm", "other"]


def test_drain_looks_at_terminating_pods_every_second_not_every_retry_interval():
    api, clock = FakeKube(), Clock()
    api.pods.append(pod("web-1", "gpu-a1"))
    original_evict = api.evict

    def evict_slowly(ns, name, grace):  # accepted, but the pod takes 3 s to terminate
        status, message = original_evict(ns, name, grace)
        api.pods.append(pod("web-1", "gpu-a1"))
        api.pods[-1]["metadata"]["uid"] = "uid-web-1"
        return status, message
    api.evict = evict_slowly
    sleeps = []

    def sleep(seconds):
        sleeps.append(seconds)
        clock.sleep(seconds)
        if clock.now >= 3:
            api.pods[:] = [p for p in api.pods if p["metadata"]["name"] != "web-1"]

    result = drain(api, ["gpu-a1"], timeout=60, interval=5, clock=clock, sleep=sleep)
    assert result["evicted"] == ["default/web-1"] and sleeps == [1.0, 1.0, 1.0]


def test_drain_retries_a_pdb_429_until_it_clears():
    api, clock = FakeKube(), Clock()
    api.pods.append(pod("web-1", "gpu-a1", labels={"app": "web"}))
    api.add_pdb("web", "default", {"app": "web"}, allowed=0)

    def sleep(seconds):
        clock.sleep(seconds)
        if clock.now >= 15:  # another replica became ready elsewhere
            api.pdb_list[0]["status"]["disruptionsAllowed"] = 1

    result = drain(api, ["gpu-a1"], timeout=60, interval=5, clock=clock, sleep=sleep)
    assert result["evicted"] == ["default/web-1"]
    assert sum(1 for c in api.calls if c[0] == "evict") == 4  # t=0, 5, 10 refused; t=15 accepted


def test_drain_reads_a_namespace_s_pdbs_once_a_retry_pass_not_once_a_refused_pod():
    api, clock = FakeKube(), Clock()
    for i in range(3):
        api.pods.append(pod("web-%d" % i, "gpu-a1", labels={"app": "web"}))
    api.add_pdb("web", "default", {"app": "web"}, allowed=0)

    def sleep(seconds):
        clock.sleep(seconds)
        if clock.now >= 10:
            api.pdb_list[0]["status"]["disruptionsAllowed"] = 3

    result = drain(api, ["gpu-a1"], timeout=60, interval=5, clock=clock, sleep=sleep)
    assert sorted(result["evicted"]) == ["default/web-0", "default/web-1", "default/web-2"]
    assert sum(1 for c in api.calls if c[0] == "evict") == 9  # 3 pods refused at t=0 and 5, accepted at 10
    assert api.read_calls == [("pdbs", "default")] * 2  # one read per refused pass, none once all are accepted


def test_drain_names_pod_owner_and_pdb_when_it_gives_up():
    api, clock = FakeKube(), Clock()
    api.pods.append(pod("web-1", "gpu-a1", labels={"app": "web"}))
    api.add_pdb("web", "default", {"app": "web"}, allowed=0)
    with pytest.raises(DrainBlocked) as err:
        drain(api, ["gpu-a1"], timeout=20, interval=5, clock=clock, sleep=clock.sleep)
    msg = err.value.msg
    assert "did not finish in 20s" in msg and "gpu-a1: pod default/web-1 (owner ReplicaSet/web-1)" in msg
    assert "HTTP 429: " + MSG_429 in msg and "PodDisruptionBudget default/web (minAvailable 1" in msg
    assert "disruption" in msg and "disable_eviction=true" in msg
    assert err.value.details["blockers"][0]["pdbs"] == ["default/web"]
    assert api.pods  # nothing was deleted behind the PDB's back


def test_drain_refuses_gang_ranks_and_unmanaged_pods_before_evicting_anything():
    api, clock = FakeKube(), Clock()
    api.add_gang("llm", ["gpu-a1"])
    api.pods += [pod("web-1", "gpu-a1"), pod("bare", "gpu-a1", owner=None)]
    with pytest.raises(DrainBlocked) as err:
        drain(api, ["gpu-a1"], timeout=60, clock=clock, sleep=clock.sleep)
    assert "refused before evicting anything" in err.value.msg
    assert "rank of a training gang" in err.value.msg and "has no controller" in err.value.msg
    assert not [c for c in api.calls if c[0] == "evict"]


def test_break_glass_deletes_through_the_pdb_and_says_so():
    api, clock = FakeKube(), Clock()
    api.pods.append(pod("web-1", "gpu-a1", labels={"app": "web"}))
    api.add_pdb("web", "default", {"app": "web"}, allowed=0)
    result = drain(api, ["gpu-a1"], timeout=5, disable_eviction=True, clock=clock, sleep=clock.sleep)
    assert result["deleted"] == ["default/web-1"] and "disable_eviction" in result["break_glass"][0]
    assert not api.pods


def test_drain_check_mode_changes_nothing():
    api, clock = FakeKube(), Clock()
    api.pods.append(pod("web-1", "gpu-a1"))
    result = drain(api, ["gpu-a1"], timeout=5, check_mode=True, clock=clock, sleep=clock.sleep)
    assert result["would_evict"] == ["default/web-1"] and result["changed"] and api.pods and not api.calls


# -- gangs ------------------------------------------------------------------------------------------------------
def test_find_gangs_lists_each_jobset_once_with_its_nodes_and_workload():
    api = FakeKube()
    api.add_gang("llm", ["gpu-a1", "gpu-b1"])
    api.add_gang("solo", ["gpu-b2"], workload=False)
    gangs = find_gangs({n: api.pods_on_node(n) for n in ("gpu-a1", "gpu-b1")}, api.list_custom(kube.JOBSET),
                       api.list_custom(kube.WORKLOAD))
    assert gangs == [{"namespace": "training", "jobset": "llm", "nodes": ["gpu-a1", "gpu-b1"], "exists": True,
                      "workload": "jobset-llm", "last_checkpoint": None}]


def test_discover_reads_the_wave_s_jobsets_and_their_namespaces_workloads_not_the_cluster_s():
    api = FakeKube()
    api.add_gang("llm", ["gpu-a1", "gpu-b1"])
    api.add_gang("elsewhere", ["gpu-c1"], ns="research")
    api.add_gang("orphan", ["gpu-a1"], ns="batch", workload=False)
    api.custom[kube.JOBSET] = [j for j in api.custom[kube.JOBSET] if j["metadata"]["name"] != "orphan"]
    gangs = Gangs(api).discover(["gpu-a1"])
    assert [(g["namespace"], g["jobset"], g["exists"], g["workload"]) for g in gangs] == [
        ("batch", "orphan", False, None), ("training", "llm", True, "jobset-llm")]
    # no Workload carries Kueue's job-uid label here: the namespace's Workloads are read, and only its
    assert api.read_calls == [
        ("get_custom", "jobsets", "batch", "orphan"), ("get_custom", "jobsets", "training", "llm"),
        ("list_custom", "workloads", "training", kube.KUEUE_JOB_UID_LABEL + "=js-llm"),
        ("list_custom", "workloads", "training")]


def test_discover_reads_only_the_workload_kueue_labelled_with_the_jobset_s_uid():
    api = FakeKube()
    api.add_gang("llm", ["gpu-a1"])
    api.add_gang("other", ["gpu-b1"])
    for wl in api.custom[kube.WORKLOAD]:
        wl["metadata"]["labels"] = {kube.KUEUE_JOB_UID_LABEL: "js-" + wl["metadata"]["name"][len("jobset-"):]}
        wl["metadata"]["ownerReferences"] = [{"kind": "JobSet", "name": wl["metadata"]["name"][len("jobset-"):],
                                              "uid": wl["metadata"]["labels"][kube.KUEUE_JOB_UID_LABEL]}]
    gangs = Gangs(api).discover(["gpu-a1"])
    assert [(g["jobset"], g["workload"]) for g in gangs] == [("llm", "jobset-llm")]
    assert [c for c in api.read_calls if c[0] == "list_custom"] == [
        ("list_custom", "workloads", "training", kube.KUEUE_JOB_UID_LABEL + "=js-llm")]


@pytest.mark.parametrize("status", [403, None])
def test_discover_fails_when_a_jobset_cannot_be_read_other_than_gone(status):
    api = FakeKube()
    api.add_gang("llm", ["gpu-a1"])

    def refused(gvr, ns, name):
        raise kube.KubeError("read jobsets %s/%s: refused" % (ns, name), **({"status": status} if status else {}))

    api.get_custom = refused
    with pytest.raises(kube.KubeError, match="refused"):
        Gangs(api).discover(["gpu-a1"])


def test_stop_finds_a_workload_owned_by_its_jobset_without_the_name_label():
    api, clock = FakeKube(), Clock()
    api.add_gang("llm", ["gpu-a1"])
    wl = api.custom[kube.WORKLOAD][0]
    wl["metadata"]["labels"] = {}
    wl["metadata"]["ownerReferences"] = [{"kind": "JobSet", "name": "llm", "uid": "js-llm", "controller": True}]
    ops = Gangs(api, clock=clock, sleep=clock.sleep)
    stop = ops.stop(ops.discover(["gpu-a1"]), "run-1", timeout=30, interval=1)
    assert stop["stopped"] == ["training/llm"]
    assert api.custom[kube.WORKLOAD][0]["spec"]["active"] is False  # through Kueue, not a suspended JobSet
    assert not api.custom[kube.JOBSET][0]["spec"]["suspend"]


def test_stop_checkpoints_then_stops_the_whole_gang_and_resume_reactivates_only_gpufleets():
    api, clock = FakeKube(), Clock()
    api.add_gang("llm", ["gpu-a1", "gpu-b1"])
    api.add_gang("other", ["gpu-b2"])
    api.patch_custom(kube.WORKLOAD, "training", "jobset-other", {"spec": {"active": False},
                                                                  "metadata": {"annotations": {}}})
    ops = Gangs(api, clock=clock, sleep=clock.sleep)
    gangs = ops.discover(["gpu-a1"])
    done = ops.checkpoint(gangs, "run-1", timeout=30, interval=1)
    assert done["checkpointed"] == [{"gang": "training/llm", "time": "2026-11-30T12:00:00Z"}]
    stop = ops.stop(gangs, "run-1", timeout=30, interval=1)
    assert stop["stopped"] == ["training/llm"]
    assert not [p for p in api.pods if p["metadata"]["labels"].get(kube.JOBSET_NAME_LABEL) == "llm"]  # b1 too
    assert ops.stop(gangs, "run-1", timeout=30, interval=1)["changed"] is False
    wl = {w["metadata"]["name"]: w for w in api.list_custom(kube.WORKLOAD)}
    assert wl["jobset-llm"]["metadata"]["annotations"][kube.ANN_STOPPED_NODES] == "gpu-a1"
    resumed = ops.resume()
    assert resumed["resumed"] == ["workload training/jobset-llm"] and resumed["held"] == []
    wl = {w["metadata"]["name"]: w for w in api.list_custom(kube.WORKLOAD)}
    assert wl["jobset-llm"]["spec"]["active"] is True and kube.ANN_STOPPED_BY not in wl["jobset-llm"]["metadata"][
        "annotations"]
    assert wl["jobset-other"]["spec"]["active"] is False  # not stopped by gpufleet: left alone
    assert ops.resume()["changed"] is False


def test_a_gang_stopped_by_any_gpufleet_run_resumes_once_its_nodes_are_back_in_service():
    api, clock = FakeKube(), Clock()
    api.nodes["gpu-a1"] = node("gpu-a1", unschedulable=True, annotations={
        kube.ANN_UNSCHED_BEFORE: "false", kube.ANN_PHASE: "failed", kube.ANN_REASON: "gpu_health: 7 of 8 GPUs"})
    api.add_gang("llm", ["gpu-a1"])
    ops = Gangs(api, clock=clock, sleep=clock.sleep)
    # stopped by another run (a maintenance run, or the target spelled another way): any gpufleet stop counts
    ops.stop(ops.discover(["gpu-a1"]), "gpufleet-maintenance-gpu-a1", timeout=30, interval=1)
    held = ops.resume()
    assert held["resumed"] == [] and held["held"][0]["gang"] == "workload training/jobset-llm"
    assert held["held"][0]["message"] == ("workload training/jobset-llm stays stopped: gpu-a1 held cordoned by "
                                          "gpufleet (phase failed: gpu_health: 7 of 8 GPUs)")
    assert api.list_custom(kube.WORKLOAD)[0]["spec"]["active"] is False
    api.nodes["gpu-a1"] = node("gpu-a1", ready=False)
    assert ops.resume()["held"][0]["nodes"] == {"gpu-a1": "not Ready"}
    api.nodes["gpu-a1"] = node("gpu-a1")  # repaired, uncordoned, Ready
    assert ops.resume()["resumed"] == ["workload training/jobset-llm"]
    assert api.list_custom(kube.WORKLOAD)[0]["spec"]["active"] is True


def test_a_gang_that_never_confirms_is_not_stopped():
    api, clock = FakeKube(), Clock()
    api.add_gang("llm", ["gpu-a1"])
    api.never.add("llm")
    ops = Gangs(api, clock=clock, sleep=clock.sleep)
    with pytest.raises(GangError) as err:
        ops.checkpoint(ops.discover(["gpu-a1"]), "run-1", timeout=10, interval=2)
    assert "checkpoint not confirmed within 10s by JobSet training/llm (on gpu-a1)" in err.value.msg
    assert "NOT stopped" in err.value.msg
    assert api.list_custom(kube.WORKLOAD)[0]["spec"]["active"] is True and api.pods


def test_a_jobset_without_a_workload_is_suspended():
    api, clock = FakeKube(), Clock()
    api.add_gang("solo", ["gpu-a1"], workload=False)
    ops = Gangs(api, clock=clock, sleep=clock.sleep)
    gangs = ops.discover(["gpu-a1"])
    api.pods.clear()  # the JobSet controller deletes the pods of a suspended JobSet
    assert ops.stop(gangs, "run-1", timeout=5, interval=1)["stopped"] == ["training/solo"]
    assert api.list_custom(kube.JOBSET)[0]["spec"]["suspend"] is True
    assert ops.resume()["resumed"] == ["jobset training/solo"]
    assert api.list_custom(kube.JOBSET)[0]["spec"]["suspend"] is False


@pytest.mark.parametrize("drains", ["v1.36.3\n", "v1.36.3,v1.3\u0667.2"])
def test_a_cycle_drains_record_with_a_trailing_newline_or_unicode_digits_is_refused(drains):
    n = node("gpu-a1")
    n["metadata"].setdefault("annotations", {}).update({kube.ANN_CYCLE: "v1.37.2", kube.ANN_CYCLE_DRAINS: drains})
    with pytest.raises(InputError, match="is not a list of versions"):
        cycle_drains(n, "v1.37.2")
