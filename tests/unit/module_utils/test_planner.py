from __future__ import annotations

import math
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ansible_collections.gpufleet.upgrade.plugins.module_utils.errors import InputError, PlanError
from ansible_collections.gpufleet.upgrade.plugins.module_utils.planner import (
    Caps, parse_caps, parse_nodes, plan_waves)


def cell(racks=4, per_rack=4, gpus=8, dr=None, unsched=()):
    nodes = [{"name": "cp-%d" % i, "role": "control-plane", "gpus": 0, "pool": "cp"} for i in (3, 1, 2)]
    for r in range(racks):
        for n in range(per_rack):
            name = "gpu-%s%d" % ("abcdefghijklmnop"[r], n + 1)
            nodes.append({"name": name, "pool": "h100-train", "failure_domain": "rs-%d" % r, "gpus": gpus,
                          "gpu_type": "H100", "dr_pair": (dr or {}).get(r, ""),
                          "unschedulable_before": name in unsched})
    return nodes


def test_order_control_plane_canary_domains():
    plan = plan_waves(parse_nodes(cell()), Caps(max_gpu_fraction=0.25))
    kinds = [w["kind"] for w in plan["waves"]]
    assert kinds[:3] == ["control-plane"] * 3 and [w["nodes"] for w in plan["waves"][:3]] == [["cp-1"], ["cp-2"],
                                                                                           ["cp-3"]]
    assert kinds[3] == "canary" and plan["waves"][3]["nodes"] == ["gpu-a1"]
    assert kinds[4:] == ["domain"] * 4
    # rack 0 minus its canary, then one whole rack per wave: 4 racks x 32 GPUs = 128, cap 25% = 32
    assert [w["failure_domains"] for w in plan["waves"][4:]] == [["rs-0"], ["rs-1"], ["rs-2"], ["rs-3"]]
    assert plan["cap_gpus"] == 32 and plan["total_gpus"] == 128
    assert all(w["gpus"] <= 32 for w in plan["waves"])


def test_small_domains_share_a_wave():
    plan = plan_waves(parse_nodes(cell(racks=8, per_rack=1)), Caps(max_gpu_fraction=0.25, canaries_per_gpu_type=0))
    domain_waves = [w for w in plan["waves"] if w["kind"] == "domain"]
    assert [w["failure_domains"] for w in domain_waves] == [["rs-0", "rs-1"], ["rs-2", "rs-3"], ["rs-4", "rs-5"],
                                                            ["rs-6", "rs-7"]]


def test_dr_pairs_never_together():
    plan = plan_waves(parse_nodes(cell(racks=8, per_rack=1, dr={0: "inf", 1: "inf"})),
                      Caps(max_gpu_fraction=0.5, canaries_per_gpu_type=0))
    for wave in plan["waves"]:
        assert not {"rs-0", "rs-1"} <= set(wave["failure_domains"])
    assert plan["dr_pairs"] == {"inf": ["rs-0", "rs-1"]}


def test_node_cap():
    plan = plan_waves(parse_nodes(cell(racks=4, per_rack=2)), Caps(max_gpu_fraction=1.0, max_nodes_per_wave=3,
                                                                   canaries_per_gpu_type=0))
    assert all(len(w["nodes"]) <= 3 for w in plan["waves"])


def test_domain_over_cap_is_an_error_with_the_fix():
    with pytest.raises(PlanError, match="failure domain rs-0 has 32 GPUs, more than the cap of 16 GPUs.*raise "
                                        "caps.max_gpu_fraction or split the domain"):
        plan_waves(parse_nodes(cell()), Caps(max_gpu_fraction=0.125, canaries_per_gpu_type=0))


def test_unschedulable_nodes_are_not_canaries_and_stay_cordoned():
    plan = plan_waves(parse_nodes(cell(unsched={"gpu-a1"})), Caps())
    assert plan["canaries"] == ["gpu-a2"] and plan["keep_cordoned"] == ["gpu-a1"]
    nodes = cell(unsched={"gpu-a1"})
    nodes[3]["canary"] = True
    with pytest.raises(PlanError, match="gpu-a1 were unschedulable before"):
        plan_waves(parse_nodes(nodes), Caps())


def test_rings_in_order():
    nodes = cell(racks=2, per_rack=1)
    for n in cell(racks=2, per_rack=1)[3:]:
        nodes.append(dict(n, name=n["name"] + "-r1", failure_domain=n["failure_domain"] + "-r1", ring=1))
    plan = plan_waves(parse_nodes(nodes), Caps(max_gpu_fraction=1.0, canaries_per_gpu_type=0))
    rings = [w["ring"] for w in plan["waves"] if w["kind"] == "domain"]
    assert rings == sorted(rings) and set(rings) == {0, 1}
    assert all(len({n.endswith("-r1") for n in w["nodes"]}) == 1 for w in plan["waves"])


@pytest.mark.parametrize("nodes,message", [
    ([{"pool": "x"}], r"nodes\[0\].name: required"),
    ([{"name": "a", "failure_domain": "d"}, {"name": "a", "failure_domain": "d"}], "duplicate node name"),
    ([{"name": "a", "gpus": -1, "failure_domain": "d"}], r"nodes\[0\] \(a\).gpus"),
    ([{"name": "a", "gpus": 8}], "failure_domain: required for workers"),
    ([{"name": "a", "role": "master"}], "role: 'master' is not one of"),
    ([{"name": "a", "failure_domain": "d", "canary": "yes"}], "canary: expected a boolean"),
])
def test_node_errors(nodes, message):
    with pytest.raises(InputError, match=message):
        parse_nodes(nodes)


@pytest.mark.parametrize("caps,message", [
    ({"max_gpu_fraction": 0}, "max_gpu_fraction: expected a fraction"),
    ({"max_gpu_fraction": "25%"}, "max_gpu_fraction"),
    ({"max_nodes_per_wave": -1}, "max_nodes_per_wave"),
    ({"maxGpuFraction": 0.2}, "unknown field"),
])
def test_cap_errors(caps, message):
    with pytest.raises(InputError, match=message):
        parse_caps(caps)


def refused(err, total, cap, fraction, max_nodes, domains, too_big):
    """A refusal is one of the planner's three kinds, each with its own numbers right; no other reason."""
    if total and cap == 0:
        assert err.msg == "caps.max_gpu_fraction %.3f of %d GPUs rounds down to 0 GPUs in flight; raise it" % (
            fraction, total)
        return
    by_gpus = re.fullmatch(r"failure domain (\S+) has (\d+) GPUs, more than the cap of (\d+) GPUs in flight "
                           r"\(max_gpu_fraction ([0-9.]+)\); raise caps.max_gpu_fraction or split the domain", err.msg)
    by_nodes = re.fullmatch(r"failure domain (\S+) has (\d+) nodes, more than max_nodes_per_wave (\d+); raise the "
                            r"cap or split the domain", err.msg)
    assert by_gpus or by_nodes, "a refusal of an unknown kind: %s" % err.msg
    assert too_big, "refused although every failure domain fits under both caps: %s" % err.msg
    domain = (by_gpus or by_nodes).group(1)
    assert err.details["failure_domain"] == domain and domain in too_big, err.msg
    members = domains[domain]
    if by_gpus:  # the domain's nodes left after its canary (if any) are still over the cap
        assert int(by_gpus.group(3)) == cap and float(by_gpus.group(4)) == fraction
        assert cap < int(by_gpus.group(2)) <= sum(m["gpus"] for m in members)
    else:
        assert int(by_nodes.group(3)) == max_nodes < int(by_nodes.group(2)) <= len(members)


node_strategy = st.fixed_dictionaries({
    "domain": st.integers(0, 11), "gpus": st.sampled_from([0, 4, 8]), "dr": st.sampled_from(["", "", "p1", "p2"]),
    "ring": st.integers(0, 1), "type": st.sampled_from(["H100", "A100"]), "unsched": st.booleans()})


@settings(max_examples=150, deadline=None)
@given(st.lists(node_strategy, min_size=1, max_size=60), st.sampled_from([0.25, 0.5, 1.0]),
       st.sampled_from([0, 4, 16]))
def test_planner_invariants(specs, fraction, max_nodes):
    nodes = []
    for i, s in enumerate(specs):
        nodes.append({"name": "n%03d" % i, "pool": s["type"], "failure_domain": "d%02d-r%d" % (s["domain"], s["ring"]),
                      "gpus": s["gpus"], "ring": s["ring"], "dr_pair": s["dr"], "gpu_type": s["type"],
                      "unschedulable_before": s["unsched"]})
    nodes.append({"name": "cp-1", "role": "control-plane"})
    caps = Caps(max_gpu_fraction=fraction, max_nodes_per_wave=max_nodes)
    # The refusals, worked out here from the nodes alone (not from the planner's own units): a whole failure domain
    # fits under both caps, or the plan may be refused naming a domain that does not.
    total = sum(s["gpus"] for s in specs)
    cap = math.floor(total * fraction + 1e-9)
    domains = {}
    for n in nodes[:-1]:
        domains.setdefault(n["failure_domain"], []).append(n)
    too_big = {d for d, members in domains.items() if sum(m["gpus"] for m in members) > cap
               or (max_nodes and len(members) > max_nodes)}
    try:
        plan = plan_waves(parse_nodes(nodes), caps)
    except PlanError as err:
        refused(err, total, cap, fraction, max_nodes, domains, too_big)
        return
    assert not (total and cap == 0), "a cap of 0 GPUs in flight was planned around"
    waves = plan["waves"]
    by_name = {n["name"]: n for n in nodes}
    planned = [n for w in waves for n in w["nodes"]]
    assert sorted(planned) == sorted(by_name)  # every node exactly once
    assert waves[0]["kind"] == "control-plane"
    kinds = [w["kind"] for w in waves]
    assert kinds == sorted(kinds, key=["control-plane", "canary", "domain"].index)  # cp, then canaries, then domains
    for w in waves:
        assert w["gpus"] <= max(plan["cap_gpus"], 0) or w["kind"] == "control-plane"
        if max_nodes:
            assert len(w["nodes"]) <= max_nodes
        pairs = {}
        for name in w["nodes"]:
            n = by_name[name]
            if n.get("dr_pair"):
                pairs.setdefault(n["dr_pair"], set()).add(n["failure_domain"])
        assert all(len(d) == 1 for d in pairs.values()), "both halves of a DR pair in wave %d" % w["index"]
    # whole failure domains: outside canaries, each domain's nodes are in one wave
    canaries = set(plan["canaries"])
    domain_wave = {}
    for w in waves:
        if w["kind"] == "domain":
            for name in w["nodes"]:
                d = by_name[name]["failure_domain"]
                assert domain_wave.setdefault(d, w["index"]) == w["index"]
    assert not canaries & set(plan["keep_cordoned"])
    # deterministic, and independent of input order
    assert plan_waves(parse_nodes(list(reversed(nodes))), caps) == plan
