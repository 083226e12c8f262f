"""The fleet run's decisions (plugins/module_utils/fleet_run.py): the next step from the plan and the ledger,
rings strictly in order under the caps, soaks, failed cells never retried without the typed confirmation, the
ledger read back, and the halt conditions failing closed."""
from __future__ import annotations

import copy
import datetime

import pytest

from ansible_collections.gpufleet.upgrade.plugins.module_utils import fleet_readings as fr
from ansible_collections.gpufleet.upgrade.plugins.module_utils import fleet_run as run
from ansible_collections.gpufleet.upgrade.plugins.module_utils.errors import InputError
from ansible_collections.gpufleet.upgrade.plugins.module_utils.fleet import parse_halt_policy, plan_fleet
from tests.unit.module_utils.test_fleet import fleet

T0 = datetime.datetime(2026, 12, 1, 2, 0, 0, tzinfo=datetime.UTC)


def clean_reading(**changes):
    """A whole, clean reading as the fleet_readings module writes it: every API reading with its breakdowns (a cell
    of two 8-GPU nodes in pool h100, two JobSets). Other tests (tests/unit/modules) take theirs from here."""
    doc = {"apiserver_429_per_minute": 0.0, "apiserver_p99_seconds": 0.02, "apiservers": {},
           "not_ready_nodes": 0, "not_ready": [],
           "gpu_allocatable_fraction": 1.0, "gpus_allocatable": 16, "gpus_expected": 16,
           "gpu_allocatable_by_pool": {"h100": {"allocatable": 16, "expected": 16, "fraction": 1.0, "per_node": 8,
                                                "nodes": 2}},
           "gpu_allocatable_off_baseline": {},
           "jobset_restarts": 1, "jobsets_restarted": {"training/llm": 1}, "jobset_api": True,
           "jobset_restart_counts": {"u1": {"name": "training/llm", "restarts": 1},
                                     "u2": {"name": "training/idle", "restarts": 0}},
           "unmeasured": {}}
    doc.update(copy.deepcopy(changes))
    return doc


def node(name, gpus="8", ready="True"):
    status = {"conditions": [{"type": "Ready", "status": ready}], "allocatable": {fr.GPU: gpus}}
    return {"metadata": {"name": name}, "status": status}


def with_gpus(doc, *counts):
    """``doc`` with its GPU readings from Nodes gpu-1.. of pool h100 (8 per node) reporting ``counts``."""
    names = ["gpu-%d" % (i + 1) for i in range(len(counts))]
    pools = fr.pool_expectations({"h100": {"nodes": names, "gpus": 8 * len(names), "gpus_per_node": 8}})
    out = fr.node_readings([node(n, c) for n, c in zip(names, counts)], 8 * len(names), pools)
    return dict(doc, **{k: v for k, v in out.items() if k not in ("unmeasured", "not_ready_nodes", "not_ready")})


def with_restarts(doc, *jobsets):
    """``doc`` with its JobSet readings from ``jobsets`` (uid, namespace/name, restarts)."""
    total, per, by_uid = fr.jobset_restarts([{"metadata": {"uid": u, "namespace": n.split("/")[0],
                                                           "name": n.split("/")[1]}, "status": {"restarts": r}}
                                             for u, n, r in jobsets])
    return dict(doc, jobset_restarts=total, jobsets_restarted=per, jobset_restart_counts=by_uid)


def at(seconds):
    return T0 + datetime.timedelta(seconds=seconds)


def finish(ledger, cells, when):
    for cell in cells:
        ledger = run.record(ledger, cell, "done", when, version="v1.36.3")
    return ledger


def test_a_fleet_goes_ring_by_ring_with_soaks_and_completes():
    plan = plan_fleet(fleet())
    ledger = run.check_ledger(None, plan)
    step = run.next_step(plan, ledger, T0)
    assert (step["action"], step["ring"], step["cells"]) == ("upgrade", "ring0", ["canary-1", "dev-1"])
    ledger = run.record(run.record(ledger, "canary-1", "upgrading", T0), "dev-1", "upgrading", T0)
    assert run.next_step(plan, ledger, T0)["action"] == "wait"
    ledger = finish(ledger, ["canary-1"], at(60))
    assert run.next_step(plan, ledger, at(60))["action"] == "wait"  # dev-1 still upgrading: ring1 waits
    ledger = finish(ledger, ["dev-1"], at(90))
    step = run.next_step(plan, ledger, at(90))
    assert (step["action"], step["remaining"], step["start"]) == ("soak", 600, True)
    ledger = run.soak(ledger, "ring0", at(90))
    assert run.next_step(plan, ledger, at(400))["remaining"] == 290
    last = run.next_step(plan, ledger, at(690))  # time is up: a last check, never a promotion on time alone
    assert (last["action"], last["remaining"], last["start"]) == ("soak", 0, False)
    ledger = run.soak(ledger, "ring0", at(690), done=True)
    step = run.next_step(plan, ledger, at(690))
    assert (step["action"], step["ring"], step["cells"]) == ("upgrade", "ring1", ["stage-1", "inf-east"])
    ledger = finish(ledger, ["stage-1", "inf-east"], at(900))
    ledger = run.soak(run.soak(ledger, "ring1", at(900)), "ring1", at(4500), done=True)
    # ring2: the plan's first batch (inf-west with train-a), then train-b alone - never two training cells at once
    step = run.next_step(plan, ledger, at(4500))
    assert step["cells"] == ["inf-west", "train-a"]
    ledger = run.record(run.record(ledger, "inf-west", "upgrading", at(4500)), "train-a", "upgrading", at(4500))
    ledger = finish(ledger, ["inf-west"], at(5000))
    assert run.next_step(plan, ledger, at(5000))["action"] == "wait"  # train-b waits for train-a
    ledger = finish(ledger, ["train-a"], at(6000))
    assert run.next_step(plan, ledger, at(6000))["cells"] == ["train-b"]
    ledger = finish(ledger, ["train-b"], at(7000))
    ledger = run.soak(run.soak(ledger, "ring2", at(7000)), "ring2", at(93400), done=True)
    assert run.next_step(plan, ledger, at(93400))["action"] == "complete"


def test_a_failed_cell_stops_the_fleet_until_the_typed_retry():
    plan = plan_fleet(fleet())
    ledger = run.record(run.check_ledger(None, plan), "canary-1", "failed", T0, reason="gate nccl on gpu-a1")
    step = run.next_step(plan, ledger, T0)
    assert step["action"] == "stop" and step["cells"] == ["canary-1"]
    assert "canary-1: gate nccl on gpu-a1" in step["message"]
    assert "gpufleet_fleet_retry='retry canary-1 in fleet prod'" in step["message"]
    with pytest.raises(InputError, match=r"type exactly 'retry canary-1 in fleet prod'"):
        run.retry(ledger, "canary-1", "retry canary-1", T0)
    with pytest.raises(InputError, match=r"dev-1 has not failed \(it is pending\)"):
        run.retry(ledger, "dev-1", "retry dev-1 in fleet prod", T0)
    again = run.retry(ledger, "canary-1", "retry canary-1 in fleet prod", T0)
    assert again["cells"]["canary-1"]["state"] == "pending"
    assert ledger["cells"]["canary-1"]["state"] == "failed"  # the input is not changed
    assert run.next_step(plan, again, T0)["action"] == "upgrade"


def test_the_ledger_read_back_is_checked_against_the_plan():
    plan = plan_fleet(fleet())
    ledger = finish(run.check_ledger(None, plan), ["canary-1"], T0)
    back = run.check_ledger(copy.deepcopy(ledger), plan)
    assert back["cells"]["canary-1"]["state"] == "done" and back["cells"]["dev-1"]["state"] == "pending"
    # a new target: the cells that finished the old one start again
    retarget = plan_fleet(fleet(target="v1.36.4"))
    assert run.check_ledger(copy.deepcopy(ledger), retarget)["cells"]["canary-1"]["state"] == "pending"
    other = dict(ledger, fleet="staging")
    with pytest.raises(InputError, match=r"it belongs to fleet staging, not prod"):
        run.check_ledger(other, plan)
    gone = copy.deepcopy(ledger)
    gone["cells"]["old-cell"] = {"state": "done"}
    with pytest.raises(InputError, match=r"cell\(s\) old-cell are not in the fleet any more"):
        run.check_ledger(gone, plan)
    broken = copy.deepcopy(ledger)
    broken["cells"]["dev-1"]["state"] = "finished"
    with pytest.raises(InputError, match=r"cell dev-1 has state 'finished'"):
        run.check_ledger(broken, plan)
    with pytest.raises(InputError, match=r"not a version-1 gpufleet ledger"):
        run.check_ledger({"cells": {}}, plan)


def test_a_halt_restarts_the_rings_soak():
    plan = plan_fleet(fleet())
    ledger = run.soak(finish(run.check_ledger(None, plan), ["canary-1", "dev-1"], T0), "ring0", T0)
    found = run.halts("dev-1", {"nccl_busbw_gbps": 480}, {"nccl_busbw_gbps": 300}, parse_halt_policy({}),
                      ["nccl_busbw_gbps"])
    halted = run.halt(ledger, "ring0", found, at(100))
    assert halted["halt"]["message"] == ("fleet prod halted in ring ring0: dev-1: nccl_busbw_gbps fell from 480 to "
                                         "300 (at most 10% under)")
    assert run.next_step(plan, halted, at(700))["action"] == "stop"  # halted: nothing moves
    # the probe hosts under the floor are named (the reading is the slowest of them)
    (slow,) = run.halts("dev-1", {"nccl_busbw_gbps": 480}, {"nccl_busbw_gbps": 300, "nccl_busbw_by_host": {
        "gpu-2": 300.0, "gpu-1": 479.5}}, parse_halt_policy({}), ["nccl_busbw_gbps"])
    assert slow["message"] == "dev-1: nccl_busbw_gbps fell from 480 to 300 (at most 10% under) (probe gpu-2 300 GB/s)"
    resumed = run.clear_halt(halted)
    step = run.next_step(plan, resumed, at(700))
    assert (step["action"], step["start"]) == ("soak", True)  # the soak starts over once the run resumes
    assert resumed["halt"] is None and resumed["last_halt"]["ring"] == "ring0"
    assert run.check_ledger(copy.deepcopy(resumed), plan)["last_halt"] == resumed["last_halt"]  # read back, kept


def nodes_down(*names):
    return {"not_ready_nodes": len(names), "not_ready": list(names)}


@pytest.mark.parametrize("name, before, after, held", [
    ("apiserver_429_per_minute", 1, 6, False), ("apiserver_429_per_minute", 1, 6.5, True),
    ("apiserver_p99_seconds", 0.2, 0.3, False), ("apiserver_p99_seconds", 0.2, 0.31, True),
    ("apiserver_p99_seconds", 0.02, 0.25, False), ("apiserver_p99_seconds", 0.02, 0.26, True),  # the 0.25 s floor
    ("not_ready_nodes", nodes_down(), nodes_down(), False), ("not_ready_nodes", nodes_down("a"), nodes_down("b"), True),
    ("gpu_allocatable_fraction", with_gpus({}, "8"), with_gpus({}, "8", "8"), False),
    ("gpu_allocatable_fraction", with_gpus({}, "8"), with_gpus({}, "8", "6"), True),
    ("nccl_busbw_gbps", 480, 432, False), ("nccl_busbw_gbps", 480, 431, True),
    ("jobset_restarts", with_restarts({"jobset_api": True}, ("u1", "t/a", 3)),
     with_restarts({"jobset_api": True}, ("u1", "t/a", 3)), False),
    ("jobset_restarts", with_restarts({"jobset_api": True}, ("u1", "t/a", 3)),
     with_restarts({"jobset_api": True}, ("u1", "t/a", 4)), True),
    ("inference_p99_ms", 100, 120, False), ("inference_p99_ms", 100, 121, True),
])
def test_each_halt_condition_at_its_threshold(name, before, after, held):
    before, after = ((dict(r) if isinstance(r, dict) else {name: r}) for r in (before, after))
    found = run.halts("inf-east", before, after, parse_halt_policy({}), [name])
    assert bool(found) is held, found


def test_jobset_restarts_rise_jobset_by_jobset():
    """A JobSet that finished and was deleted (5 restarts) no longer hides a new one's 3: the totals fell from 5 to
    3, yet the gang restarted three times. One made again under the same name has a new uid and counts whole."""
    policy = parse_halt_policy({})

    def reading(*jobsets):
        return {"jobset_restarts": sum(r for _u, _n, r in jobsets), "jobset_api": True,
                "jobset_restart_counts": {u: {"name": n, "restarts": r} for u, n, r in jobsets}}
    before = reading(("u1", "training/old", 5), ("u2", "training/llm", 1))
    after = reading(("u2", "training/llm", 1), ("u3", "training/new", 3))
    found = run.halts("train-1", before, after, policy, ["jobset_restarts"])
    assert [f["message"] for f in found] == [
        "train-1: jobset_restarts rose by 3, JobSet by JobSet (training/new +3 (new since the reading before); at "
        "most +0)"]
    again = reading(("u4", "training/llm", 1), ("u3", "training/new", 3))  # llm deleted and made again: new uid
    assert "training/llm +1 (new since" in run.halts("train-1", after, again, policy, ["jobset_restarts"])[0][
        "message"]
    assert run.halts("train-1", after, after, policy, ["jobset_restarts"]) == []
    # a total without its per-JobSet counts (a reading from before they were kept, or one edited by hand) is refused:
    # the totals alone would let a deleted JobSet's restarts hide another's
    (old,) = run.halts("train-1", {"jobset_restarts": 5, "jobset_api": True}, after, policy, ["jobset_restarts"])
    assert old["message"] == ("train-1: jobset_restarts was not measured before the upgrade (refused: jobset_restarts "
                              "comes without jobset_restart_counts (each JobSet's count by uid), so its rise cannot "
                              "be judged JobSet by JobSet); a halt condition that cannot be read halts")


def test_jobset_restarts_from_an_api_that_went_away_are_not_a_reading():
    policy = parse_halt_policy({})
    served = {"jobset_restarts": 2, "jobset_restart_counts": {"u1": {"name": "t/a", "restarts": 2}}, "jobset_api": True}
    gone = {"jobset_restarts": 0, "jobset_restart_counts": {}, "jobset_api": False}
    found = run.halts("train-1", served, gone, policy, ["jobset_restarts"])
    assert [f["message"] for f in found] == [
        "train-1: jobset_restarts was not measured after the upgrade (the JobSet API was served before and is not "
        "now: its CRD or controller is gone); a halt condition that cannot be read halts"]
    assert run.halts("train-1", gone, gone, policy, ["jobset_restarts"]) == []  # never served: nothing to restart
    assert [f["message"] for f in run.halts("train-1", gone, served, policy, ["jobset_restarts"])] == [
        "train-1: jobset_restarts rose by 2, JobSet by JobSet (t/a +2 (new since the reading before); at most +0)"]
    assert run.halts("train-1", gone, dict(served, jobset_restarts=0, jobset_restart_counts={}), policy,
                     ["jobset_restarts"]) == []  # installed since, nothing restarted: counts from 0


def test_a_gpu_halt_names_the_pools_and_nodes_under_the_floor():
    policy = parse_halt_policy({})
    pools = fr.pool_expectations({"h100": {"nodes": ["a", "b"], "gpus": 16, "gpus_per_node": 8},
                                  "l40s": {"nodes": ["c", "d"], "gpus": 16, "gpus_per_node": 8}})
    after = fr.node_readings([node("a"), node("b", "2"), node("c"), node("d")], 32, pools)
    found = run.halts("train-1", with_gpus({}, "8"), after, policy, ["gpu_allocatable_fraction"])
    assert found[0]["message"] == "train-1: gpu_allocatable_fraction is 0.625 (at least 1) (pool h100 10 of 16) " \
                                  "(node b 2 of 8)"
    down = fr.node_readings([node("a"), node("b", ready="False"), node("c"), node("d")], 32, pools)
    assert run.halts("train-1", with_gpus({}, "8"), down, policy, ["gpu_allocatable_fraction"])[0]["message"] == \
        "train-1: gpu_allocatable_fraction is 0.5 (at least 1) (pool h100 8 of 16) (node b 0 of 8 (not ready))"


def test_a_reading_that_is_missing_or_not_a_number_halts():
    policy = parse_halt_policy({})
    everything = run.halts("inf-east", {}, {}, policy)
    assert len(everything) == len(run.CONDITIONS)
    assert "inf-east: apiserver_429_per_minute was not measured after the upgrade" in everything[0]["message"]
    before_missing = run.halts("inf-east", {}, {"nccl_busbw_gbps": 480}, policy, ["nccl_busbw_gbps"])
    assert "was not measured before the upgrade" in before_missing[0]["message"]
    why = run.halts("inf-east", {"nccl_busbw_gbps": 480}, {"nccl_busbw_gbps": None, "unmeasured": {
        "nccl_busbw_gbps": "gpu-b2: nccl_wrong_elements 12"}}, policy, ["nccl_busbw_gbps"])
    assert why[0]["message"] == ("inf-east: nccl_busbw_gbps was not measured after the upgrade (gpu-b2: "
                                 "nccl_wrong_elements 12); a halt condition that cannot be read halts")
    zero = with_restarts({"jobset_api": True})
    junk = run.halts("inf-east", zero, dict(zero, jobset_restarts="n/a"), policy, ["jobset_restarts"])
    assert "(refused: jobset_restarts is 'n/a', not a whole number 0 or more)" in junk[0]["message"]
    for bad in (float("nan"), float("inf"), True):  # NaN compares false both ways: it would pass every test
        found = run.halts("inf-east", dict(nodes_down(), nccl_busbw_gbps=400.0),
                          dict(nodes_down(), not_ready_nodes=bad, nccl_busbw_gbps=400.0), policy, ["not_ready_nodes"])
        assert len(found) == 1 and "(refused: not_ready_nodes is %r, not a whole number" % bad in found[0]["message"]
        assert run.halts("inf-east", {"nccl_busbw_gbps": bad}, {"nccl_busbw_gbps": 400.0}, policy,
                         ["nccl_busbw_gbps"]), bad
    many = dict(zero, jobset_restart_counts={"u1": {"name": "ns/js", "restarts": "many"}})
    counts = run.halts("inf-east", zero, many, policy, ["jobset_restarts"])
    assert len(counts) == 1 and "jobset_restart_counts.u1 (JobSet ns/js).restarts is 'many'" in counts[0]["message"]
    with pytest.raises(InputError, match="unknown gpu_temperature"):
        run.halts("inf-east", {}, {}, policy, ["gpu_temperature"])
    with pytest.raises(InputError, match=r"policy.halt.max_not_ready_nodes: -1; give 0 or more"):
        parse_halt_policy({"max_not_ready_nodes": -1})
    with pytest.raises(InputError, match=r"policy.halt: .*max_errors"):
        parse_halt_policy({"max_errors": 1})


# -- what the fleet playbook asks (hops, judge, bounds, the retry confirmation, paths) ------------------------------
def test_hops_are_releases_and_a_bare_minor_is_refused_before_anything_runs():
    plan = plan_fleet(fleet())
    ledger = run.check_ledger(None, plan)
    assert run.hops(plan, "canary-1") == ["v1.36.3"]
    assert set(run.runnable(plan, ledger)) == set(plan["cells"])
    far = fleet()
    far["policy"]["target"] = "v1.37.2"
    plan = plan_fleet(far)
    with pytest.raises(InputError, match=r"canary-1: the hop\(s\) v1.36 have no release; set gpufleet_fleet.policy"
                                         r".hop_versions \(such as \{\"1.36\": \"v1.36.3\"\}\)"):
        run.runnable(plan, run.check_ledger(None, plan))
    far["policy"]["hop_versions"] = {"1.36": "v1.36.3"}
    plan = plan_fleet(far)
    assert run.hops(plan, "train-a") == ["v1.36.3", "v1.37.2"]
    with pytest.raises(InputError, match="nope is not a cell of fleet prod"):
        run.hops(plan, "nope")
    done = run.record(run.check_ledger(None, plan), "canary-1", "done", T0)
    assert "canary-1" not in run.runnable(plan, done)


def test_judge_takes_each_cells_own_readings_and_the_fleets_thresholds():
    spec = fleet()
    spec["cells"][0]["halt_readings"] = ["not_ready_nodes"]  # canary-1: nodes only
    plan = plan_fleet(spec)
    before = {"canary-1": nodes_down(), "dev-1": clean_reading()}
    after = {"canary-1": nodes_down(), "dev-1": with_gpus(clean_reading(), "8", "8", "8", "7")}
    found = run.judge(plan, ["canary-1", "dev-1"], before, after)
    assert [(f["cell"], f["condition"]) for f in found] == [("dev-1", "gpu_allocatable_fraction")]
    assert "is 0.9688 (at least 1) (pool h100 31 of 32) (node gpu-4 7 of 8)" in found[0]["message"]
    assert [(f["cell"], f["condition"]) for f in run.judge(plan, ["canary-1"], {"canary-1": {}}, after)] == [
        ("canary-1", "not_ready_nodes")]  # a reading before without it is no baseline to judge against
    assert run.judge(plan, ["dev-1"], before, {})[0]["message"].startswith(
        "dev-1: apiserver_429_per_minute was not measured after the upgrade")
    assert run.judge(plan, [], before, after) == []


def test_the_playbooks_bounds_paths_and_the_retry_confirmations_cell():
    plan = plan_fleet(fleet())
    assert run.max_steps(plan) == sum(len(r["batches"]) + 2 for r in plan["rings"]) + 1
    assert run.paths("/srv/out/", "prod") == {"dir": "/srv/out/fleet/prod", "ledger": "/srv/out/fleet/prod/ledger.json",
                                              "readings": "/srv/out/fleet/prod/readings",
                                              "logs": "/srv/out/fleet/prod/logs",
                                              "report": "/srv/out/fleet/prod/report"}
    assert run.versions_file("/srv/out/fleet/prod/report", "gpu-east-1") == \
        "/srv/out/fleet/prod/report/versions/gpu-east-1.json"
    assert run.retry_cell("retry dev-1 in fleet prod") == "dev-1"
    for bad in ("", "retry dev-1", "please retry dev-1 in fleet prod", "retry dev-1 of fleet prod"):
        with pytest.raises(InputError, match="type 'retry CELL in fleet FLEET'"):
            run.retry_cell(bad)


def test_a_cell_left_upgrading_by_an_interrupted_run_goes_again():
    plan = plan_fleet(fleet())
    ledger = run.record(run.check_ledger(None, plan), "canary-1", "upgrading", T0)
    ledger = run.record(ledger, "dev-1", "done", T0)
    again = run.resume_interrupted(ledger, at(5))
    assert again["cells"]["canary-1"]["state"] == "pending" and "ended mid-wave" in again["cells"]["canary-1"]["reason"]
    assert again["cells"]["dev-1"]["state"] == "done" and ledger["cells"]["canary-1"]["state"] == "upgrading"
    assert run.next_step(plan, again, at(5))["cells"] == ["canary-1"]


def test_a_new_target_or_a_retried_cell_soaks_its_ring_again_and_a_recorded_halt_stops():
    plan = plan_fleet(fleet())
    ledger = run.check_ledger(None, plan)
    for cell in plan["cells"]:
        ledger = run.record(ledger, cell, "done", T0, version="v1.36.3")
    for ring in plan["rings"]:
        ledger = run.soak(run.soak(ledger, ring["ring"], T0), ring["ring"], at(10), done=True)
    assert run.next_step(plan, run.check_ledger(copy.deepcopy(ledger), plan), at(20))["action"] == "complete"
    newer = fleet()
    newer["policy"]["target"] = "v1.36.5"
    plan2 = plan_fleet(newer)
    again = run.check_ledger(copy.deepcopy(ledger), plan2)
    assert all(r == {"soak_started": None, "soak_done": None} for r in again["rings"].values())
    step = run.next_step(plan2, again, at(20))
    assert step["action"] == "upgrade" and step["ring"] == "ring0"
    halted = run.halt(ledger, "ring0", [{"cell": "dev-1", "condition": "not_ready_nodes", "message": "dev-1: x"}],
                      at(30))
    stop = run.next_step(plan, halted, at(30))
    assert stop["action"] == "stop" and stop["cells"] == ["dev-1"] and "resumes only when" in stop["message"]
    old = dict(halted, halt=dict(halted["halt"]))
    del old["halt"]["cells"]  # a halt written before halts listed their cells
    assert run.halted_cells(old) == ["dev-1"]


def test_a_soak_judges_the_rings_cells_with_a_reading_before_and_never_nothing():
    plan = plan_fleet(fleet())
    assert run.soak_cells(plan, "ring0", ["dev-1", "canary-1", "stage-1"]) == ["canary-1", "dev-1"]
    with pytest.raises(InputError, match="ring ring0: no cell has a reading from before its upgrade"):
        run.soak_cells(plan, "ring0", [])
    with pytest.raises(InputError, match="nope is not a ring"):
        run.soak_cells(plan, "nope", [])
    assert run.readings_file("/o/r/", "dev-1", "v1.36.3", "before") == "/o/r/dev-1-v1.36.3-before.json"


def test_until_ring_holds_the_next_ring_only_once_the_ring_soaked_clean():
    plan = plan_fleet(fleet())
    plan["run"]["until_ring"] = run.until_ring(plan, "ring0")
    ledger = run.check_ledger(None, plan)
    assert run.next_step(plan, ledger, T0)["action"] == "upgrade"  # ring0 itself still runs
    ledger = finish(ledger, ["canary-1", "dev-1"], at(90))
    ledger = run.soak(ledger, "ring0", at(90))
    assert run.next_step(plan, ledger, at(690))["action"] == "soak"  # held only after the last check read clean
    ledger = run.soak(ledger, "ring0", at(690), done=True)
    held = run.next_step(plan, ledger, at(690))
    assert (held["action"], held["ring"], held["cells"]) == ("held", "ring1", [])
    assert "every ring up to ring0 of fleet prod is done and soaked; ring ring1 waits" in held["message"]
    plan["run"]["until_ring"] = None  # the next run, past the approval
    assert run.next_step(plan, ledger, at(700))["cells"] == ["stage-1", "inf-east"]


def test_until_ring_never_hides_a_halt_or_a_failed_cell_and_refuses_an_unknown_ring():
    plan = plan_fleet(fleet())
    plan["run"]["until_ring"] = "ring0"
    ledger = run.record(run.check_ledger(None, plan), "canary-1", "failed", T0, reason="wave exited 2")
    assert run.next_step(plan, ledger, T0)["action"] == "stop"
    assert run.until_ring(plan, None) is None and run.until_ring(plan, "") is None
    with pytest.raises(InputError, match="gpufleet_fleet_until_ring: ring9 is not a ring of fleet prod; give one of "
                                         "ring0, ring1, ring2"):
        run.until_ring(plan, "ring9")


def test_a_ring_soaked_long_ago_is_checked_again_before_the_next_ring_starts():
    plan = plan_fleet(fleet())
    ledger = finish(run.check_ledger(None, plan), ["canary-1", "dev-1"], at(90))
    ledger = run.soak(run.soak(ledger, "ring0", at(90)), "ring0", at(690), done=True)
    assert run.next_step(plan, ledger, at(690))["action"] == "upgrade"  # the same run: promoted on its clean check
    later = at(690 + plan["run"]["halt_check_seconds"] + 1)  # e.g. after a hold and an approval
    step = run.next_step(plan, ledger, later)
    assert (step["action"], step["ring"], step["remaining"], step["start"]) == ("soak", "ring0", 0, False)
    assert "ring ring0 soaked clean %d s ago: a fresh check before ring ring1 starts" % (
        plan["run"]["halt_check_seconds"] + 1) in step["message"]
    ledger = run.soak(ledger, "ring0", later, done=True)  # the check read clean
    assert run.next_step(plan, ledger, later)["cells"] == ["stage-1", "inf-east"]
    moving = run.record(ledger, "stage-1", "done", later, version="v1.36.3")  # ring1 began: no check mid-ring
    assert run.next_step(plan, moving, at(90000))["cells"] == ["inf-east"]


def test_until_ring_is_no_hold_for_rings_already_done_and_is_checked_by_next_step_too():
    plan = plan_fleet(fleet())
    ledger = run.check_ledger(None, plan)
    for ring in plan["rings"]:
        ledger = finish(ledger, ring["cells"], at(100))
        ledger = run.soak(run.soak(ledger, ring["ring"], at(100)), ring["ring"], at(200), done=True)
    plan["run"]["until_ring"] = "ring0"
    assert run.next_step(plan, ledger, at(100000))["action"] == "complete"
    plan["run"]["until_ring"] = "ring7"
    with pytest.raises(InputError, match="gpufleet_fleet_until_ring: ring7 is not a ring of fleet prod"):
        run.next_step(plan, ledger, at(200))


# -- issue 33: a reading that does not hold together is refused (not measured) and halts, naming what ------------------
@pytest.mark.parametrize("edit, why", [
    (lambda r: r.update(not_ready_nodes=-1), "not_ready_nodes is -1, not a whole number 0 or more"),
    (lambda r: r.update(not_ready_nodes=True), "not_ready_nodes is True, not a whole number 0 or more"),
    (lambda r: r.update(not_ready=["gpu-1"]), "not_ready names 1 node(s), not not_ready_nodes 0"),
    (lambda r: r.pop("jobset_restart_counts"), "jobset_restarts comes without jobset_restart_counts"),
    (lambda r: r.pop("jobset_api"), "jobset_api is None, not true or false"),
    (lambda r: r["jobset_restart_counts"]["u1"].update(restarts=3),
     "jobset_restart_counts add up to 3, not jobset_restarts 1"),
    (lambda r: r.update(jobset_restarts=0), "jobset_restart_counts add up to 1, not jobset_restarts 0"),
    (lambda r: r["jobset_restart_counts"]["u1"].update(restarts="NaN"),
     "jobset_restart_counts.u1 (JobSet training/llm).restarts is 'NaN', not a whole number 0 or more"),
    (lambda r: r["jobset_restart_counts"]["u1"].update(restarts=float("inf")),
     "jobset_restart_counts.u1 (JobSet training/llm).restarts is inf, not a whole number 0 or more"),
    (lambda r: r["jobset_restart_counts"]["u1"].update(restarts=[1]),
     "jobset_restart_counts.u1 (JobSet training/llm).restarts is [1], not a whole number 0 or more"),
    (lambda r: r["jobset_restart_counts"].update(u3="x"), "jobset_restart_counts.u3 is 'x', not"),
    (lambda r: r.update(gpu_allocatable_fraction=1.5), "gpu_allocatable_fraction is 1.5, not a fraction"),
    (lambda r: r.update(gpu_allocatable_fraction=float("nan")), "gpu_allocatable_fraction is nan, not a fraction"),
    (lambda r: r.update(apiserver_p99_seconds=-0.1), "apiserver_p99_seconds is -0.1, not a finite number 0 or more"),
    (lambda r: r.update(apiserver_429_per_minute=float("inf")),
     "apiserver_429_per_minute is inf, not a finite number 0 or more"),
    (lambda r: r.update(apiserver_429_per_minute="0"), "apiserver_429_per_minute is '0', not a finite number"),
    (lambda r: r.pop("gpu_allocatable_off_baseline"), "gpu_allocatable_off_baseline is None, not a mapping"),
    (lambda r: r.pop("gpu_allocatable_by_pool"), "gpu_allocatable_by_pool is None, not a mapping"),
    (lambda r: r.pop("gpus_expected"), "gpus_expected is None, not a whole number"),
    (lambda r: r["gpu_allocatable_by_pool"]["h100"].update(allocatable=8, fraction=0.5),
     "gpu_allocatable_by_pool.h100: 8 of 16 GPUs, but its nodes off the baseline account for 0 missing"),
    (lambda r: r["gpu_allocatable_by_pool"]["h100"].update(fraction=0.5),
     "gpu_allocatable_by_pool.h100.fraction is 0.5, not its 16 of 16"),
    (lambda r: r.update(gpu_allocatable_fraction=0.5), "gpu_allocatable_fraction is 0.5, not the lowest"),
    (lambda r: r.update(gpus_allocatable=24), "gpus_allocatable is 24, not the pools' 16"),
])
def test_a_reading_that_does_not_hold_together_is_refused_and_halts_naming_it(edit, why):
    """A readings file is checked where it is read: a count below 0, a per-JobSet breakdown missing or not adding up
    to its total, a number that is not one, GPU breakdowns that do not give the fraction - each is refused, the
    reading is not measured with why, and the fleet halts on it, before or after the upgrade."""
    policy = parse_halt_policy({})
    bad = clean_reading()
    edit(bad)
    for before, after, when in ((clean_reading(), bad, "after"), (bad, clean_reading(), "before")):
        found = run.halts("train-1", before, after, policy, list(fr.API_READINGS))
        assert found, (when, bad)
        assert any("was not measured %s the upgrade (refused: " % when in f["message"] and why in f["message"]
                   for f in found), [f["message"] for f in found]
    assert run.halts("train-1", clean_reading(), clean_reading(), policy, list(fr.API_READINGS)) == []


def test_check_reading_refuses_what_is_not_a_reading_and_keeps_the_rest():
    assert run.check_reading("c", "after", [1]) is None and run.check_reading("c", "after", None) is None
    out = run.check_reading("c", "after", clean_reading(not_ready_nodes=-1, unmeasured="junk"))
    assert out["not_ready_nodes"] is None and out["refused"] == ["not_ready_nodes"]
    assert out["unmeasured"] == {"not_ready_nodes": "refused: not_ready_nodes is -1, not a whole number 0 or more"}
    assert out["jobset_restarts"] == 1 and out["gpu_allocatable_fraction"] == 1.0
    assert run.check_reading("c", "after", out) == out  # read again: the same
    plan = plan_fleet(fleet())
    gaps = run.unread_before(plan, ["dev-1"], {"dev-1": clean_reading(jobset_restart_counts={})})
    assert gaps == {"dev-1": "not measured: jobset_restarts (refused: jobset_restart_counts add up to 0, not "
                             "jobset_restarts 1)"}


def test_a_node_above_its_baseline_halts_even_when_the_fraction_is_whole():
    policy = parse_halt_policy({})
    after = with_gpus(clean_reading(), "9", "8")  # gpu-1 reports 9 of its 8: counted as 8, the fraction whole
    assert after["gpu_allocatable_fraction"] == 1.0
    (found,) = run.halts("train-1", clean_reading(), after, policy, ["gpu_allocatable_fraction"])
    assert found["message"] == ("train-1: gpu_allocatable_fraction is 1 (at least 1), but node gpu-1 offers more "
                                "GPUs than its pool's baseline (gpu-1 9 of 8 in pool h100): a node above its baseline "
                                "is a change (a MIG layout?), never a pass")
    # one below and one above: the fraction falls and both are named
    (both,) = run.halts("train-1", clean_reading(), with_gpus(clean_reading(), "56", "0"), policy,
                        ["gpu_allocatable_fraction"])
    assert both["message"].startswith("train-1: gpu_allocatable_fraction is 0.5 (at least 1) (pool h100 8 of 16) "
                                      "(node gpu-2 0 of 8), but node gpu-1 offers more GPUs")


def test_a_node_breakdown_naming_its_pool_with_a_list_is_refused_not_a_type_error():
    doc = clean_reading()
    doc["gpu_allocatable_off_baseline"] = {"n2": {"pool": ["h100"], "allocatable": 0, "expected": 8, "counted": 0,
                                                  "state": "below"}}
    checked = run.check_reading("c", "after", doc)
    assert checked["gpu_allocatable_fraction"] is None and "gpu_allocatable_fraction" in checked["refused"]
    assert "refused" in checked["unmeasured"]["gpu_allocatable_fraction"]
