from __future__ import annotations

import pytest

from ansible_collections.gpufleet.upgrade.plugins.module_utils.errors import GateFailed, ParseError
from ansible_collections.gpufleet.upgrade.plugins.module_utils.kubeadm_plan import judge_plan, parse_plan
from tests.conftest import fixture_text


def test_current_text_layout():
    plan = parse_plan(fixture_text("kubeadm", "plan-1.34-text.txt"))
    assert plan["format"] == "text" and plan["available"]
    (upgrade,) = plan["upgrades"]
    assert upgrade["description"] == "stable version"
    assert upgrade["target_version"] == "v1.34.2"
    assert upgrade["apply_command"] == "kubeadm upgrade apply v1.34.2"
    assert upgrade["kubeadm_required"] is None
    kubelets = [c for c in upgrade["components"] if c["name"] == "kubelet"]
    assert [(k["node"], k["current"]) for k in kubelets][-1] == ("gpu-b1", "v1.33.4")
    assert len(kubelets) == 5
    proxy = next(c for c in upgrade["components"] if c["name"] == "kube-proxy")
    assert proxy == {"name": "kube-proxy", "node": "", "current": "1.33.5", "target": "v1.34.2", "count": 1}
    assert sum(1 for c in upgrade["components"] if c["name"] == "etcd") == 3
    assert [c["group"] for c in plan["config_versions"]] == ["kubeproxy.config.k8s.io", "kubelet.config.k8s.io"]
    assert plan["manual_config_upgrades"] == []


def test_note_and_manual_config_upgrade():
    plan = parse_plan(fixture_text("kubeadm", "plan-1.34-note-manual.txt"))
    assert plan["upgrades"][0]["kubeadm_required"] == "v1.34.2"
    assert plan["manual_config_upgrades"] == ["kubeproxy.config.k8s.io"]
    with pytest.raises(GateFailed, match="kubeproxy.config.k8s.io need a manual upgrade"):
        judge_plan(plan, "v1.34.2", node="cp-1")
    verdict = judge_plan(plan, "v1.34.2", allow_manual_config_upgrade=True)
    assert verdict["needs_upgrade"] and verdict["upgrade"]["target_version"] == "v1.34.2"


def test_legacy_grouped_layout():
    plan = parse_plan(fixture_text("kubeadm", "plan-1.27-legacy.txt"))
    assert plan["format"] == "legacy-text"
    upgrade = plan["upgrades"][0]
    assert upgrade["description"] == "version in the v1.27 series"
    kubelets = [c for c in upgrade["components"] if c["name"] == "kubelet"]
    assert [(k["current"], k["count"]) for k in kubelets] == [("v1.26.0", 2), ("v1.26.1", 1)]
    assert all(k["node"] == "" for k in kubelets)
    assert upgrade["target_version"] == "v1.27.1"


def test_two_offers_pick_the_target():
    plan = parse_plan(fixture_text("kubeadm", "plan-two-offers.txt"))
    assert plan["offered_versions"] == ["v1.33.5", "v1.34.2"]
    assert judge_plan(plan, "v1.34.2")["upgrade"]["description"] == "stable version"
    assert judge_plan(plan, "v1.33.5")["upgrade"]["description"] == "version in the v1.33 series"
    with pytest.raises(GateFailed, match="does not offer v1.35.0; it offers v1.33.5, v1.34.2"):
        judge_plan(plan, "v1.35.0", node="cp-1")


@pytest.mark.parametrize("name", ["plan-1.34.json", "plan-1.34.yaml"])
def test_structured(name):
    plan = parse_plan(fixture_text("kubeadm", name))
    assert plan["format"] == "json" and plan["api_version"] == "output.kubeadm.k8s.io/v1alpha3"
    upgrade = plan["upgrades"][0]
    assert upgrade["target_version"] == "v1.34.2"
    assert upgrade["kubeadm_required"] == "v1.34.2"  # kubeadm component current v1.33.5 < new
    assert ("gpu-a1", "v1.33.5") in [(c["node"], c["current"]) for c in upgrade["components"] if c["name"] == "kubelet"]


def test_structured_no_upgrade():
    plan = parse_plan(fixture_text("kubeadm", "plan-none.json"))
    assert not plan["available"]
    assert judge_plan(plan, "v1.34.2") == {"upgrade": None, "needs_upgrade": False}


@pytest.mark.parametrize("text", ["", "   \n", None])
def test_empty_means_no_upgrade(text):
    plan = parse_plan(text)
    assert plan["format"] == "empty" and plan["available"] is False


@pytest.mark.parametrize("text,message", [
    ("error execution phase preflight: [preflight] Some fatal errors occurred", "none of the expected sections"),
    ('{"kind": "UpgradePlan", "availableUpgrades": [', "not valid JSON"),
    ('{"kind": "Pod"}', "kind is 'Pod'"),
])
def test_malformed(text, message):
    with pytest.raises(ParseError, match=message):
        parse_plan(text)


def test_truncated_text_is_a_clear_error():
    full = fixture_text("kubeadm", "plan-1.34-text.txt")
    cut = full[: full.index("Upgrade to the latest stable version:") + len("Upgrade to the latest stable version:\n\n")]
    with pytest.raises(ParseError, match="expected a COMPONENT header"):
        parse_plan(cut)
    cut2 = full[: full.index("kube-scheduler")]
    with pytest.raises(ParseError, match="no target version"):
        # the table is cut and the apply command never came; only control-plane rows before scheduler remain
        parse_plan(cut2.replace("kube-apiserver", "kube-apiserverX"))


def test_an_empty_plan_fails_when_the_control_plane_is_not_at_the_target():
    with pytest.raises(GateFailed, match="does not offer v1.34.2; it offers nothing"):
        judge_plan(parse_plan(""), "v1.34.2", required=True)


def test_a_component_the_cluster_does_not_run_yet_has_an_empty_current():
    """kubeadm v1.36 text with no CoreDNS installed and external etcd: the CoreDNS row has empty NODE and CURRENT
    cells. The fixture is the layout of kubeadm's printUpgradePlan written through Go's text/tabwriter with
    kubeadm's settings (minwidth 10, tabwidth 4, padding 3, spaces)."""
    text = fixture_text("kubeadm", "plan-1.36-no-coredns.txt")
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
    text = fixture_text("kubeadm", "plan-1.36-no-coredns.txt")
    line = next(row for row in text.splitlines() if row.startswith("kubelet     gpu-a1"))
    (upgrade,) = parse_plan(text.replace(line, "kubelet  10.0.0.5  v1.35.4  v1.36.3"))["upgrades"]
    kubelet = [c for c in upgrade["components"] if c["name"] == "kubelet"][-1]
    assert (kubelet["node"], kubelet["current"], kubelet["target"]) == ("10.0.0.5", "v1.35.4", "v1.36.3")
    squeezed = text.replace(next(row for row in text.splitlines() if row.startswith("CoreDNS")), "CoreDNS    v1.14.2")
    coredns = next(c for c in parse_plan(squeezed)["upgrades"][0]["components"] if c["name"] == "CoreDNS")
    assert (coredns["node"], coredns["current"], coredns["target"]) == ("", "", "v1.14.2")
    no_current = text.replace("cp-1      v1.35.4   v1.36.3", "cp-1                v1.36.3", 1)
    with pytest.raises(ParseError, match="malformed manual-components row at line 3: 'kubelet"):
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
    with pytest.raises(ParseError, match="none of the expected sections"):
        parse_plan(cut)
    with pytest.raises(ParseError, match="none of the expected sections"):
        parse_plan(text + "error: something else\n")


def test_real_older_kubeadm_offers_the_target_named_with_kubeadm_to_update_first():
    plan = parse_plan(fixture_text("kubeadm", "real-1.35.4-plan-v1.36.3.json"))
    assert plan["upgrades"][0]["kubeadm_required"] == "v1.36.3"
