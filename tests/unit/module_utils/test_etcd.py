"""etcd: every fixture is real etcdctl/etcdutl 3.6.16 output (tests/fixtures/etcd/README.md)."""
from __future__ import annotations

import json

import pytest

from ansible_collections.gpufleet.upgrade.plugins.module_utils.errors import InputError, ParseError
from ansible_collections.gpufleet.upgrade.plugins.module_utils.etcd import (
    judge_endpoint_health, judge_endpoints, judge_snapshot, parse_endpoint_health, parse_endpoint_status,
    parse_snapshot_status)
from tests.conftest import fixture_text

STATUS_3 = "real-3.6.16-endpoint-status-3.json"  # cluster A: 21379-23379, m2 (8437276157402124310) the leader
MEMBERS_A = ["http://127.0.0.1:21379", "http://127.0.0.1:22379", "http://127.0.0.1:23379"]
MEMBERS_B = ["http://127.0.0.1:31379", "http://127.0.0.1:32379", "http://127.0.0.1:33379"]
M1, M2, M3 = 6697437022275967946, 8437276157402124310, 15879491616375115584


def test_snapshot_status_from_etcdutl():
    snap = parse_snapshot_status(fixture_text("etcd", "real-3.6.16-etcdutl-snapshot-status.json"))
    assert snap == {"hash": 478079473, "revision": 201, "total_keys": 200, "total_size": 45056, "version": "3.6.0"}
    assert judge_snapshot(snap, {"min_revision": 201, "hash": 478079473, "min_keys": 200})["passed"]


def test_snapshot_status_without_a_version_field():
    """etcdctl 3.5's snapshot status has no version field (the field removed from the real 3.6.16 capture)."""
    doc = json.loads(fixture_text("etcd", "real-3.6.16-etcdutl-snapshot-status.json"))
    del doc["version"]
    assert parse_snapshot_status(json.dumps(doc))["version"] == ""


def test_etcdctl_36_prints_its_help_for_snapshot_status():
    """etcdctl 3.6 has no `snapshot status`: it prints the snapshot command's help and exits 0."""
    with pytest.raises(ParseError) as err:
        parse_snapshot_status(fixture_text("etcd", "real-3.6.16-etcdctl-snapshot-status.txt"))
    assert str(err.value) == ("etcd snapshot status: the output is etcdctl's help for 'snapshot', not a status - "
                              "etcdctl 3.6 has no 'snapshot status'; use etcdutl snapshot status -w json")


def test_snapshot_failures():
    snap = parse_snapshot_status(fixture_text("etcd", "real-3.6.16-etcdutl-snapshot-status.json"))
    summary = judge_snapshot(snap, {"min_revision": 202, "hash": 1, "min_keys": 201}, "/backup/snap.db")
    assert summary["failures"] == [
        "/backup/snap.db: check snapshot_hash: measured 478079473, baseline 1",
        "/backup/snap.db: check snapshot_revision: measured 201, baseline >= 202 (the revision etcd had when the "
        "snapshot started)",
        "/backup/snap.db: check snapshot_keys: measured 200, baseline >= 201"]
    empty = {"hash": 0, "revision": 0, "total_keys": 0, "total_size": 0, "version": ""}
    assert [f.split(": check ")[1].split(":")[0] for f in judge_snapshot(empty, {})["failures"]] == [
        "snapshot_hash", "snapshot_revision", "snapshot_keys", "snapshot_size"]


def test_endpoint_status_ok():
    eps = parse_endpoint_status(fixture_text("etcd", STATUS_3))
    assert [(ep["endpoint"], ep["is_leader"], ep["db_size_quota"]) for ep in eps] == [
        ("http://127.0.0.1:21379", False, 2147483648), ("http://127.0.0.1:22379", True, 2147483648),
        ("http://127.0.0.1:23379", False, 2147483648)]
    summary = judge_endpoints(eps, members=MEMBERS_A)
    assert summary["passed"] and summary["failures"] == []


def test_db_over_60_percent_of_the_quota_etcd_reports():
    """Cluster C ran with --quota-backend-bytes=1048576; etcd 3.6 reports that quota, which wins over the option."""
    eps = parse_endpoint_status(fixture_text("etcd", "real-3.6.16-endpoint-status-big.json"))
    summary = judge_endpoints(eps, quota_bytes=8 * 1024 ** 3)
    assert summary["failures"] == [
        "http://127.0.0.1:31379: check etcd_db_size: measured 733184 bytes (69.9% of quota 1048576), baseline < 60% "
        "of quota (defragment or compact before upgrading)",
        "http://127.0.0.1:33379: check etcd_db_size: measured 720896 bytes (68.8% of quota 1048576), baseline < 60% "
        "of quota (defragment or compact before upgrading)",
        "http://127.0.0.1:32379: check etcd_db_size: measured 724992 bytes (69.1% of quota 1048576), baseline < 60% "
        "of quota (defragment or compact before upgrading)"]
    assert judge_endpoints(eps, max_quota_ratio=0.75)["passed"]


def test_without_a_reported_quota_the_option_or_etcds_default_is_the_quota():
    """etcd 3.5 reports no dbSizeQuota (the field removed from the real 3.6.16 capture)."""
    doc = json.loads(fixture_text("etcd", "real-3.6.16-endpoint-status-big.json"))
    for item in doc:
        del item["Status"]["dbSizeQuota"]
    eps = parse_endpoint_status(json.dumps(doc))
    assert [ep["db_size_quota"] for ep in eps] == [None, None, None]
    assert judge_endpoints(eps)["passed"]  # 733184 bytes of etcd's default 2 GiB
    assert judge_endpoints(eps, quota_bytes=1048576)["failures"][0] == (
        "http://127.0.0.1:31379: check etcd_db_size: measured 733184 bytes (69.9% of quota 1048576), baseline < 60% "
        "of quota (defragment or compact before upgrading)")


def test_a_nospace_alarm_fails_every_endpoint_that_reports_it():
    eps = parse_endpoint_status(fixture_text("etcd", "real-3.6.16-endpoint-status-alarm.json"))
    assert eps[0]["version"] == "3.6.16" and eps[0]["db_size_quota"] == 1048576
    errors = [f for f in judge_endpoints(eps, max_quota_ratio=0.95)["failures"] if "etcd_errors" in f]
    alarms = "memberID:3138776197172492667 alarm:NOSPACE ; memberID:1288682835949318716 alarm:NOSPACE "
    assert errors == ["http://127.0.0.1:%d: check etcd_errors: measured %s, baseline none" % (port, alarms)
                      for port in (31379, 33379, 32379)]


def test_no_leader_agreement():
    eps = parse_endpoint_status(fixture_text("etcd", STATUS_3))
    eps[2]["leader"] = 42
    assert judge_endpoints(eps)["failures"] == [
        "etcd cluster: check etcd_leader: measured 42, 8437276157402124310, baseline one leader, a member that "
        "answered (endpoints disagree on the leader (42, 8437276157402124310))"]


def _status(leader, members=(M1, M2, M3), cluster=None):
    doc = json.loads(fixture_text("etcd", STATUS_3))
    for item, member in zip(doc, members):
        item["Status"]["leader"] = leader
        item["Status"]["header"]["member_id"] = member
        if cluster is not None:
            item["Status"]["header"]["cluster_id"] = cluster
    return parse_endpoint_status(json.dumps(doc[:len(members)]))


def test_leader_zero_is_no_leader():
    """etcd reports leader 0 while a member knows no leader: that is not one leader (it passed as one)."""
    summary = judge_endpoints(_status(0))
    assert summary["failures"] == ["etcd cluster: check etcd_leader: measured none, baseline one leader, a member that "
                                   "answered (no endpoint knows a leader (leader 0): etcd has lost quorum or is "
                                   "electing)"]
    assert not judge_endpoints(_status("0"))["passed"] and not judge_endpoints(_status(""))["passed"]


def test_leader_must_be_a_member_that_answered():
    summary = judge_endpoints(_status(99, members=(1, 2, 3)))
    assert summary["failures"] == ["etcd cluster: check etcd_leader: measured 99, baseline one leader, a member that "
                                   "answered (leader 99 is not a member that answered (members 1, 2, 3): its status "
                                   "is unproved; give every member's endpoint)"]
    assert judge_endpoints(_status(2, members=(1, 2, 3)))["passed"]


def test_one_cluster_each_member_once():
    eps = _status(1, members=(1, 2, 3))
    eps[2]["cluster_id"] = "777"
    assert judge_endpoints(eps)["failures"] == [
        "etcd cluster: check etcd_cluster: measured cluster id(s) 16682597661514902593, 777; member ids 1, 2, 3, "
        "baseline one cluster id, a member id for each endpoint (the endpoints are not one etcd cluster)"]
    assert judge_endpoints(_status(1, members=(1, 1, 3)))["passed"]  # one member, two client URLs
    assert judge_endpoints(_status(1, members=(1, None, 3)))["failures"] == [
        "etcd cluster: check etcd_cluster: measured cluster id(s) 16682597661514902593; member ids 1, None, 3, "
        "baseline one cluster id, a member id for each endpoint (an endpoint without a member id)"]
    with pytest.raises(InputError, match="members: a list of etcd client URLs"):
        judge_endpoints(_status(1), members=[None])


def test_endpoints_must_be_the_inventory_members():
    eps = parse_endpoint_status(fixture_text("etcd", STATUS_3))
    assert judge_endpoints(eps, members=["http://127.0.0.1:21379", "http://127.0.0.1:22379/",
                                         "HTTP://127.0.0.1:23379"])["passed"]
    summary = judge_endpoints(eps, members=MEMBERS_A[:2] + ["http://127.0.0.1:24379"])
    assert summary["failures"] == [
        "etcd cluster: check etcd_members: measured http://127.0.0.1:21379, http://127.0.0.1:22379, "
        "http://127.0.0.1:23379, baseline http://127.0.0.1:21379, http://127.0.0.1:22379, http://127.0.0.1:24379 (no "
        "status from http://127.0.0.1:24379; http://127.0.0.1:23379 answered but is not an inventory member)"]
    assert judge_endpoints(eps, members=[])["failures"] == [
        "etcd cluster: check etcd_members: measured http://127.0.0.1:21379, http://127.0.0.1:22379, "
        "http://127.0.0.1:23379, baseline the inventory's members (members is empty: give every etcd member's client "
        "URL (the preflight's preflight_etcd_members))"]


def test_a_member_down_gives_no_status():
    """etcdctl endpoint status --cluster with m3 killed lists m1 and m2 only (and exits 1)."""
    eps = parse_endpoint_status(fixture_text("etcd", "real-3.6.16-endpoint-status-member-down.json"))
    assert judge_endpoints(eps, members=MEMBERS_B)["failures"] == [
        "etcd cluster: check etcd_members: measured http://127.0.0.1:31379, http://127.0.0.1:32379, baseline "
        "http://127.0.0.1:31379, http://127.0.0.1:32379, http://127.0.0.1:33379 (no status from "
        "http://127.0.0.1:33379)"]


@pytest.mark.parametrize("text,message", [
    ('{"hash": 1, "revision": 2, "totalKey": 3}', "'totalSize' missing"),
    ('{"hash": "abc", "revision": 2, "totalKey": 3, "totalSize": 4}', "not an integer"),
    ("Error: snapshot file has wrong size", "output is not JSON; it starts with 'Error: snapshot file has wrong size'"),
    ('[{"Endpoint": "x"}]', "no Status object"),
])
def test_malformed(text, message):
    with pytest.raises(ParseError, match=message):
        if text.startswith("["):
            parse_endpoint_status(text)
        else:
            parse_snapshot_status(text)


def test_ratio_validation():
    with pytest.raises(InputError, match="max_quota_ratio"):
        judge_endpoints([], max_quota_ratio=1.5)


def test_snapshot_retention_by_count_and_age_from_names_alone():
    from ansible_collections.gpufleet.upgrade.plugins.module_utils.etcd import snapshots_expired
    now = 1796083200.0  # 2026-12-01T00:00:00Z
    names = ["etcd-cell-a-20261130T100000Z-r900.db.vault", "etcd-cell-a-20261129T100000Z-r800.db.vault",
             "etcd-cell-a-20261128T100000Z-r700.db.vault", "etcd-cell-a-20261101T100000Z-r100.db.vault",
             "notes.txt", "etcd-cell-a-20261127T100000Z-r600.db.vault.part", "etcd-cell-a-yesterday-r5.db.vault"]
    # the cluster name may hold '-'; names that are not snapshot files are never removed
    assert snapshots_expired(names, 5, 14, now) == ["etcd-cell-a-20261101T100000Z-r100"]
    assert snapshots_expired(names, 2, 14, now) == ["etcd-cell-a-20261101T100000Z-r100",
                                                    "etcd-cell-a-20261128T100000Z-r700"]
    assert snapshots_expired(names, "1", "30", now) == ["etcd-cell-a-20261101T100000Z-r100",
                                                        "etcd-cell-a-20261128T100000Z-r700",
                                                        "etcd-cell-a-20261129T100000Z-r800"]
    assert snapshots_expired(names + names[:1], 1, 30, now)[-1] == "etcd-cell-a-20261129T100000Z-r800"  # listed twice
    assert snapshots_expired([], 1, 1, now) == []


@pytest.mark.parametrize("count, days, message", [(0, 14, "1 or more"), (5, 0, "1 or more"),
                                                  ("five", 14, "whole numbers"), (None, 14, "whole numbers")])
def test_snapshot_retention_refuses_settings_that_would_remove_everything(count, days, message):
    from ansible_collections.gpufleet.upgrade.plugins.module_utils.etcd import snapshots_expired
    with pytest.raises(InputError, match=message):
        snapshots_expired(["etcd-c-20261130T100000Z-r9.db.vault"], count, days, 0)


def test_real_three_members_pass_and_a_lost_quorum_fails():
    """Real etcdctl 3.6.16 output (tests/fixtures/etcd/README.md): three members with one leader pass; a member
    that lost quorum still names the dead leader (not a member that answered), later no leader at all."""
    healthy = parse_endpoint_status(fixture_text("etcd", STATUS_3))
    assert judge_endpoints(healthy, members=MEMBERS_A)["passed"]
    lost = judge_endpoints(parse_endpoint_status(fixture_text("etcd", "real-3.6.16-endpoint-status-quorum-lost.json")),
                           members=MEMBERS_A)
    assert lost["failures"] == [
        "etcd cluster: check etcd_leader: measured 8437276157402124310, baseline one leader, a member that answered "
        "(leader 8437276157402124310 is not a member that answered (members 6697437022275967946): its status is "
        "unproved; give every member's endpoint)",
        "etcd cluster: check etcd_members: measured http://127.0.0.1:21379, baseline http://127.0.0.1:21379, "
        "http://127.0.0.1:22379, http://127.0.0.1:23379 (no status from http://127.0.0.1:22379, "
        "http://127.0.0.1:23379)"]
    gone = judge_endpoints(parse_endpoint_status(fixture_text("etcd", "real-3.6.16-endpoint-status-no-leader.json")))
    assert gone["failures"] == [
        "http://127.0.0.1:21379: check etcd_errors: measured etcdserver: no leader, baseline none",
        "etcd cluster: check etcd_leader: measured none, baseline one leader, a member that answered (no endpoint "
        "knows a leader (leader 0): etcd has lost quorum or is electing)"]


# -- endpoint health -------------------------------------------------------------------------------------------
def test_endpoint_health_all_healthy():
    health = parse_endpoint_health(fixture_text("etcd", "real-3.6.16-endpoint-health-3.json"))
    assert health == [
        {"endpoint": "http://127.0.0.1:33379", "health": True, "took": "2.383348ms", "error": ""},
        {"endpoint": "http://127.0.0.1:31379", "health": True, "took": "3.348728ms", "error": ""},
        {"endpoint": "http://127.0.0.1:32379", "health": True, "took": "5.062222ms", "error": ""}]
    summary = judge_endpoint_health(health, members=MEMBERS_B)
    assert summary["passed"] and summary["failures"] == []
    assert [c["measured"] for c in summary["checks"]][:1] == ["healthy (took 2.383348ms)"]


def test_endpoint_health_names_the_member_down_and_its_error():
    health = parse_endpoint_health(fixture_text("etcd", "real-3.6.16-endpoint-health-member-down.json"))
    assert judge_endpoint_health(health, members=MEMBERS_B)["failures"] == [
        "http://127.0.0.1:33379: check etcd_health: measured unhealthy, baseline healthy (context deadline exceeded)"]


def test_endpoint_health_names_the_alarm():
    health = parse_endpoint_health(fixture_text("etcd", "real-3.6.16-endpoint-health-alarm.json"))
    assert judge_endpoint_health(health)["failures"] == [
        "http://127.0.0.1:%d: check etcd_health: measured unhealthy, baseline healthy (Active Alarm(s): NOSPACE "
        "NOSPACE )" % port for port in (33379, 32379, 31379)]


def test_endpoint_health_without_quorum_and_members_that_gave_no_report():
    health = parse_endpoint_health(fixture_text("etcd", "real-3.6.16-endpoint-health-quorum-lost.json"))
    assert judge_endpoint_health(health, members=MEMBERS_B)["failures"] == [
        "http://127.0.0.1:31379: check etcd_health: measured unhealthy, baseline healthy (context deadline exceeded)",
        "etcd cluster: check etcd_members: measured http://127.0.0.1:31379, baseline http://127.0.0.1:31379, "
        "http://127.0.0.1:32379, http://127.0.0.1:33379 (no health report from http://127.0.0.1:32379, "
        "http://127.0.0.1:33379)"]


def test_endpoint_health_refuses_what_it_does_not_know():
    with pytest.raises(ParseError) as err:  # without -w json etcdctl prints nothing on stdout...
        parse_endpoint_health("")
    assert str(err.value) == "etcdctl endpoint health: output is empty"
    with pytest.raises(ParseError) as err:  # ...and its verdicts on stderr
        parse_endpoint_health(fixture_text("etcd", "real-3.6.16-endpoint-health-alarm-simple-stderr.txt"))
    assert str(err.value) == ("etcdctl endpoint health: output is not JSON; it starts with 'http://127.0.0.1:33379 is "
                              "unhealthy: failed to commit proposal: Active Alarm(s): NOSPACE NOSPACE '")
    doc = json.loads(fixture_text("etcd", "real-3.6.16-endpoint-health-member-down.json"))
    cases = [
        ("[]", "etcdctl endpoint health: expected a JSON list of endpoints (etcdctl 3.4-3.6 with -w json), got an "
               "empty list"),
        (json.dumps(doc[0]), "etcdctl endpoint health: expected a JSON list of endpoints (etcdctl 3.4-3.6 with -w "
                             "json), got dict"),
        (json.dumps([dict(doc[0], health="true")]),
         "etcdctl endpoint health[0]: expected the fields endpoint, health, took, error of etcdctl 3.4-3.6 (endpoint "
         "text, health true or false, took and error text), found endpoint='http://127.0.0.1:32379', health='true', "
         "took='2.486739ms'"),
        (json.dumps([{"Endpoint": "http://127.0.0.1:32379", "Health": True}]),
         "etcdctl endpoint health[0]: expected the fields endpoint, health, took, error of etcdctl 3.4-3.6 (endpoint "
         "text, health true or false, took and error text), found Endpoint='http://127.0.0.1:32379', Health=True"),
        (json.dumps([dict(doc[2], health=True)]),
         "etcdctl endpoint health[0]: http://127.0.0.1:33379 says healthy but carries the error 'context deadline "
         "exceeded'"),
    ]
    for text, message in cases:
        with pytest.raises(ParseError) as err:
            parse_endpoint_health(text)
        assert str(err.value) == message
