from __future__ import annotations

import json

import pytest

from ansible_collections.gpufleet.upgrade.plugins.module_utils.errors import InputError, ParseError
from ansible_collections.gpufleet.upgrade.plugins.module_utils.etcd import (
    judge_endpoints, judge_snapshot, parse_endpoint_status, parse_snapshot_status)
from tests.conftest import fixture_text


@pytest.mark.parametrize("name", ["snapshot-status.json", "snapshot-status-etcdutl36.json"])
def test_snapshot_status(name):
    snap = parse_snapshot_status(fixture_text("etcd", name))
    assert snap["hash"] == 3842719201 and snap["revision"] == 1048213 and snap["total_keys"] == 8421
    assert judge_snapshot(snap, {"min_revision": 1048000, "hash": 3842719201})["passed"]


def test_snapshot_failures():
    snap = parse_snapshot_status(fixture_text("etcd", "snapshot-status.json"))
    summary = judge_snapshot(snap, {"min_revision": 1048999, "hash": 1}, "/backup/snap.db")
    assert summary["failures"] == [
        "/backup/snap.db: check snapshot_hash: measured 3842719201, baseline 1",
        "/backup/snap.db: check snapshot_revision: measured 1048213, baseline >= 1048999 (the revision etcd had when "
        "the snapshot started)"]
    empty = {"hash": 0, "revision": 0, "total_keys": 0, "total_size": 0, "version": ""}
    assert len(judge_snapshot(empty, {})["failures"]) == 4


def test_endpoint_status_ok():
    eps = parse_endpoint_status(fixture_text("etcd", "endpoint-status-ok.json"))
    assert len(eps) == 3 and eps[0]["is_leader"] and not eps[1]["is_leader"]
    assert judge_endpoints(eps)["passed"]


def test_db_over_60_percent():
    eps = parse_endpoint_status(fixture_text("etcd", "endpoint-status-big.json"))
    summary = judge_endpoints(eps)
    assert len(summary["failures"]) == 3
    assert summary["failures"][0] == ("https://10.0.0.11:2379: check etcd_db_size: measured 1503238553 bytes (70.0% of "
                                      "quota 2147483648), baseline < 60% of quota (defragment or compact before "
                                      "upgrading)")
    assert judge_endpoints(eps, quota_bytes=8 * 1024 ** 3)["passed"]


def test_reported_quota_and_alarm_36():
    eps = parse_endpoint_status(fixture_text("etcd", "endpoint-status-alarm-36.json"))
    assert eps[0]["db_size_quota"] == 8589934592
    summary = judge_endpoints(eps, quota_bytes=1)  # the reported quota wins over the option
    assert summary["failures"] == ["https://10.0.0.12:2379: check etcd_errors: measured memberID:10276657743932975438 "
                                   "alarm:NOSPACE , baseline none"]


def test_no_leader_agreement():
    eps = parse_endpoint_status(fixture_text("etcd", "endpoint-status-ok.json"))
    eps[2]["leader"] = 42
    assert judge_endpoints(eps)["failures"] == [
        "etcd cluster: check etcd_leader: measured 10276657743932975437, 42, baseline one leader, a member that "
        "answered (endpoints disagree on the leader (10276657743932975437, 42))"]


def _status(leader, members=(10276657743932975437, 10276657743932975438, 10276657743932975439), cluster=None):
    doc = json.loads(fixture_text("etcd", "endpoint-status-ok.json"))
    for item, member in zip(doc, members):
        item["Status"]["leader"] = leader
        item["Status"]["header"]["member_id"] = member
        if cluster is not None:
            item["Status"]["header"]["cluster_id"] = cluster
    return parse_endpoint_status(json.dumps(doc[:len(members)]))


def test_leader_zero_is_no_leader():
    """etcd reports leader 0 while a member knows no leader: that is not one leader (it passed as one)."""
    summary = judge_endpoints(_status(0))
    assert not summary["passed"]
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
    assert "the endpoints are not one etcd cluster" in judge_endpoints(eps)["failures"][0]
    assert judge_endpoints(_status(1, members=(1, 1, 3)))["passed"]  # one member, two client URLs
    assert "an endpoint without a member id" in judge_endpoints(_status(1, members=(1, None, 3)))["failures"][0]
    with pytest.raises(InputError, match="members: a list of etcd client URLs"):
        judge_endpoints(_status(1), members=[None])


def test_endpoints_must_be_the_inventory_members():
    eps = parse_endpoint_status(fixture_text("etcd", "endpoint-status-ok.json"))
    members = ["https://10.0.0.11:2379", "https://10.0.0.12:2379/", "HTTPS://10.0.0.13:2379"]
    assert judge_endpoints(eps, members=members)["passed"]
    summary = judge_endpoints(eps, members=members[:2] + ["https://10.0.0.14:2379"])
    assert summary["failures"] == [
        "etcd cluster: check etcd_members: measured https://10.0.0.11:2379, https://10.0.0.12:2379, "
        "https://10.0.0.13:2379, baseline https://10.0.0.11:2379, https://10.0.0.12:2379, https://10.0.0.14:2379 (no "
        "status from https://10.0.0.14:2379; https://10.0.0.13:2379 answered but is not an inventory member)"]
    assert not judge_endpoints(eps, members=[])["passed"]


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
    members = ["http://127.0.0.1:21379", "http://127.0.0.1:22379", "http://127.0.0.1:23379"]
    healthy = parse_endpoint_status(fixture_text("etcd", "real-3.6.16-endpoint-status-3.json"))
    assert judge_endpoints(healthy, members=members)["passed"]
    lost = judge_endpoints(parse_endpoint_status(fixture_text("etcd", "real-3.6.16-endpoint-status-quorum-lost.json")),
                           members=members)
    assert any("leader 8437276157402124310 is not a member that answered" in f for f in lost["failures"])
    assert any("no status from http://127.0.0.1:22379, http://127.0.0.1:23379" in f for f in lost["failures"])
    gone = judge_endpoints(parse_endpoint_status(fixture_text("etcd", "real-3.6.16-endpoint-status-no-leader.json")))
    assert sorted(f.split(": check ")[1].split(":")[0] for f in gone["failures"]) == ["etcd_errors", "etcd_leader"]
