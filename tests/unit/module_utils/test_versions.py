from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ansible_collections.gpufleet.upgrade.plugins.module_utils.errors import InputError, PolicyError
from ansible_collections.gpufleet.upgrade.plugins.module_utils.versions import (
    KubeVersion, PoolPolicy, next_hop_breaches, parse_observed, parse_pool_policies, parse_version, plan_cycle_hop,
    plan_upgrade, skew_violations)


@pytest.mark.parametrize("text,expected", [
    ("v1.34.2", (1, 34, 2, "")),
    ("1.34", (1, 34, None, "")),
    ("v1.35.0-alpha.1", (1, 35, 0, "alpha.1")),
    ("v1.34.0-rc.0", (1, 34, 0, "rc.0")),
    ("v1.34.2-eks-113cf36", (1, 34, 2, "eks-113cf36")),
    ("v1.34.2+k3s1", (1, 34, 2, "")),
    ("1.34.2-1.1", (1, 34, 2, "1.1")),  # Debian package version
])
def test_parse_version(text, expected):
    v = parse_version(text)
    assert (v.major, v.minor, v.patch, v.pre) == expected


@pytest.mark.parametrize("bad", ["", "latest", "v1", "1.x.2", None, 134, "v1.34.2.1"])
def test_parse_version_rejects_with_field_name(bad):
    with pytest.raises(InputError) as err:
        parse_version(bad, "target")
    assert err.value.msg.startswith("target:")


def test_ordering_prereleases_before_release():
    ordered = ["v1.34.0-alpha.1", "v1.34.0-alpha.2", "v1.34.0-beta.0", "v1.34.0-rc.1", "v1.34.0", "v1.34.1", "v1.35.0"]
    parsed = [parse_version(v) for v in ordered]
    assert sorted(reversed(parsed)) == parsed


@given(st.integers(0, 40), st.integers(0, 40), st.integers(0, 30), st.integers(0, 30))
def test_ordering_matches_tuples(m1, m2, p1, p2):
    a, b = parse_version("v1.%d.%d" % (m1, p1)), parse_version("v1.%d.%d" % (m2, p2))
    assert (a < b) == ((m1, p1) < (m2, p2))
    assert a.minors_above(b) == m1 - m2


def obs(*items):
    out = []
    for item in items:
        comp, node, version = item[:3]
        d = {"component": comp, "node": node, "version": version}
        if len(item) > 3:
            d["pool"] = item[3]
        out.append(d)
    return parse_observed(out)


HEALTHY = obs(("kube-apiserver", "cp-1", "v1.33.5"), ("kube-apiserver", "cp-2", "v1.33.5"),
              ("kube-controller-manager", "cp-1", "v1.33.5"), ("kube-scheduler", "cp-1", "v1.33.5"),
              ("kubelet", "cp-1", "v1.33.5", "control-plane"), ("kubelet", "gpu-a1", "v1.31.2", "h100-train"),
              ("kube-proxy", "gpu-a1", "v1.31.2"), ("kubectl", "", "v1.34.0"))


def test_healthy_cluster_has_no_violations():
    assert skew_violations(HEALTHY) == []


@pytest.mark.parametrize("extra,component,rule_part", [
    (("kubelet", "gpu-x", "v1.34.0"), "kubelet", "never be newer"),
    (("kubelet", "gpu-x", "v1.29.9"), "kubelet", "at most 3 minors older"),
    (("kubelet", "gpu-old", "v1.24.9"), "kubelet", "at most 2 minors older"),
    (("kube-controller-manager", "cp-2", "v1.34.0"), "kube-controller-manager", "must not be newer"),
    (("kube-scheduler", "cp-2", "v1.31.0"), "kube-scheduler", "at most 1 minor older"),
    (("kube-proxy", "gpu-y", "v1.34.1"), "kube-proxy", "never be newer"),
    (("kube-proxy", "gpu-y", "v1.29.0"), "kube-proxy", "at most 3 minors older"),
    (("kubectl", "", "v1.31.0"), "kubectl", "within 1 minor"),
])
def test_each_skew_rule(extra, component, rule_part):
    observed = list(HEALTHY) + list(obs(extra))
    found = skew_violations(observed)
    assert [v.component for v in found] == [component]
    assert rule_part in found[0].rule
    assert found[0].fix


def test_a_control_plane_kubeadm_is_moving_host_by_host_is_within_the_policy():
    # cp-1 moved with kubeadm (its apiserver, controller manager, scheduler and kubelet), cp-2 not yet: each node's
    # components talk to their own host's apiserver, so a run halted here resumes
    moving = obs(("kube-apiserver", "cp-1", "v1.34.1"), ("kube-apiserver", "cp-2", "v1.33.5"),
                 ("kube-controller-manager", "cp-1", "v1.34.1"), ("kube-scheduler", "cp-1", "v1.34.1"),
                 ("kube-controller-manager", "cp-2", "v1.33.5"), ("kubelet", "cp-1", "v1.34.1", "control-plane"),
                 ("kubelet", "cp-2", "v1.33.5", "control-plane"), ("kubelet", "gpu-a1", "v1.33.5", "h100-train"))
    assert skew_violations(moving) == []
    assert plan_upgrade(moving, parse_version("v1.34.1"))["control_plane_mixed"] is True
    # what would talk to an older apiserver is still refused: a worker's kubelet, a component ahead of its own host
    ahead = list(moving) + list(obs(("kubelet", "gpu-b1", "v1.34.1"), ("kube-scheduler", "cp-2", "v1.34.1")))
    assert [(v.component, v.node, v.reference) for v in skew_violations(ahead)] == [
        ("kubelet", "gpu-b1", "oldest apiserver v1.33.5 on cp-2"),
        ("kube-scheduler", "cp-2", "its own apiserver v1.33.5 on cp-2")]
    with pytest.raises(PolicyError, match="kubelet v1.34.1 on gpu-b1 is newer than the apiserver"):
        plan_upgrade(ahead, parse_version("v1.34.1"))
    # a cloud-controller-manager reaches any apiserver (in-cluster config); a control-plane kubelet ahead of its own
    # apiserver's minor, or two minors above the oldest, is no state kubeadm's procedure leaves
    for extra, where in ((("cloud-controller-manager", "cp-1", "v1.34.1"), "oldest apiserver v1.33.5 on cp-2"),
                         (("kubelet", "cp-3", "v1.34.0"), "oldest apiserver v1.33.5 on cp-2")):
        found = skew_violations(list(moving) + list(obs(("kube-apiserver", "cp-3", "v1.33.9"), extra)))
        assert [(v.component, v.node, v.reference) for v in found] == [(extra[0], extra[1], where)]
    far = obs(("kube-apiserver", "cp-1", "v1.35.0"), ("kube-apiserver", "cp-2", "v1.33.5"),
              ("kubelet", "cp-1", "v1.35.0"))
    assert ("kubelet", "cp-1", "oldest apiserver v1.33.5 on cp-2") in [
        (v.component, v.node, v.reference) for v in skew_violations(far)]


def test_ha_apiservers_more_than_one_minor_apart():
    observed = obs(("kube-apiserver", "cp-1", "v1.33.5"), ("kube-apiserver", "cp-2", "v1.35.0"))
    found = skew_violations(observed)
    assert [(v.component, v.node) for v in found] == [("kube-apiserver", "cp-2")]
    assert "within 1 minor" in found[0].rule and "cp-1" in found[0].fix


def test_kube_proxy_within_3_of_its_kubelet():
    observed = obs(("kube-apiserver", "cp-1", "v1.30.0"), ("kubelet", "n1", "v1.30.0"),
                   ("kube-proxy", "n1", "v1.26.0"))
    rules = [v.rule for v in skew_violations(observed)]
    assert "kube-proxy must be within 3 minors of its kubelet" in rules


def test_no_apiserver_is_an_input_error():
    with pytest.raises(InputError, match="no kube-apiserver"):
        skew_violations(obs(("kubelet", "n1", "v1.30.0")))


def test_parse_observed_errors_name_the_item():
    with pytest.raises(InputError, match=r"components\[1\].component: 'kubelett'"):
        parse_observed([{"component": "kubelet", "node": "a", "version": "v1.3.0"},
                        {"component": "kubelett", "node": "b", "version": "v1.3.0"}])
    with pytest.raises(InputError, match=r"components\[0\].node: required"):
        parse_observed([{"component": "kubelet", "version": "v1.30.0"}])


def test_single_minor_plan():
    plan = plan_upgrade(HEALTHY, parse_version("v1.34.2"))
    assert plan["control_plane_path"] == ["v1.34.2"]
    pools = {p["pool"]: p for p in plan["pools"]}
    assert pools["h100-train"]["steps"][0]["from"] == "v1.31" and pools["h100-train"]["steps"][0]["to"] == "v1.34.2"
    assert pools["h100-train"]["steps"][0]["minors"] == 3
    # kubelet 1.31 with the control plane at 1.33: fine at 1.34 (hop 1), out of policy at 1.35 (hop 2)
    assert pools["h100-train"]["must_upgrade_before_hop"] == 2
    assert pools["h100-train"]["last_safe_control_plane"] == "v1.34"


def test_skip_minor_refused_with_path_and_advice():
    with pytest.raises(PolicyError) as err:
        plan_upgrade(HEALTHY, parse_version("v1.35.1"))
    assert "never skips a minor" in err.value.msg
    assert "Upgrade to v1.34 first" in err.value.msg
    assert "v1.34 -> v1.35" in err.value.msg


def test_downgrade_refused():
    with pytest.raises(PolicyError, match="downgrades are refused"):
        plan_upgrade(HEALTHY, parse_version("v1.33.1"))


def test_kubelet_newer_than_apiserver_refused():
    observed = list(HEALTHY) + list(obs(("kubelet", "gpu-z", "v1.34.1", "h100-train")))
    with pytest.raises(PolicyError, match="kubelet v1.34.1 on gpu-z is newer than the apiserver"):
        plan_upgrade(observed, parse_version("v1.34.2"))


def test_target_must_be_a_release():
    with pytest.raises(InputError, match="names a minor"):
        plan_upgrade(HEALTHY, parse_version("1.34"))


def test_three_hop_skip_level_training_pool_one_drain():
    observed = obs(("kube-apiserver", "cp-1", "v1.33.5"), ("kubelet", "cp-1", "v1.33.5", "control-plane"),
                   ("kubelet", "gpu-a1", "v1.33.5", "train"), ("kubelet", "inf-1", "v1.33.5", "inference"),
                   ("kubelet", "old-1", "v1.32.9", "legacy"))
    plan = plan_upgrade(observed, parse_version("v1.36.1"), allow_multi_hop=True,
                        hop_versions={"1.34": "v1.34.3"},
                        pools={"inference": PoolPolicy(skip_level=False), "control-plane": PoolPolicy(False)})
    assert plan["control_plane_path"] == ["v1.34.3", "v1.35", "v1.36.1"]
    pools = {p["pool"]: p for p in plan["pools"]}
    train = pools["train"]
    assert [(s["after_hop"], s["from"], s["to"]) for s in train["steps"]] == [(3, "v1.33", "v1.36.1")]
    inference = pools["inference"]
    assert [(s["after_hop"], s["to"]) for s in inference["steps"]] == [(1, "v1.34.3"), (2, "v1.35"), (3, "v1.36.1")]
    assert inference["must_upgrade_before_hop"] == 2  # it follows the control plane: one minor behind at most
    assert inference["last_safe_control_plane"] == "v1.34"
    legacy = pools["legacy"]
    # 1.32 kubelets would be 4 behind at 1.36: must move before hop 3, to what the control plane runs after hop 2
    assert [(s["after_hop"], s["from"], s["to"]) for s in legacy["steps"]] == [(2, "v1.32", "v1.35"),
                                                                              (3, "v1.35", "v1.36.1")]
    assert legacy["must_upgrade_before_hop"] == 3
    assert plan["node_drains"] == 1 + 3 + 2 + 3


def test_a_skip_level_cycle_run_is_the_next_hop_and_its_holding_pools_may_wait():
    observed = obs(("kube-apiserver", "cp-1", "v1.35.4"), ("kubelet", "cp-1", "v1.35.4", "control-plane"),
                   ("kubelet", "gpu-a1", "v1.35.4", "train"), ("kubelet", "gpu-b1", "v1.35.4", "serve"))
    policies = {"serve": PoolPolicy(skip_level=False), "control-plane": PoolPolicy(False)}
    plan = plan_cycle_hop(observed, parse_version("v1.36.3"), parse_version("v1.37.2"), ["train"], pools=policies)
    assert plan["control_plane_path"] == ["v1.36.3", "v1.37.2"] and (plan["hop"], plan["hops"]) == (1, 2)
    assert plan["holding"] == ["train"] and plan["moving"] == ["control-plane", "serve"]
    train = next(p for p in plan["pools"] if p["pool"] == "train")
    assert [(s["after_hop"], s["from"], s["to"]) for s in train["steps"]] == [(2, "v1.35", "v1.37.2")]
    # A run that would skip the control plane's next minor is refused, naming it
    with pytest.raises(PolicyError, match=r"not the next control-plane hop .* the next hop is v1.36\."):
        plan_cycle_hop(observed, parse_version("v1.37.2"), parse_version("v1.38.1"), ["train"], pools=policies)


def test_a_skip_level_hop_whose_control_plane_finished_can_be_run_again():
    observed = obs(("kube-apiserver", "cp-1", "v1.36.3"), ("kubelet", "cp-1", "v1.36.3", "control-plane"),
                   ("kubelet", "gpu-a1", "v1.35.4", "train"), ("kubelet", "gpu-b1", "v1.35.4", "serve"))
    plan = plan_cycle_hop(observed, parse_version("v1.36.3"), parse_version("v1.37.2"), ["train"],
                          pools={"serve": PoolPolicy(skip_level=False), "control-plane": PoolPolicy(False)})
    assert plan["resumed"] and plan["holding"] == ["train"] and plan["control_plane_path"] == ["v1.37.2"]
    fresh = plan_cycle_hop(obs(("kube-apiserver", "cp-1", "v1.35.4"), ("kubelet", "gpu-a1", "v1.35.4", "train")),
                           parse_version("v1.36.3"), parse_version("v1.37.2"), ["train"])
    assert not fresh["resumed"] and fresh["hops"] == 2


def test_a_holding_pool_that_would_fall_out_of_the_skew_policy_is_refused():
    observed = obs(("kube-apiserver", "cp-1", "v1.35.4"), ("kubelet", "gpu-a1", "v1.34.2", "train"))
    with pytest.raises(PolicyError, match=r"train \(kubelet v1.34.2\) must move after hop 2 \(v1.37\)"):
        plan_cycle_hop(observed, parse_version("v1.36.3"), parse_version("v1.38.1"), ["train"])
    plan = plan_cycle_hop(observed, parse_version("v1.36.3"), parse_version("v1.37.2"), ["train"])
    assert plan["holding"] == ["train"]  # 1.34 to 1.37: three minors, in policy at the end


def test_patch_upgrade_same_minor():
    plan = plan_upgrade(HEALTHY, parse_version("v1.33.7"))
    assert plan["control_plane_path"] == ["v1.33.7"]


def test_already_at_target_plans_nothing():
    observed = obs(("kube-apiserver", "cp-1", "v1.34.2"), ("kubelet", "n", "v1.34.2", "p"))
    plan = plan_upgrade(observed, parse_version("v1.34.2"))
    assert plan["control_plane_path"] == [] and plan["node_drains"] == 0


def test_mixed_control_plane_plans_from_oldest():
    observed = obs(("kube-apiserver", "cp-1", "v1.34.2"), ("kube-apiserver", "cp-2", "v1.33.5"),
                   ("kubelet", "n", "v1.33.5", "p"))
    plan = plan_upgrade(observed, parse_version("v1.34.2"))
    assert plan["control_plane_mixed"] is True
    assert plan["current"] == "v1.33.5"


def test_pool_policy_validation():
    assert parse_pool_policies({"a": {"skip_level": False}})["a"].skip_level is False
    with pytest.raises(InputError, match="pools.a.skip_level: expected a boolean"):
        parse_pool_policies({"a": {"skip_level": "no"}})
    with pytest.raises(InputError, match="unknown field"):
        parse_pool_policies({"a": {"skiplevel": True}})


@given(st.integers(25, 40), st.integers(0, 3), st.integers(1, 3), st.booleans())
def test_plan_never_leaves_a_kubelet_out_of_policy(cp_minor, behind, hops, skip):
    """Property: after every control-plane hop, every pool's kubelet is within the allowed lag and never newer."""
    kubelet_minor = cp_minor - behind
    observed = obs(("kube-apiserver", "cp", "v1.%d.0" % cp_minor), ("kubelet", "n", "v1.%d.0" % kubelet_minor, "p"))
    target = parse_version("v1.%d.0" % (cp_minor + hops))
    plan = plan_upgrade(observed, target, allow_multi_hop=True, pools={"p": PoolPolicy(skip_level=skip)})
    steps = plan["pools"][0]["steps"]
    current = kubelet_minor
    cp_minors = [cp_minor] + [parse_version(h).minor for h in plan["control_plane_path"]]
    for h in range(len(cp_minors)):
        for step in steps:
            if step["after_hop"] == h - 1 and h >= 1:
                current = parse_version(step["to"]).minor
        if h >= 1:
            allowed = 3 if current >= 25 else 2
            assert cp_minors[h] - current <= allowed
        assert current <= cp_minors[h]
    assert parse_version(steps[-1]["to"]).minor == target.minor


def test_kubeversion_str_roundtrip():
    assert str(KubeVersion(1, 34, 2)) == "v1.34.2"
    assert str(parse_version("v1.35.0-rc.1")) == "v1.35.0-rc.1"


def test_a_hop_that_would_leave_a_kubelet_more_than_three_minors_behind_is_refused():
    observed = obs(("kube-apiserver", "cp-1", "v1.35.4"), ("kubelet", "gpu-a1", "v1.32.9", "train"),
                   ("kubelet", "gpu-b1", "v1.33.1", "train"), ("kubelet", "old", "v1.23.4", "legacy"))
    plan = plan_upgrade(observed, parse_version("v1.36.3"))
    with pytest.raises(PolicyError, match=r"next hop to v1.36.3 would leave 2 kubelet\(s\) out of the skew policy "
                                          r"until their nodes move: old v1.23.4, gpu-a1 v1.32.9 \(at most 2 minors"):
        next_hop_breaches(observed, plan)
    fine = obs(("kube-apiserver", "cp-1", "v1.35.4"), ("kubelet", "gpu-b1", "v1.33.1", "train"))
    next_hop_breaches(fine, plan_upgrade(fine, parse_version("v1.36.3")))  # three behind: in policy
    next_hop_breaches(fine, plan_upgrade(fine, parse_version("v1.35.4")))  # no hop
    with pytest.raises(PolicyError, match="next hop to v1.37.2"):  # a hop given: a cycle's run
        next_hop_breaches(fine, {"control_plane_path": [], "current": "v1.35.4"}, parse_version("v1.37.2"))


@pytest.mark.parametrize("text", ["v1.3\u0666.3", "v1.36.\u0663", "\u0661.36.3", "v1.36.\uff13"])
def test_a_version_takes_ascii_digits_only(text):
    """\\d took Arabic-Indic digits (and int() read them): v1.3٦.3 was v1.36.3."""
    with pytest.raises(InputError, match="is not a Kubernetes version"):
        parse_version(text)


def test_surrounding_whitespace_is_dropped_and_never_kept():
    """A trailing newline is whitespace around the version, not part of it: callers keep the canonical form."""
    assert str(parse_version("v1.36.3\n")) == "v1.36.3" and parse_version(" 1.36.3\n").raw == "1.36.3"
    with pytest.raises(InputError):
        parse_version("v1.36.3\nv1.37.0")
