"""etcd in its own window: a member read from kubeadm's real etcd manifest and moved by its image line alone, the
plan's order and refusals against real `etcdctl endpoint status --cluster` output, the after-member checks, and the
etcd release kubeadm installs, checked against the real kubeadm binaries' image lists."""
import copy
import json

import pytest

from ansible_collections.gpufleet.upgrade.plugins.module_utils import etcd_upgrade
from ansible_collections.gpufleet.upgrade.plugins.module_utils.data_releases import KUBEADM_ETCD
from ansible_collections.gpufleet.upgrade.plugins.module_utils.errors import GpufleetError, InputError
from ansible_collections.gpufleet.upgrade.plugins.module_utils.etcd import parse_endpoint_status
from tests.conftest import fixture_text

KUBEADM_MANIFEST = fixture_text("kubeadm", "real-1.36.3-manifest-etcd.yaml")
STATUS = parse_endpoint_status(fixture_text("etcd", "real-3.6.16-endpoint-status-3.json"))
URLS = {"m1": "http://127.0.0.1:21379", "m2": "http://127.0.0.1:22379", "m3": "http://127.0.0.1:23379"}  # m2 leads


def members(version="3.6.16", **overrides):
    out = {}
    for host, url in URLS.items():
        out[host] = {"name": host, "client_urls": [url], "version": overrides.get(host, version)}
    return out


def test_kubeadm_etcd_table_is_what_the_real_kubeadm_binaries_list():
    for minor, (image_tag, kubeadm) in KUBEADM_ETCD.items():
        listed = fixture_text("kubeadm", "real-%s-config-images-list.txt" % kubeadm.lstrip("v")).split()
        assert "registry.k8s.io/etcd:%s" % image_tag in listed, minor
        assert kubeadm.startswith("v%s." % minor)


def test_a_member_is_read_from_kubeadms_manifest_and_moved_by_its_image_line_alone():
    member = etcd_upgrade.read_member(KUBEADM_MANIFEST, "cp-1: etcd.yaml")
    assert member["name"] == "cp-1" and member["version"] == "3.6.8" and member["tag"] == "3.6.8-0"
    assert member["client_urls"] == ["https://10.0.0.10:2379"] and member["data_dir"] == "/var/lib/etcd"
    assert member["stacked"] is True  # kubeadm's own local etcd: its annotation
    bare = KUBEADM_MANIFEST.replace("  annotations:\n    kubeadm.kubernetes.io/etcd.advertise-client-urls: "
                                    "https://10.0.0.10:2379\n", "")
    assert bare != KUBEADM_MANIFEST and etcd_upgrade.read_member(bare)["stacked"] is False
    image = etcd_upgrade.image_for(member, "v3.7.3")
    assert image == "registry.k8s.io/etcd:3.7.3-0"
    new, old = etcd_upgrade.set_image(KUBEADM_MANIFEST, image)
    assert old == "registry.k8s.io/etcd:3.6.8-0"
    changed = [(a, b) for a, b in zip(KUBEADM_MANIFEST.splitlines(), new.splitlines()) if a != b]
    assert changed == [("    image: registry.k8s.io/etcd:3.6.8-0", "    image: registry.k8s.io/etcd:3.7.3-0")]
    assert etcd_upgrade.read_member(new)["version"] == "3.7.3"
    assert etcd_upgrade.set_image(new, image) == (new, image)  # a rerun changes nothing
    # a mirror's image, given whole; its tag must be the release
    assert etcd_upgrade.image_for(member, "3.7.3", "mirror.example/etcd:3.7.3-0") == "mirror.example/etcd:3.7.3-0"
    with pytest.raises(InputError, match="etcd_upgrade_image: .* with the tag of etcd 3.7.3"):
        etcd_upgrade.image_for(member, "3.7.3", "mirror.example/etcd:3.6.8-0")
    # other registries tag etcd vX.Y.Z or X.Y.Z: the member's own form is kept
    assert etcd_upgrade.image_for(dict(member, repository="quay.io/coreos/etcd", tag="v3.6.8"),
                                  "3.7.3") == "quay.io/coreos/etcd:v3.7.3"
    assert etcd_upgrade.image_for(dict(member, repository="gcr.io/etcd-development/etcd", tag="3.6.8"),
                                  "3.7.3") == "gcr.io/etcd-development/etcd:3.7.3"


@pytest.mark.parametrize("text, why", [
    (KUBEADM_MANIFEST.replace("name: etcd\n", "name: kv\n"), "no container named etcd"),
    (KUBEADM_MANIFEST.replace("image: registry.k8s.io/etcd:3.6.8-0", "image: registry.k8s.io/etcd"), "has no tag"),
    (KUBEADM_MANIFEST.replace("    - --name=cp-1\n", ""), "has no --name"),
    (KUBEADM_MANIFEST.replace("etcd:3.6.8-0", "etcd:latest"), "not an etcd release"),
    ("<html>502</html>", "cp-1"),
])
def test_a_manifest_that_is_not_a_member_fails_naming_the_host(text, why):
    with pytest.raises(GpufleetError, match=why):
        etcd_upgrade.read_member(text, "cp-1: /etc/kubernetes/manifests/etcd.yaml")


def test_an_image_named_on_two_lines_is_refused_not_half_rewritten():
    twice = KUBEADM_MANIFEST.replace("spec:\n", "spec:\n  initContainers:\n  - name: check\n"
                                     "    image: registry.k8s.io/etcd:3.6.8-0\n", 1)
    assert etcd_upgrade.read_member(twice)["version"] == "3.6.8"
    with pytest.raises(InputError, match="2 lines name the image registry.k8s.io/etcd:3.6.8-0"):
        etcd_upgrade.set_image(twice, "registry.k8s.io/etcd:3.7.3-0")


def test_plan_moves_followers_first_and_the_leader_last():
    plan = etcd_upgrade.plan("3.7.3", members(), STATUS)
    assert plan["order"] == ["m1", "m3", "m2"] and plan["leader"] == "m2" and plan["done"] == []
    assert plan["minor_step"] is True and plan["running"] == {h: "3.6.16" for h in URLS}
    assert plan["wait_for"]["m3"] == {URLS["m3"]: "3.7.3"}
    assert plan["all_at_target"] == {u: "3.7.3" for u in URLS.values()}
    assert plan["revision"] == 1 and plan["storage_version"] == "3.7.0" and plan["stacked"] == []
    stacked = members()
    stacked["m3"]["stacked"] = True
    assert etcd_upgrade.plan("3.7.3", stacked, STATUS)["stacked"] == ["m3"]
    # a patch release: no minor step
    assert etcd_upgrade.plan("3.6.17", members(), STATUS)["minor_step"] is False


def test_a_rerun_goes_on_from_the_first_member_not_there():
    status = copy.deepcopy(STATUS)
    status[0]["version"] = "3.7.3"  # m1 moved; m3's manifest was written but it has not come back yet
    plan = etcd_upgrade.plan("3.7.3", members(m1="3.7.3", m3="3.7.3"), status)
    assert plan["order"] == ["m3", "m2"] and plan["done"] == ["m1"]


@pytest.mark.parametrize("change, why", [
    (lambda m, s: s.__setitem__(1, dict(s[1], version="3.7.3")), "m2 runs etcd 3.7.3, newer than"),
    (lambda m, s: [ep.__setitem__("version", "3.5.21") for ep in s], "one minor at a time"),
    (lambda m, s: s.pop(2), "m3: its member m3 .* did not answer"),
    (lambda m, s: m.pop("m3"), "are not in the inventory's etcd group"),
    (lambda m, s: s[0].__setitem__("is_learner", True), "m1: its member is a learner"),
    (lambda m, s: s[0].__setitem__("version", ""), "m1: the version its member reports"),
    (lambda m, s: s[0].__setitem__("downgrade_enabled", True), "an etcd downgrade is in progress"),
    (lambda m, s: m["m3"].__setitem__("client_urls", [URLS["m1"]]), "m1 and m3 both advertise"),
    (lambda m, s: s[2].__setitem__("member_id", s[0]["member_id"]), "m1 and m3 answer as the same etcd member"),
    (lambda m, s: [ep.__setitem__("version", "3.7.3") for ep in s], "runs etcd 3.7.3 but its manifest names"),
])
def test_plan_refuses_naming_the_host_and_the_fix(change, why):
    m, s = members(), copy.deepcopy(STATUS)
    change(m, s)
    with pytest.raises(InputError, match=why):
        etcd_upgrade.plan("3.6.20" if "newer" in why else "3.7.3", m, s)


def test_a_step_to_36_needs_every_member_on_a_late_35_patch():
    early = [dict(ep, version="3.5.19") for ep in STATUS]
    with pytest.raises(InputError, match="m1 runs etcd 3.5.19: before etcd 3.6 every member must run 3.5.20 or later"):
        etcd_upgrade.plan("3.6.16", members("3.5.19"), early)
    late = [dict(ep, version="3.5.21") for ep in STATUS]
    assert etcd_upgrade.plan("3.6.16", members("3.5.21"), late)["order"] == ["m1", "m3", "m2"]


def test_plan_refuses_while_the_control_plane_moves():
    pods = [{"spec": {"containers": [{"name": "kube-apiserver", "image": "registry.k8s.io/kube-apiserver:%s" % v}]}}
            for v in ("v1.35.4", "v1.36.3", "v1.36.3")]
    with pytest.raises(InputError, match="the control plane is mid-upgrade .kube-apiserver runs v1.35.4, v1.36.3"):
        etcd_upgrade.plan("3.7.3", members(), STATUS, pods)
    assert etcd_upgrade.plan("3.7.3", members(), STATUS, pods[1:])["order"]


def test_members_come_from_the_registered_loop_and_a_failed_reading_is_refused():
    readings = [{"host": h, "member": m} for h, m in members().items()]
    assert etcd_upgrade.members_of(readings) == members()
    with pytest.raises(InputError, match=r"members\[1\]: not a reading"):
        etcd_upgrade.members_of([readings[0], {"failed": True, "msg": "no such file"}])


def test_after_a_member_its_release_and_the_revision_are_checked():
    checks = etcd_upgrade.member_checks(STATUS, {URLS["m1"]: "3.6.16"}, min_revision=1)
    assert all(c.passed for c in checks) and len(checks) == 4
    (late,) = etcd_upgrade.member_checks(STATUS, {URLS["m1"]: "3.7.3"})
    assert not late.passed and late.measured == "3.6.16" and "has not come back on 3.7.3" in late.detail
    (gone,) = etcd_upgrade.member_checks(STATUS[1:], {URLS["m1"]: "3.7.3"})
    assert not gone.passed and gone.measured == "no answer"
    moved = parse_endpoint_status(fixture_text("etcd", "real-3.7.3-endpoint-status-3.json"))
    stored = etcd_upgrade.member_checks(moved, {}, storage_version="3.7.0")
    assert [c.passed for c in stored] == [True] * 3
    old = etcd_upgrade.member_checks(STATUS, {}, storage_version="3.7.0")  # before the cluster moved
    assert [c.measured for c in old] == ["3.6.0"] * 3 and not any(c.passed for c in old)
    back = etcd_upgrade.member_checks(STATUS, {}, min_revision=5)
    assert [c.passed for c in back] == [False] * 3 and "went back" in back[0].detail


@pytest.mark.parametrize("target, versions, status", [
    ("v1.36.3", ["3.6.16"] * 3, "runs-it"),
    ("v1.36.3", ["3.7.3"] * 3, "newer"),
    ("v1.37.2", ["3.6.16"] * 3, "older"),
    ("v1.37.2", ["3.6.16", "3.7.3", "3.7.3"], "mixed"),
    ("v1.36.3", ["3.6.15", "3.6.16", "3.6.16"], "runs-it"),  # patches apart: not an unfinished window
    ("v1.39.0", ["3.7.3"] * 3, "unknown"),
    ("v1.36.3", [""] * 3, "unknown"),
])
def test_the_release_kubeadm_installs_against_what_the_members_run(target, versions, status):
    endpoints = [dict(ep, version=v) for ep, v in zip(STATUS, versions)]
    out = etcd_upgrade.kubeadm_etcd(target, endpoints)
    assert out["status"] == status, out
    if status == "older":
        assert "older than the 3.7.0-0 kubeadm v1.37.2 installs" in out["message"]
        assert "playbooks/etcd_upgrade.yml" in out["message"]
    assert json.dumps(out)  # plain data for the report
