"""The fleet model and plan (plugins/module_utils/fleet.py): refusals name the cell and the field; rings, batches
under the caps, per-cell paths and the pools that must move before a hop."""
from __future__ import annotations

import copy
import re

import pytest

from ansible_collections.gpufleet.upgrade.plugins.module_utils.errors import InputError, PolicyError
from ansible_collections.gpufleet.upgrade.plugins.module_utils.fleet import parse_fleet, plan_fleet
from ansible_collections.gpufleet.upgrade.plugins.module_utils.fleet_readings import API_READINGS


def cell(name, ring, kind, gpus=64, cp="v1.35.4", kubelet="v1.35.4", partner=None, **extra):
    doc = {"name": name, "ring": ring, "kind": kind, "region": "eu-west", "gpus": gpus,
           "inventory": "inventories/" + name, "control_plane": cp,
           "pools": [{"name": "h100", "kubelet": kubelet, "nodes": gpus // 8}]}
    if partner:
        doc["dr_partner"] = partner
    doc.update(extra)
    return doc


def fleet(**policy):
    return {
        "name": "prod",
        "policy": dict({"target": "v1.36.3", "max_cells_in_flight": 2, "max_gpu_fraction_in_flight": 0.5,
                        "rings": [{"name": "ring0", "soak_seconds": 600}, {"name": "ring1"},
                                  {"name": "ring2", "soak_seconds": 86400}]}, **policy),
        "cells": [
            cell("canary-1", "ring0", "canary", gpus=16),
            cell("dev-1", "ring0", "dev", gpus=16),
            cell("inf-east", "ring1", "inference", partner="inf-west"),
            cell("inf-west", "ring2", "inference", partner="inf-east"),
            cell("stage-1", "ring1", "staging", gpus=32),
            cell("train-a", "ring2", "training", gpus=128),
            cell("train-b", "ring2", "training", gpus=128),
        ],
    }


def test_rings_in_order_batches_under_the_caps_training_one_at_a_time():
    plan = plan_fleet(fleet())
    assert [r["ring"] for r in plan["rings"]] == ["ring0", "ring1", "ring2"]
    assert plan["gpus"] == 16 + 16 + 64 + 64 + 32 + 128 + 128
    # ring1: staging before inference (kind order), two at a time
    assert plan["rings"][1]["batches"] == [["stage-1", "inf-east"]]
    # ring2: inference first; the training cells never together (and each is 128 of the 448/2 = 224 cap)
    assert plan["rings"][2]["batches"] == [["inf-west", "train-a"], ["train-b"]]
    assert plan["rings"][2]["soak_seconds"] == 86400 and plan["rings"][1]["soak_seconds"] == 3600  # the default
    assert plan["cells"]["train-a"]["control_plane_path"] == ["v1.36.3"]
    assert plan["caps"]["max_gpus_in_flight"] == 224
    assert plan == plan_fleet(fleet())  # deterministic


def test_gpu_cap_splits_a_batch_and_patch_releases_move_faster():
    doc = fleet(max_gpu_fraction_in_flight=0.3, max_cells_in_flight=1, patch_max_cells_in_flight=3)
    for c in doc["cells"]:
        if c["ring"] == "ring0":
            c["control_plane"] = c["pools"][0]["kubelet"] = "v1.36.1"  # a patch to v1.36.3
    plan = plan_fleet(doc)
    assert plan["cells"]["canary-1"]["patch_only"] and not plan["cells"]["stage-1"]["patch_only"]
    assert plan["rings"][0]["batches"] == [["canary-1", "dev-1"]]  # patch-only: up to 3 at once
    assert plan["rings"][1]["batches"] == [["stage-1"], ["inf-east"]]  # minors: one at a time
    # 0.3 x 448 = 134 GPUs: inf-west (64) and train-a (128) no longer fit together
    assert plan["rings"][2]["batches"] == [["inf-west"], ["train-a"], ["train-b"]]


def test_ring_targets_and_cells_already_there():
    doc = fleet(target=None)
    doc["policy"]["rings"] = [{"name": "ring0", "target": "v1.36.3"}, {"name": "ring1", "target": "v1.36.3"},
                              {"name": "ring2", "target": "1.35.4"}]
    plan = plan_fleet(doc)
    assert plan["rings"][2]["target"] == "v1.35.4"
    assert plan["rings"][2]["at_target"] == ["inf-west", "train-a", "train-b"]
    assert plan["rings"][2]["batches"] == []
    assert plan["cells"]["train-a"]["at_target"] and plan["cells"]["train-a"]["node_drains"] == 0


def test_skip_level_training_pool_stays_and_a_lagging_pool_must_move_before_the_next_hop():
    doc = fleet(target="v1.37.2")
    doc["cells"] = [cell("train-a", "ring0", "training", gpus=128, cp="v1.35.4", kubelet="v1.35.4"),
                    cell("train-b", "ring1", "training", gpus=128, cp="v1.35.4", kubelet="v1.32.9"),
                    cell("inf-1", "ring2", "inference", gpus=64)]
    doc["cells"][2]["pools"][0]["skip_level"] = False
    plan = plan_fleet(doc)
    a, b, inf = plan["cells"]["train-a"], plan["cells"]["train-b"], plan["cells"]["inf-1"]
    assert a["control_plane_path"] == ["v1.36", "v1.37.2"]  # one minor at a time; v1.36's release not named
    # training pool at the control plane's minor: one drain, N -> N+2, after the last hop
    assert [(s["from"], s["to"]) for s in a["pools"][0]["steps"]] == [("v1.35", "v1.37.2")]
    assert a["node_upgrade_before_next_hop"] == []
    # kubelets three minors behind: the next hop would make it four - the pool moves first
    assert b["node_upgrade_before_next_hop"] == ["h100"] and plan["node_upgrade_before_next_hop"] == ["train-b"]
    assert b["pools"][0]["steps"][0]["after_hop"] == 0
    # a pool that follows the control plane drains at every hop
    assert len(inf["pools"][0]["steps"]) == 2
    assert inf["node_drains"] == 2 * 8
    doc["policy"]["hop_versions"] = {"1.36": "1.36.3"}
    assert plan_fleet(doc)["cells"]["train-a"]["control_plane_path"] == ["v1.36.3", "v1.37.2"]


@pytest.mark.parametrize("edit, message", [
    (lambda d: d["cells"][0].__setitem__("ring", "ring9"),
     r"cells\[0\] \(canary-1\)\.ring: ring9 is not a ring of policy\.rings \(ring0, ring1, ring2\)"),
    (lambda d: d["cells"][3].__setitem__("ring", "ring1"),
     r"cells \(inf-east\)\.dr_partner: inf-east and inf-west are a DR pair and both in ring ring1; put them in"),
    (lambda d: d["cells"][3].__setitem__("dr_partner", "stage-1"),
     r"cells \(inf-east\)\.dr_partner: inf-west names stage-1 as its partner; a DR pair names each other"),
    (lambda d: d["cells"][2].__setitem__("dr_partner", "nowhere"),
     r"cells \(inf-east\)\.dr_partner: nowhere is not a cell of the fleet"),
    (lambda d: d["cells"].append(cell("dev-1", "ring0", "dev")),
     r"cells\[7\] \(dev-1\)\.name: cell dev-1 is listed twice"),
    (lambda d: d["cells"][1].__setitem__("kind", "batch"), r"value of kind must be one of: canary, dev"),
    (lambda d: d["cells"][1].pop("region"), r"cells\[1\] \(dev-1\)\.region: required, and empty here"),
    (lambda d: d["cells"][1].__setitem__("name", "Dev_1"), r"cells\[1\]\.name: 'Dev_1' is not a DNS label"),
    (lambda d: d["cells"][1].__setitem__("control_plane", "1.35"),
     r"cells\[1\] \(dev-1\)\.control_plane: '1\.35' names a minor"),
    (lambda d: d["cells"][5].__setitem__("gpus", 400),
     r"cells \(train-a\)\.gpus: 400 GPUs is 56% of the fleet's 720"),
    (lambda d: d["policy"].__setitem__("target", None), r"rings\[0\] \(ring0\)\.target: no target for this ring"),
    (lambda d: d["policy"].__setitem__("patch_max_cells_in_flight", 1), r"patch_max_cells_in_flight: 1 is below"),
    (lambda d: d["policy"].__setitem__("max_gpu_fraction_in_flight", 0), r"max_gpu_fraction_in_flight: 0"),
    (lambda d: d["policy"]["rings"].append({"name": "ring0"}), r"rings\[3\]\.name: ring ring0 is listed twice"),
    (lambda d: d["cells"][5].__setitem__("pools", []), r"cells\[5\] \(train-a\)\.pools: a training cell without"),
    (lambda d: d["cells"][5]["pools"][0].__setitem__("kubelet", "latest"), r"cells\[5\] \(train-a\)\.pools\[0\]"),
    (lambda d: d.__setitem__("cells", []), r"gpufleet_fleet\.cells: empty"),
])
def test_bad_fleet_input_is_refused_naming_the_cell_and_the_field(edit, message):
    doc = fleet()
    edit(doc)
    with pytest.raises(InputError, match=message):
        plan_fleet(doc)


@pytest.mark.parametrize("edit, message", [
    # kubelets already four minors behind: out of policy today
    (lambda d: d["cells"][5]["pools"][0].__setitem__("kubelet", "v1.31.2"),
     r"cells \(train-a\): already out of the skew policy: kubelet on pool h100 is v1\.31\.2"),
    # a ring target below the cell's control plane is a downgrade
    (lambda d: d["cells"][0].__setitem__("control_plane", "v1.37.0"),
     r"cells \(canary-1\): target v1\.36\.3 is older"),
])
def test_cells_the_skew_policy_refuses(edit, message):
    doc = fleet()
    edit(doc)
    with pytest.raises(PolicyError, match=message):
        plan_fleet(doc)


def test_the_input_is_not_changed_and_defaults_have_one_home():
    doc = fleet()
    before = copy.deepcopy(doc)
    parsed = parse_fleet(doc)
    assert doc == before
    assert parsed["policy"]["patch_max_cells_in_flight"] == 4  # twice max_cells_in_flight
    assert parsed["policy"]["training_one_at_a_time"] is True


def test_the_documented_example_plans():
    import pathlib

    import yaml

    doc = yaml.safe_load((pathlib.Path(__file__).parents[3] / "docs" / "fleet-example.yml").read_text())
    plan = plan_fleet(doc["gpufleet_fleet"])
    assert [r["batches"] for r in plan["rings"]] == [[["canary-1"]], [["inf-east"]],
                                                     [["inf-west", "train-a"], ["train-b"]]]
    # train-a's kubelets are two minors behind: v1.36 would make it three, still within the policy
    assert plan["cells"]["train-a"]["node_upgrade_before_next_hop"] == []
    assert plan["cells"]["train-a"]["pools"][0]["must_upgrade_before_hop"] == 2


@pytest.mark.parametrize("edit, message", [
    # an intermediate hop must be a release of its own minor (else the path skips or overshoots a minor)
    (lambda d: d["policy"].__setitem__("hop_versions", {"1.36": "v1.37.0"}), r"v1\.37\.0 is not a release of 1\.36"),
    (lambda d: d["policy"].__setitem__("hop_versions", {"banana": "v1.36.3"}), r"key 'banana' is not a minor"),
    (lambda d: d["cells"][0].__setitem__("gpus", float("inf")), r"cells\[0\] \(canary-1\)\.gpus: inf is out of range"),
    (lambda d: d["cells"][0].__setitem__("gpus", True), r"cells\[0\] \(canary-1\)\.gpus: expected a number, got True"),
    (lambda d: d["policy"].__setitem__("max_cells_in_flight", "yes"), r"max_cells_in_flight: 'yes' is not a number"),
    (lambda d: d.__setitem__("cells", [{2: "x"}]), r"cells\[0\]: key 2 is not a name"),
    (lambda d: d.__setitem__("cells", b"x"), r"gpufleet_fleet: argument 'cells' is of type"),
    (lambda d: d["cells"][2].pop("inventory"), r"cells\[2\] \(inf-east\)\.inventory: required, and empty here"),
    (lambda d: d["cells"][2].__setitem__("inventory", " "), r"cells\[2\] \(inf-east\)\.inventory: required"),
    (lambda d: d["cells"][2].__setitem__("gpus", "many"), r"cells\[2\] \(inf-east\)\.gpus: 'many' is not a number"),
    (lambda d: d["cells"][2]["pools"][0].__setitem__("name", ""),
     r"cells\[2\] \(inf-east\)\.pools\[0\]\.name: required, and empty here"),
    (lambda d: d["cells"][2]["pools"][0].__setitem__("name", "default pool"),
     r"pools\[0\]\.name: 'default pool' is not a DNS label"),
    (lambda d: d["cells"][2].__setitem__("control_plane", "v2.0.0"), r"versions of more than one major \(v1, v2\)"),
    (lambda d: d["policy"].__setitem__("halt", {"max_not_ready": 1}), r"gpufleet_fleet\.policy\.halt: .*max_not_ready"),
])
def test_review_findings_are_refused_naming_the_field(edit, message):
    doc = fleet()
    edit(doc)
    with pytest.raises(InputError, match=message):
        plan_fleet(doc)


def test_a_cell_whose_pools_drain_across_a_minor_is_not_patch_only():
    doc = fleet(max_cells_in_flight=1, patch_max_cells_in_flight=4)
    for c in doc["cells"][:2]:
        c["control_plane"] = "v1.36.1"
        c["pools"][0]["kubelet"] = "v1.36.1"
    doc["cells"][1]["pools"][0]["kubelet"] = "v1.34.2"  # dev-1 drains two minors
    plan = plan_fleet(doc)
    assert plan["cells"]["canary-1"]["patch_only"] and not plan["cells"]["dev-1"]["patch_only"]
    assert plan["rings"][0]["batches"] == [["canary-1"], ["dev-1"]]


def test_gpu_cap_is_exact_and_the_plan_does_not_depend_on_input_order():
    doc = fleet(max_gpu_fraction_in_flight=0.29)
    doc["cells"] = [cell("a-1", "ring0", "canary", gpus=29), cell("b-1", "ring1", "dev", gpus=29),
                    cell("c-1", "ring2", "staging", gpus=42)]
    # a-1 and b-1 (29 each) fit the cap of 0.29 x 100 = 29 exactly (in floats 28.999...); c-1 does not
    with pytest.raises(InputError, match=r"cells \(c-1\)\.gpus: 42 GPUs is 42% .* at least 0\.42"):
        plan_fleet(doc)
    doc["cells"][2]["ring"] = "ring1"
    doc["cells"][1]["gpus"] = doc["cells"][2]["gpus"] = 13  # 29 + 13 + 13 = 55 GPUs; 0.29 x 55 = 15.95
    doc["policy"]["max_gpu_fraction_in_flight"] = 0.53  # 0.53 x 55 = 29.15: 29 fits, not 29 + 13
    plan = plan_fleet(doc)
    assert plan["caps"]["max_gpus_in_flight"] == 29 and plan["rings"][1]["batches"] == [["b-1", "c-1"]]
    doc["cells"] = [cell("a-1", "ring0", "canary", gpus=29), cell("b-1", "ring1", "dev", gpus=29),
                    cell("c-1", "ring2", "staging", gpus=42)]
    doc["policy"]["max_gpu_fraction_in_flight"] = 0.42
    assert plan_fleet(doc)["caps"]["max_gpus_in_flight"] == 42
    shuffled = fleet()
    shuffled["cells"] = list(reversed(shuffled["cells"]))
    assert plan_fleet(shuffled)["rings"] == plan_fleet(fleet())["rings"]


def test_fuzzed_fleets_are_planned_or_refused_clearly():
    import random

    rng = random.Random(7)
    junk = [None, "", "x", -1, 0, 1, 2.5, float("nan"), True, [], {}, {"a": 1}, "v1.36.3", "1.36", 10 ** 12]
    for _ in range(400):
        doc = fleet()
        target = rng.choice([doc, doc["policy"], rng.choice(doc["cells"]), rng.choice(doc["policy"]["rings"]),
                             rng.choice(doc["cells"])["pools"][0]])
        key = rng.choice(sorted(target) + ["extra"])
        target[key] = rng.choice(junk)
        try:
            plan = plan_fleet(doc)
        except (InputError, PolicyError) as exc:
            assert exc.msg.startswith("gpufleet_fleet"), exc.msg
            continue
        assert plan["rings"] and all(r["ring"] for r in plan["rings"])


def test_halt_readings_and_run_settings_are_checked():
    plan = plan_fleet(fleet())
    assert plan["cells"]["canary-1"]["halt_readings"] == list(API_READINGS)
    assert plan["run"] == {"halt_check_seconds": 300, "metrics_window_seconds": 30, "cell_timeout_seconds": 21600}
    assert plan["halt_policy"]["max_not_ready_nodes"] == 0
    spec = fleet(halt_check_seconds=15)
    spec["cells"][0]["halt_readings"] = ["jobset_restarts", "not_ready_nodes"]
    plan = plan_fleet(spec)
    assert plan["cells"]["canary-1"]["halt_readings"] == ["not_ready_nodes", "jobset_restarts"]  # canonical order
    assert plan["run"]["halt_check_seconds"] == 15
    for readings, message in ((["nccl_busbw_gbps"], r"nccl_busbw_gbps needs its source: give "
                                                    r"gpufleet_fleet.cells\[0\] \(canary-1\).nccl_hosts"),
                              (["gpu_temperature"], "gpu_temperature cannot be read by the fleet run"),
                              ([], "empty; a cell judged on nothing would always promote")):
        spec = fleet()
        spec["cells"][0]["halt_readings"] = readings
        with pytest.raises(InputError, match=r"cells\[0\] \(canary-1\).halt_readings: " + message):
            plan_fleet(spec)
    with pytest.raises(InputError, match="policy.metrics_window_seconds: 0; give 1 or more seconds"):
        plan_fleet(fleet(metrics_window_seconds=0))


def test_a_cell_that_names_its_nccl_probes_and_inference_endpoint_is_judged_on_them():
    spec = fleet()
    spec["cells"][0]["nccl_hosts"] = ["gpu-a1", "gpu-b1"]
    spec["cells"][0]["inference"] = {"metrics_url": "http://serving.example:9090/metrics",
                                     "histogram": "request_duration_seconds"}
    plan = plan_fleet(spec)
    entry = plan["cells"]["canary-1"]
    assert entry["halt_readings"] == list(API_READINGS) + ["nccl_busbw_gbps", "inference_p99_ms"]
    assert entry["nccl_hosts"] == ["gpu-a1", "gpu-b1"]
    assert entry["inference"]["histogram"] == "request_duration_seconds"
    other = next(c for name, c in plan["cells"].items() if name != "canary-1")
    assert other["halt_readings"] == list(API_READINGS) and other["nccl_hosts"] == [] and other["inference"] is None
    spec["cells"][0]["halt_readings"] = ["inference_p99_ms"]
    assert plan_fleet(spec)["cells"]["canary-1"]["halt_readings"] == ["inference_p99_ms"]
    for field, value, message in (
            ("nccl_hosts", [], r"nccl_hosts: empty"),
            ("nccl_hosts", ["gpu-a1", "gpu-a1"], r"nccl_hosts: gpu-a1 listed twice"),
            ("nccl_hosts", [" "], r"nccl_hosts: ' ' is not a host name"),
            # each is a play's host pattern: one that matches other hosts would run the probe on them
            ("nccl_hosts", ["gpu-*"], r"nccl_hosts: 'gpu-\*' is not a host name \(.*no patterns"),
            ("nccl_hosts", ["!gpu-a1"], r"nccl_hosts: '!gpu-a1' is not a host name"),
            ("nccl_hosts", ["gpu-a1:gpu-b1"], r"nccl_hosts: 'gpu-a1:gpu-b1' is not a host name"),
            ("nccl_hosts", ["all"], r"nccl_hosts: all is Ansible's every-host pattern"),
            ("inference", {"metrics_url": "serving:9090/metrics", "histogram": "h"}, r"inference.metrics_url: "),
            ("inference", {"metrics_url": "http://s/metrics", "histogram": "bad name"}, r"inference.histogram: "),
            ("inference", {"metrics_url": "http://s/metrics", "histogram": "h_bucket"},
             r"inference.histogram: h_bucket; give the histogram.s name without _bucket"),
            ("inference", {"metrics_url": "http://s/metrics"}, r"inference.*histogram"),
            # a secret in the URL is refused, and the message does not repeat it
            ("inference", {"metrics_url": "https://svc:hunter2@s/metrics", "histogram": "h"},
             r"inference.metrics_url: carries credentials \(user:password@\); they would reach the logs(?!.*hunter2)"),
            ("inference", {"metrics_url": "https://token@s/metrics", "histogram": "h"},
             r"inference.metrics_url: carries credentials"),
            # a token in a query string or fragment is refused too, and no refusal repeats the URL
            ("inference", {"metrics_url": "https://s/metrics?token=s3cret", "histogram": "h"},
             r"inference.metrics_url: has a query string or fragment(?!.*s3cret)"),
            ("inference", {"metrics_url": "https://s/metrics#s3cret", "histogram": "h"},
             r"inference.metrics_url: has a query string or fragment(?!.*s3cret)"),
            ("inference", {"metrics_url": "http://s:s3cret/metrics", "histogram": "h"},
             r"inference.metrics_url: not a URL \(its host or port does not parse\)(?!.*s3cret)"),
            ("inference", {"metrics_url": "http://[::1/metrics", "histogram": "h"},
             r"inference.metrics_url: not a URL"),
            ("inference", {"metrics_url": "http://s/metrics s3cret", "histogram": "h"},
             r"inference.metrics_url: not an http\(s\) endpoint(?!.*s3cret)"),
            # the whole URL is checked (a newline after it, parameters in the path where tokens may go)
            ("inference", {"metrics_url": "http://s/metrics\n", "histogram": "h"},
             r"inference.metrics_url: not an http\(s\) endpoint"),
            ("inference", {"metrics_url": "http://s/metrics;token=s3cret", "histogram": "h"},
             r"inference.metrics_url: not an http\(s\) endpoint(?!.*s3cret)"),
            ("inference", {"metrics_url": "http://s/metrics&token=s3cret", "histogram": "h"},
             r"inference.metrics_url: not an http\(s\) endpoint(?!.*s3cret)"),
            ("inference", {"metrics_url": "ftp://s/metrics", "histogram": "h"},
             r"inference.metrics_url: not an http\(s\) endpoint"),
            ("inference", "http://s/metrics", r"?: argument 'inference' is of type str")):
        bad = fleet()
        bad["cells"][0][field] = value
        with pytest.raises(InputError, match=r"cells\[0\] \(canary-1\)." + message):
            plan_fleet(bad)


# -- issue 33: a threshold that switches its halt off needs a reason; names are whole ASCII DNS labels ----------------
@pytest.mark.parametrize("key, value, shown, why", [
    ("min_gpu_allocatable_fraction", 0, "0", "a fraction is never below 0"),
    ("min_gpu_allocatable_fraction", -0.0, "0", "a fraction is never below 0"),
    ("max_nccl_regression", 1, "1", "a bandwidth never falls by 100 % or more"),
    ("max_nccl_regression", 5.0, "5", "a bandwidth never falls by 100 % or more"),
    ("apiserver_p99_floor_seconds", 60, "60",
     "the apiserver's latency histogram ends at 60 s: no p99 is read above it"),
    ("max_latency_regression", 100, "100", "a p99 100 times its reading before is past any real regression"),
    ("max_inference_p99_regression", 1e9, "1000000000", "a p99 100 times its reading before is past any real "
                                                         "regression"),
    ("max_429_per_minute_increase", 100000, "100000", "100000 more 429s a minute is past any real rise"),
    ("max_jobset_restarts_increase", 1000, "1000", "1000 more restarts is past any real rise"),
    ("max_not_ready_nodes", 2, "2", "at least cell canary-1's 2 nodes: all of them could be NotReady"),
])
def test_a_threshold_that_switches_its_halt_off_is_refused_without_a_reason(key, value, shown, why):
    doc = fleet(halt={key: value})
    with pytest.raises(InputError, match=r"gpufleet_fleet.policy.halt.%s: %s switches its halt off \(%s\); give a "
                                         r"threshold that can halt, or say why in policy.halt.disabled.%s" % (
                                             key, shown, re.escape(why), key)):
        plan_fleet(doc)
    doc = fleet(halt={key: value, "disabled": {key: "CHG-1234: the H100 pool is being repartitioned to MIG"}})
    plan = plan_fleet(doc)
    assert plan["disabled_halts"] == [{"threshold": key, "value": value, "reason": "CHG-1234: the H100 pool is being "
                                                                                   "repartitioned to MIG"}]
    assert plan["halt_policy"]["disabled"] == {key: "CHG-1234: the H100 pool is being repartitioned to MIG"}


@pytest.mark.parametrize("halt, message", [
    ({"disabled": {"max_nccl_regression": "not needed"}},
     r"policy.halt.disabled.max_nccl_regression: its threshold 0.1 does not switch the halt off; remove the entry"),
    ({"max_nccl_regression": 1, "disabled": {"max_nccl_regression": " "}},
     r"policy.halt.disabled.max_nccl_regression: give the reason as a line of text"),
    ({"max_nccl_regression": 1, "disabled": {"max_nccl_regression": "a\nb"}},
     r"policy.halt.disabled.max_nccl_regression: give the reason as a line of text"),
    ({"max_nccl_regression": 1, "disabled": {"max_nccl_regression": 3}},
     r"policy.halt.disabled.max_nccl_regression: give the reason as a line of text"),
    ({"disabled": {"max_errors": "x"}}, r"policy.halt.disabled: max_errors is not a threshold"),
    ({"disabled": ["max_nccl_regression"]}, r"policy.halt.disabled: expected a mapping of threshold to reason"),
    ({"min_gpu_allocatable_fraction": 1.5}, r"policy.halt.min_gpu_allocatable_fraction: 1.5 is above 1"),
])
def test_a_disabled_halts_reason_is_checked(halt, message):
    with pytest.raises(InputError, match=message):
        plan_fleet(fleet(halt=halt))


def test_max_not_ready_nodes_is_judged_against_each_cell_that_reads_it():
    plan = plan_fleet(fleet(halt={"max_not_ready_nodes": 1}))  # under every cell's nodes (canary-1 has 2)
    assert plan["disabled_halts"] == []
    doc = fleet(halt={"max_not_ready_nodes": 2})
    for c in doc["cells"]:
        if c["name"] in ("canary-1", "dev-1"):
            c["halt_readings"] = ["jobset_restarts"]  # they do not read it
    assert plan_fleet(doc)["halt_policy"]["max_not_ready_nodes"] == 2
    doc["policy"]["halt"]["disabled"] = {"max_not_ready_nodes": "x"}
    with pytest.raises(InputError, match=r"disabled.max_not_ready_nodes: its threshold 2 does not switch the halt off"):
        plan_fleet(doc)


@pytest.mark.parametrize("edit, message", [
    (lambda d: d.__setitem__("name", "prod\n"), r"gpufleet_fleet.name: 'prod\\n' is not a DNS label"),
    (lambda d: d["cells"][1].__setitem__("name", "dev-1\n"), r"cells\[1\]\.name: 'dev-1\\n' is not a DNS label"),
    (lambda d: d["cells"][1].__setitem__("name", "\uff44\uff45\uff56-1"),
     r"cells\[1\]\.name: '\uff44\uff45\uff56-1' is not a DNS label"),
    (lambda d: d["cells"][1].__setitem__("name", "dev-\u0661"), r"cells\[1\]\.name: 'dev-\u0661' is not a DNS label"),
    (lambda d: d["policy"]["rings"][0].__setitem__("name", "ring0\n"), r"rings\[0\]\.name: 'ring0\\n' is not a DNS"),
    (lambda d: d["cells"][2]["pools"][0].__setitem__("name", "h100\n"), r"pools\[0\]\.name: 'h100\\n' is not a DNS"),
    (lambda d: d["cells"][0].__setitem__("nccl_hosts", ["gpu-a1\n"]), r"nccl_hosts: 'gpu-a1\\n' is not a host name"),
    (lambda d: d["cells"][0].__setitem__("nccl_hosts", ["gpu-\uff411"]),
     r"nccl_hosts: 'gpu-\uff411' is not a host name"),
    (lambda d: d["cells"][0].__setitem__("inference", {"metrics_url": "http://s/metrics", "histogram": "h\n"}),
     r"inference.histogram: 'h\\n' is not a Prometheus metric name"),
    (lambda d: d["policy"].__setitem__("hop_versions", {"1.36\n": "v1.36.3"}), r"key '1.36\\n' is not a minor"),
    (lambda d: d["policy"].__setitem__("hop_versions", {"1.\uff136": "v1.36.3"}), r"key '1.\uff136' is not a minor"),
    (lambda d: d["policy"].__setitem__("hop_versions", {"1.36": "v1.3\uff16.3"}),
     r"hop_versions\[1.36\]: 'v1.3\uff16.3' is not ASCII"),
    (lambda d: d["policy"].__setitem__("target", "v1.3\uff16.3"), r"target: 'v1.3\uff16.3' is not ASCII"),
    (lambda d: d["cells"][0].__setitem__("control_plane", "v1.3\uff15.4"),
     r"control_plane: 'v1.3\uff15.4' is not ASCII"),
    (lambda d: d["cells"][0]["pools"][0].__setitem__("kubelet", "v1.3\uff15.4"),
     r"kubelet: 'v1.3\uff15.4' is not ASCII"),
    (lambda d: d["cells"][0].__setitem__("gpus", "\uff11\uff16"),
     r"cells\[0\] \(canary-1\)\.gpus: '\uff11\uff16' is not a number"),
    (lambda d: d["cells"][0].__setitem__("gpus", "1_6"), r"cells\[0\] \(canary-1\)\.gpus: '1_6' is not a number"),
    (lambda d: d["policy"].__setitem__("max_cells_in_flight", "2\n"), r"max_cells_in_flight: '2\\n' is not a number"),
])
def test_names_and_numbers_are_whole_and_ascii(edit, message):
    doc = fleet()
    edit(doc)
    with pytest.raises(InputError, match=message):
        plan_fleet(doc)


def test_a_threshold_too_large_for_a_number_is_refused_not_an_overflow():
    from ansible_collections.gpufleet.upgrade.plugins.module_utils.fleet import parse_halt_policy
    with pytest.raises(InputError, match="max_jobset_restarts_increase: 1000.* is not a number in range"):
        parse_halt_policy({"max_jobset_restarts_increase": 10 ** 400})
