"""etcd_status reading `etcdctl endpoint health -w json` (real etcdctl 3.6.16 output, tests/fixtures/etcd/README.md):
the command line run, an unhealthy endpoint judged from the list etcdctl prints while exiting 1, and etcdctl's own
error when it prints no list."""
from __future__ import annotations

from ansible_collections.gpufleet.upgrade.plugins.modules import etcd_status
from tests.conftest import fixture_text

MEMBERS = ["http://127.0.0.1:31379", "http://127.0.0.1:32379", "http://127.0.0.1:33379"]
STDERR_DOWN = ('{"level":"warn","ts":"2026-12-05T16:41:07.647517Z","logger":"client","msg":"retrying of unary invoker '
               'failed"}\nError: unhealthy cluster\n')


def test_healthy_cluster_passes_and_runs_etcdctl_endpoint_health_with_cluster(run):
    out = run(etcd_status, {"check_endpoints": False, "check_health": True, "members": MEMBERS,
                            "endpoints": ["http://127.0.0.1:31379"]},
              {"--endpoints=http://127.0.0.1:31379 endpoint health": (
                  0, fixture_text("etcd", "real-3.6.16-endpoint-health-3.json"), "")})
    assert not out.failed and out.result["passed"]
    assert out.result["_calls"] == [["/usr/bin/etcdctl", "--endpoints=http://127.0.0.1:31379", "endpoint", "health",
                                     "-w", "json", "--cluster"]]
    assert [ep["endpoint"] for ep in out.result["health"]] == [
        "http://127.0.0.1:33379", "http://127.0.0.1:31379", "http://127.0.0.1:32379"]


def test_an_unhealthy_member_fails_naming_etcdctls_error_though_etcdctl_exits_1(run):
    out = run(etcd_status, {"check_endpoints": False, "check_health": True, "members": MEMBERS},
              {"--endpoints=https://127.0.0.1:2379 endpoint health": (
                  1, fixture_text("etcd", "real-3.6.16-endpoint-health-member-down.json"), STDERR_DOWN)})
    assert out.failed
    assert out.result["msg"] == ("etcd_status gate failed: http://127.0.0.1:33379: check etcd_health: measured "
                                 "unhealthy, baseline healthy (context deadline exceeded)")


def test_no_list_at_all_is_etcdctls_error(run):
    stderr = ('{"level":"warn","msg":"retrying of unary invoker failed"}\nError: failed to fetch endpoints from etcd '
              'cluster member list: context deadline exceeded\n')
    out = run(etcd_status, {"check_endpoints": False, "check_health": True},
              {"--endpoints=https://127.0.0.1:2379 endpoint health": (1, "", stderr)})
    assert out.failed and out.result["rc"] == 1 and out.result["error_type"] == "GateFailed"
    assert out.result["msg"] == ("etcdctl endpoint health exited 1: Error: failed to fetch endpoints from etcd "
                                 "cluster member list: context deadline exceeded")
    odd = run(etcd_status, {"check_endpoints": False, "check_health": True},
              {"--endpoints=https://127.0.0.1:2379 endpoint health": (
                  1, fixture_text("etcd", "real-3.6.16-endpoint-health-3.json"), "Error: unhealthy cluster\n")})
    assert odd.failed and odd.result["error_type"] == "GateFailed"
    assert odd.result["msg"] == ("etcdctl endpoint health exited 1 although every endpoint reports healthy: Error: "
                                 "unhealthy cluster")


def test_captured_health_output_with_the_alarm(run):
    out = run(etcd_status, {"check_endpoints": False,
                            "endpoint_health_output": fixture_text("etcd", "real-3.6.16-endpoint-health-alarm.json")})
    assert out.failed and out.result["_calls"] == []
    assert out.result["msg"].startswith("etcd_status gate failed: http://127.0.0.1:33379: check etcd_health: measured "
                                        "unhealthy, baseline healthy (Active Alarm(s): NOSPACE NOSPACE )")


def test_health_is_not_checked_unless_asked(run):
    out = run(etcd_status, {"endpoint_status_output": fixture_text("etcd", "real-3.6.16-endpoint-status-3.json")})
    assert not out.failed and "health" not in out.result and out.result["_calls"] == []
