"""kubeadm upgrade plan: fixtures are the real kubeadm's output (real-*), kubeadm's own printer tests (upstream-*)
or, where neither exists, synthetic-* (tests/fixtures/kubeadm/README.md)."""
from __future__ import annotations

import json

import pytest

from ansible_collections.gpufleet.upgrade.plugins.module_utils.errors import GateFailed, ParseError
from ansible_collections.gpufleet.upgrade.plugins.module_utils.kubeadm_plan import (
    LAYOUTS, judge_plan, parse_plan, unstable_flag)
from tests.conftest import fixture_text

MULTI = "upstream-1.36.3-plan_test-multiple-kubelets.txt"


def _rows(upgrade, name):
    return [(c["node"], c["current"], c["target"], c["count"]) for c in upgrade["components"] if c["name"] == name]


def test_current_text_layout():
    plan = parse_plan(fixture_text("kubeadm", MULTI))
    assert plan["format"] == "text" and plan["available"] and plan["offered_versions"] == ["v1.19.3"]
    (upgrade,) = plan["upgrades"]
    assert upgrade["description"] == "version in the v1.19 series"
    assert upgrade["target_version"] == "v1.19.3"
    assert upgrade["apply_command"] == "kubeadm upgrade apply v1.19.3"
    assert upgrade["kubeadm_required"] == "v1.19.3"
    assert _rows(upgrade, "kubelet") == [("node1", "v1.19.2", "v1.19.3", 1), ("node2", "v1.19.3", "v1.19.3", 1),
                                         ("node3", "v1.19.3", "v1.19.3", 1)]
    assert [c["name"] for c in upgrade["components"]] == [
        "kubelet", "kubelet", "kubelet", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kube-proxy",
        "CoreDNS", "etcd"]
    assert _rows(upgrade, "kube-proxy") == [("", "v1.19.2", "v1.19.3", 1)]
    assert _rows(upgrade, "CoreDNS") == [("", "1.7.0", "1.7.0", 1)]
    assert _rows(upgrade, "etcd") == [("node1", "3.4.7-0", "3.4.7-0", 1)]
    assert plan["config_versions"] == [
        {"group": "kubeproxy.config.k8s.io", "current": "v1alpha1", "preferred": "v1alpha1",
         "manual_upgrade_required": False},
        {"group": "kubelet.config.k8s.io", "current": "v1beta1", "preferred": "v1beta1",
         "manual_upgrade_required": False}]
    assert plan["manual_config_upgrades"] == []


def test_note_and_manual_config_upgrade():
    plan = parse_plan(fixture_text("kubeadm", "synthetic-plan-1.34-manual-config.txt"))
    assert plan["upgrades"][0]["kubeadm_required"] == "v1.34.2"
    assert plan["manual_config_upgrades"] == ["kubeproxy.config.k8s.io"]
    with pytest.raises(GateFailed, match="kubeproxy.config.k8s.io need a manual upgrade"):
        judge_plan(plan, "v1.34.2", node="cp-1")
    verdict = judge_plan(plan, "v1.34.2", allow_manual_config_upgrade=True)
    assert verdict["needs_upgrade"] and verdict["upgrade"]["target_version"] == "v1.34.2"


def test_legacy_grouped_layout():
    """kubeadm before 1.31 (kubeadm's printer test, tests/fixtures/kubeadm/README.md): no NODE column, kubelets
    grouped by version, the second group's COMPONENT cell blank."""
    plan = parse_plan(fixture_text("kubeadm", "upstream-grouped-plan_test-multiple-kubelets.txt"))
    assert plan["format"] == "legacy-text" and plan["config_versions"] == []
    (upgrade,) = plan["upgrades"]
    assert upgrade["description"] == "version in the v1.19 series"
    assert _rows(upgrade, "kubelet") == [("", "v1.19.2", "v1.19.3", 1), ("", "v1.19.3", "v1.19.3", 2)]
    assert _rows(upgrade, "etcd") == [("", "3.4.7-0", "3.4.7-0", 1)]
    assert (upgrade["target_version"], upgrade["apply_command"], upgrade["kubeadm_required"]) == (
        "v1.19.3", "kubeadm upgrade apply v1.19.3", "v1.19.3")
    external = parse_plan(fixture_text("kubeadm", "upstream-grouped-plan_test-external-etcd.txt"))["upgrades"][0]
    assert [c["name"] for c in external["components"]] == [
        "kubelet", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kube-proxy", "CoreDNS"]


def test_two_offers_pick_the_target():
    plan = parse_plan(fixture_text("kubeadm", "upstream-1.36.3-plan_test-two-offers.txt"))
    assert plan["offered_versions"] == ["v1.18.5", "v1.19.0"]
    assert [u["kubeadm_required"] for u in plan["upgrades"]] == [None, "v1.19.0"]
    assert judge_plan(plan, "v1.19.0")["upgrade"]["description"] == "stable version"
    assert judge_plan(plan, "v1.18.5")["upgrade"]["description"] == "version in the v1.18 series"
    with pytest.raises(GateFailed, match="does not offer v1.20.0; it offers v1.18.5, v1.19.0"):
        judge_plan(plan, "v1.20.0", node="cp-1")


@pytest.mark.parametrize("name, description, command", [
    ("upstream-1.36.3-plan_test-release-candidate.txt", "release candidate version",
     "kubeadm upgrade apply v1.19.0-rc.1 --allow-release-candidate-upgrades"),
    ("upstream-1.36.3-plan_test-experimental.txt", "experimental version",
     "kubeadm upgrade apply v1.19.0-beta.1 --allow-experimental-upgrades"),
])
def test_a_pre_release_target_keeps_the_flag_kubeadm_prints(name, description, command):
    """kubeadm appends --allow-release-candidate-upgrades or --allow-experimental-upgrades to the command for a
    pre-release target; the apply command was lost when the line carried a flag."""
    (upgrade,) = parse_plan(fixture_text("kubeadm", name))["upgrades"]
    target = command.split()[3]
    assert (upgrade["description"], upgrade["target_version"], upgrade["apply_command"]) == (
        description, target, command)
    assert upgrade["kubeadm_required"] == target
    assert judge_plan(parse_plan(fixture_text("kubeadm", name)), target)["upgrade"]["apply_command"] == command


def test_structured_output_words_the_apply_command_as_kubeadm_prints_it():
    doc = json.loads(fixture_text("kubeadm", "upstream-1.36.3-plan_test-structured.json"))
    for comp in doc["availableUpgrades"][0]["components"]:
        if comp["name"] == "kube-apiserver":
            comp["newVersion"] = "v1.8.3-rc.1"
    (upgrade,) = parse_plan(json.dumps(doc))["upgrades"]
    assert upgrade["apply_command"] == "kubeadm upgrade apply v1.8.3-rc.1 --allow-release-candidate-upgrades"
    assert [unstable_flag(v) for v in ("v1.36.0-alpha.2", "v1.36.0-rc.0", "v1.36.3", "1.36.0-beta.0")] == [
        " --allow-experimental-upgrades", " --allow-release-candidate-upgrades", "",
        " --allow-experimental-upgrades"]


@pytest.mark.parametrize("flags", [" -y --etcd-upgrade=false", " --certificate-renewal=false --patches=/etc/p"])
def test_documented_apply_flags_are_kept_and_others_refused(flags):
    text = fixture_text("kubeadm", MULTI).replace("kubeadm upgrade apply v1.19.3", "kubeadm upgrade apply v1.19.3"
                                                                                    + flags)
    assert parse_plan(text)["upgrades"][0]["apply_command"] == "kubeadm upgrade apply v1.19.3" + flags
    bad = fixture_text("kubeadm", MULTI).replace("kubeadm upgrade apply v1.19.3", "kubeadm upgrade apply v1.19.3 "
                                                                                   "--yolo")
    with pytest.raises(ParseError, match="the apply command at line 19 carries '--yolo', which is not a kubeadm "
                                         "upgrade apply flag"):
        parse_plan(bad)


def test_the_older_heading_wording_still_reads_the_kubelet_table():
    """kubeadm 1.7-1.10 worded the heading "after you've upgraded"; the table under it was skipped and its kubelet
    rows vanished from the plan."""
    text = fixture_text("kubeadm", MULTI).replace("after you have upgraded", "after you've upgraded")
    (upgrade,) = parse_plan(text)["upgrades"]
    assert [row[0] for row in _rows(upgrade, "kubelet")] == ["node1", "node2", "node3"]


def test_an_unknown_heading_or_table_is_an_error_naming_the_line():
    text = fixture_text("kubeadm", MULTI)
    renamed = text.replace("Components that must be upgraded manually after you have upgraded the control plane "
                           "with 'kubeadm upgrade apply':", "Components to upgrade by hand:")
    with pytest.raises(ParseError) as err:
        parse_plan(renamed)
    assert str(err.value) == (
        "kubeadm upgrade plan: expected a kubeadm upgrade plan section ('Components that must be upgraded manually "
        "...', 'Upgrade to the latest ...:' or the component config table) at line 1, found 'Components to upgrade "
        "by hand:'; the layouts understood are " + LAYOUTS)
    stray = text.replace("\nUpgrade to the latest",
                         "\nkubelet     node4     v1.19.1   v1.19.3\n\nUpgrade to the latest")
    with pytest.raises(ParseError, match="expected 'Upgrade to the latest <description>:' after the kubelet table at "
                                         "line 7, found 'kubelet     node4     v1.19.1   v1.19.3'"):
        parse_plan(stray)  # a row after the table's end
    trailing = text + "Components that must be upgraded manually: none\n"
    with pytest.raises(ParseError, match="expected the end of the output at line 36, found 'Components that must be "
                                         "upgraded manually: none'"):
        parse_plan(trailing)


def test_kubeadm_before_1_19_prints_a_layout_that_is_refused_by_name():
    """kubeadm's printer test at kubernetes/kubernetes b20d3b6: AVAILABLE columns and display names."""
    with pytest.raises(ParseError) as err:
        parse_plan(fixture_text("kubeadm", "upstream-1.9-plan_test-available-columns.txt"))
    assert str(err.value) == (
        "kubeadm upgrade plan: expected the kubelet table's header COMPONENT [NODE] CURRENT TARGET at line 2, found "
        "'COMPONENT   CURRENT      AVAILABLE'; the layouts understood are " + LAYOUTS)


@pytest.mark.parametrize("name", ["upstream-1.36.3-plan_test-structured.json",
                                  "upstream-1.36.3-plan_test-structured.yaml"])
def test_structured(name):
    plan = parse_plan(fixture_text("kubeadm", name))
    assert plan["format"] == "json" and plan["api_version"] == "output.kubeadm.k8s.io/v1alpha3"
    (upgrade,) = plan["upgrades"]
    assert (upgrade["description"], upgrade["target_version"], upgrade["apply_command"]) == (
        "version in the v1.8 series", "v1.8.3", "kubeadm upgrade apply v1.8.3")
    assert upgrade["kubeadm_required"] == "v1.8.3"  # the kubeadm component: current v1.8.2 < new v1.8.3
    assert [(c["name"], c["node"], c["current"]) for c in upgrade["components"]] == [
        ("kubelet", "node1", "v1.8.1"), ("kube-apiserver", "node1", "v1.8.1"),
        ("kube-controller-manager", "node1", "v1.8.1"), ("kube-scheduler", "node1", "v1.8.1"),
        ("kube-proxy", "", "v1.8.1"), ("CoreDNS", "", "1.14.5"), ("kubeadm", "", "v1.8.2"), ("etcd", "node1", "3.0.17")]
    assert plan["manual_config_upgrades"] == [] and len(plan["config_versions"]) == 2


def test_the_older_structured_api_is_refused_not_read_as_no_upgrade():
    """kubeadm's v1alpha2 UpgradePlan has no availableUpgrades: read as v1alpha3 it said "no upgrade available"."""
    with pytest.raises(ParseError) as err:
        parse_plan(fixture_text("kubeadm", "upstream-grouped-plan_test-structured-v1alpha2.json"))
    assert str(err.value) == ("kubeadm upgrade plan: apiVersion is 'output.kubeadm.k8s.io/v1alpha2'; only "
                              "output.kubeadm.k8s.io/v1alpha3 (kubeadm 1.31+) is understood - give the text output "
                              "of an older kubeadm")
    doc = json.loads(fixture_text("kubeadm", "upstream-1.36.3-plan_test-structured.json"))
    doc["availableUpgrades"][0]["components"] = [c for c in doc["availableUpgrades"][0]["components"]
                                                 if c["name"] != "kube-apiserver"]
    with pytest.raises(ParseError, match=r"availableUpgrades\[0\] has no kube-apiserver component with a version as "
                                         r"its newVersion \(found None\)"):
        parse_plan(json.dumps(doc))


def test_structured_no_upgrade():
    plan = parse_plan(fixture_text("kubeadm", "synthetic-plan-none.json"))
    assert not plan["available"] and plan["upgrades"] == []
    assert judge_plan(plan, "v1.34.2") == {"upgrade": None, "needs_upgrade": False}


@pytest.mark.parametrize("text", ["", "   \n", None])
def test_empty_means_no_upgrade(text):
    plan = parse_plan(text)
    assert plan["format"] == "empty" and plan["available"] is False


@pytest.mark.parametrize("text,message", [
    ("error execution phase preflight: [preflight] Some fatal errors occurred",
     "expected a kubeadm upgrade plan section .* at line 1, found 'error execution phase preflight"),
    ('{"kind": "UpgradePlan", "availableUpgrades": [', "not valid JSON"),
    ('{"kind": "Pod"}', "kind is 'Pod'"),
])
def test_malformed(text, message):
    with pytest.raises(ParseError, match=message):
        parse_plan(text)


def test_truncated_text_is_a_clear_error():
    full = fixture_text("kubeadm", MULTI)
    heading = "Upgrade to the latest version in the v1.19 series:\n\n"
    with pytest.raises(ParseError, match="expected the upgrade table's header COMPONENT \\[NODE\\] CURRENT TARGET at "
                                         "line 9, found the end of the output"):
        parse_plan(full[:full.index(heading) + len(heading)])
    with pytest.raises(ParseError, match="expected 'You can now apply the upgrade by executing the following "
                                         "command:' at line 12, found the end of the output"):
        parse_plan(full[:full.index("kube-scheduler")])
    with pytest.raises(ParseError, match="the rule of underscores that closes the upgrade 'version in the v1.19 "
                                         "series' at line 21, found the end"):
        parse_plan(full[:full.index("Note:")])
    with pytest.raises(ParseError, match="expected the rule of underscores that closes the component config table "
                                         "\\(a table cut short may hide a config that needs a manual upgrade\\) at "
                                         "line 34, found the end of the output"):
        parse_plan(full[:full.rindex("\n_____") + 1])
    with pytest.raises(ParseError, match="the table for 'version in the v1.19 series' lists 'kube-apiserverX', which "
                                         "is none of kube-apiserver, "):
        parse_plan(full.replace("kube-apiserver ", "kube-apiserverX"))


def test_a_config_table_row_must_say_yes_or_no():
    text = fixture_text("kubeadm", MULTI).replace("v1beta1             no", "v1beta1             -")
    with pytest.raises(ParseError, match="malformed component config row at line 33: 'kubelet.config.k8s.io .*' "
                                         "\\(MANUAL UPGRADE REQUIRED must be yes or no\\)"):
        parse_plan(text)


def test_an_empty_plan_fails_when_the_control_plane_is_not_at_the_target():
    with pytest.raises(GateFailed, match="does not offer v1.34.2; it offers nothing"):
        judge_plan(parse_plan(""), "v1.34.2", required=True)


def test_a_component_the_cluster_does_not_run_yet_has_an_empty_current():
    """kubeadm v1.36 text with no CoreDNS installed and external etcd: the CoreDNS row has empty NODE and CURRENT
    cells. SYNTHETIC: kubeadm's printUpgradePlan layout written through Go's text/tabwriter with kubeadm's settings
    (minwidth 10, tabwidth 4, padding 3, spaces)."""
    text = fixture_text("kubeadm", "synthetic-plan-1.36-no-coredns.txt")
    (upgrade,) = parse_plan(text)["upgrades"]
    coredns = next(c for c in upgrade["components"] if c["name"] == "CoreDNS")
    assert coredns == {"name": "CoreDNS", "node": "", "current": "", "target": "v1.14.2", "count": 1}
    assert upgrade["target_version"] == "v1.36.3" and not any(c["name"] == "etcd" for c in upgrade["components"])
    assert [c["node"] for c in upgrade["components"] if c["name"] == "kubelet"] == ["cp-1", "cp-2", "cp-3", "gpu-a1"]
    # the same row with its empty cells written without padding is read by words
    squeezed = text.replace(next(line for line in text.splitlines() if line.startswith("CoreDNS")),
                            "CoreDNS    v1.14.2")
    (upgrade,) = parse_plan(squeezed)["upgrades"]
    assert next(c for c in upgrade["components"] if c["name"] == "CoreDNS")["current"] == ""
    # a row without a target is still an error naming it
    broken = text.replace("   v1.14.2", "   ")
    with pytest.raises(ParseError, match="malformed upgrade row at line 21: 'CoreDNS"):
        parse_plan(broken)


def test_the_word_reading_takes_an_ip_named_node_as_a_node_and_a_control_plane_row_needs_its_current():
    text = fixture_text("kubeadm", "synthetic-plan-1.36-no-coredns.txt")
    line = next(row for row in text.splitlines() if row.startswith("kubelet     gpu-a1"))
    (upgrade,) = parse_plan(text.replace(line, "kubelet  10.0.0.5  v1.35.4  v1.36.3"))["upgrades"]
    kubelet = [c for c in upgrade["components"] if c["name"] == "kubelet"][-1]
    assert (kubelet["node"], kubelet["current"], kubelet["target"]) == ("10.0.0.5", "v1.35.4", "v1.36.3")
    squeezed = text.replace(next(row for row in text.splitlines() if row.startswith("CoreDNS")), "CoreDNS    v1.14.2")
    coredns = next(c for c in parse_plan(squeezed)["upgrades"][0]["components"] if c["name"] == "CoreDNS")
    assert (coredns["node"], coredns["current"], coredns["target"]) == ("", "", "v1.14.2")
    no_current = text.replace("cp-1      v1.35.4   v1.36.3", "cp-1                v1.36.3", 1)
    with pytest.raises(ParseError, match="malformed kubelet row at line 3: 'kubelet"):
        parse_plan(no_current)


@pytest.mark.parametrize("name", ["real-1.36.3-plan.txt", "real-1.36.3-plan.json", "real-1.36.3-plan.yaml"])
def test_real_kubeadm_output_in_every_format_reads_the_same(name):
    """Printed by the real kubeadm v1.36.3 against a lab cell at v1.35.4 (tests/fixtures/kubeadm/README.md)."""
    plan = parse_plan(fixture_text("kubeadm", name))
    verdict = judge_plan(plan, "v1.36.3", node="cp-1", required=True)
    assert verdict["needs_upgrade"] and verdict["upgrade"]["apply_command"] == "kubeadm upgrade apply v1.36.3"
    rows = {(c["name"], c["node"]): (c["current"], c["target"]) for c in verdict["upgrade"]["components"]}
    assert rows[("kubelet", "gpu-b1")] == ("v1.35.4", "v1.36.3")
    assert rows[("kube-apiserver", "cp-1")] == ("v1.35.4", "v1.36.3")
    assert rows[("CoreDNS", "")] == ("v1.12.1", "v1.14.2") and rows[("kube-proxy", "")][0].lstrip("v") == "1.35.4"
    assert not any(name == "etcd" for name, _node in rows)  # external etcd: kubeadm does not manage it


def test_real_kubeadm_progress_alone_is_no_upgrade_and_anything_else_stays_an_error():
    text = fixture_text("kubeadm", "real-1.35.4-plan-none.txt")
    plan = parse_plan(text)
    assert plan["available"] is False and plan["format"] == "text"
    assert judge_plan(plan, "v1.35.4") == {"upgrade": None, "needs_upgrade": False}
    with pytest.raises(GateFailed):
        judge_plan(plan, "v1.36.3", required=True)
    cut = text[:text.index("[upgrade/versions]")]  # stopped before comparing versions: not "no upgrade"
    with pytest.raises(ParseError, match="none of the expected sections .* stops before kubeadm's "
                                         "'\\[upgrade/versions\\] Target version:' line"):
        parse_plan(cut)
    with pytest.raises(ParseError, match="at line 11, found 'error: something else'"):
        parse_plan(text + "error: something else\n")


def test_real_older_kubeadm_offers_the_target_named_with_kubeadm_to_update_first():
    plan = parse_plan(fixture_text("kubeadm", "real-1.35.4-plan-v1.36.3.json"))
    assert plan["upgrades"][0]["kubeadm_required"] == "v1.36.3"
