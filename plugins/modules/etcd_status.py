#!/usr/bin/python
# Copyright: gpufleet contributors
# Apache License 2.0
from __future__ import annotations

DOCUMENTATION = r"""
module: etcd_status
short_description: Gate etcd health and quota, and verify an etcd snapshot
version_added: 0.1.0
description:
  - Reads C(etcdctl endpoint status -w json) and gates every endpoint on errors/alarms, a single agreed leader
    that is a member which answered (C(leader 0) is no leader), one cluster id, and a database size under
    O(max_quota_ratio) of the quota (C(dbSizeQuota) when etcd reports it, else O(quota_bytes)); with O(members),
    the members that answered must be exactly the inventory's.
  - With O(check_health) or O(endpoint_health_output), reads C(etcdctl endpoint health -w json) too, and every
    endpoint must be healthy (etcdctl read a key through consensus and found no alarm); an unhealthy one fails
    naming etcdctl's error, such as C(context deadline exceeded) or the NOSPACE alarm.
  - With O(snapshot_path) or O(snapshot_output), reads C(etcdutl snapshot status -w json) (or
    C(etcdctl snapshot status) where etcdutl is absent; etcdctl 3.6 has none and prints its help, which fails
    naming etcdutl) and verifies the snapshot - hash, revision, keys and size.
options:
  endpoint_status_output:
    description: Captured C(etcdctl endpoint status -w json). When omitted, etcdctl is run (unless only a snapshot is
      checked, see O(check_endpoints)).
    type: str
  check_endpoints:
    description: Gate the endpoints.
    type: bool
    default: true
  check_health:
    description:
      - Also run C(etcdctl endpoint health -w json) (with C(--cluster) when O(cluster)) and gate every endpoint on
        its health. etcdctl exits 1 when an endpoint is unhealthy and still prints each endpoint's verdict, which
        is judged; when it prints none (the member asked is down) the module fails with etcdctl's error.
    type: bool
    default: false
  endpoint_health_output:
    description: Captured C(etcdctl endpoint health -w json); gates the endpoints' health without running etcdctl.
    type: str
  endpoints:
    description: etcd endpoints for etcdctl.
    type: list
    elements: str
    default: [https://127.0.0.1:2379]
  members:
    description:
      - The client URLs of every etcd member the inventory declares; the members that answered must be exactly
        these - a member missing, or one the inventory does not know, fails.
    type: list
    elements: str
  cluster:
    description:
      - Ask the cluster for every member (C(etcdctl endpoint status --cluster)), so the leader can be proved to be
        a member that answered whichever member O(endpoints) names. Without it only O(endpoints) answer, and a
        leader among the others fails the check.
    type: bool
    default: true
  cacert:
    description: CA certificate for etcdctl.
    type: path
  cert:
    description: Client certificate for etcdctl.
    type: path
  key:
    description: Client key for etcdctl.
    type: path
  etcdctl:
    description: etcdctl binary.
    type: str
    default: etcdctl
  etcdutl:
    description: etcdutl binary, used for snapshot status when present (else etcdctl).
    type: str
    default: etcdutl
  quota_bytes:
    description: The backend quota when etcd does not report it (default etcd's own, 2 GiB).
    type: int
  max_quota_ratio:
    description: Highest allowed DB size as a fraction of the quota, at most 0.95 (default 0.6).
    type: float
  snapshot_path:
    description: Snapshot file to verify.
    type: path
  snapshot_output:
    description: Captured C(snapshot status -w json) output.
    type: str
  versions:
    description:
      - Client URL -> the etcd release the member there must run (X.Y.Z); a member that does not answer or runs
        another fails (an upgrade waits on this after each member, retrying until it passes).
    type: dict
  min_revision:
    description: Every endpoint's revision must be at least this (the revision before an upgrade began).
    type: int
  storage_version:
    description: Every endpoint must report this storage version (etcd 3.6 on; X.Y.0 - the cluster has moved to
      that minor once every member runs it).
    type: str
  kubeadm_target:
    description:
      - A Kubernetes release; returns C(kubeadm_etcd) - the etcd release that release's kubeadm installs for a
        stacked member and whether the cell runs it (C(status) runs-it, newer, older, mixed, unknown). A report,
        not a gate.
    type: str
  expect:
    description: Expectations for the snapshot.
    type: dict
    default: {}
    suboptions:
      hash:
        description: Exact hash the snapshot must have.
        type: int
      min_revision:
        description: Lowest acceptable revision (the revision before the snapshot started).
        type: int
      min_keys:
        description: Lowest acceptable key count.
        type: int
        default: 1
      min_size:
        description: Lowest acceptable size in bytes.
        type: int
        default: 1
extends_documentation_fragment:
  - gpufleet.upgrade.common.CHECK
author:
  - gpufleet maintainers (@gpufleet)
"""

EXAMPLES = r"""
- name: etcd must be healthy and under 60% of its quota
  gpufleet.upgrade.etcd_status:
    cacert: /etc/kubernetes/pki/etcd/ca.crt
    cert: /etc/kubernetes/pki/etcd/healthcheck-client.crt
    key: /etc/kubernetes/pki/etcd/healthcheck-client.key

- name: Verify the snapshot just taken
  gpufleet.upgrade.etcd_status:
    check_endpoints: false
    snapshot_path: /var/backups/etcd/snap.db
    expect:
      min_revision: "{{ gpufleet_etcd_revision_before }}"
"""

RETURN = r"""
passed:
  description: Whether every gate passed.
  returned: success
  type: bool
endpoints:
  description: Parsed endpoint status (endpoint, version, db_size, db_size_quota, leader, is_leader, errors...).
  returned: when endpoints are checked
  type: list
  elements: dict
health:
  description: Parsed endpoint health (endpoint, health, took, error).
  returned: when health is checked
  type: list
  elements: dict
kubeadm_etcd:
  description: With O(kubeadm_target) - target, kubeadm (the etcd image tag it installs), source, running (the
    releases the members report), status (runs-it, newer, older, mixed, unknown) and message.
  returned: when kubeadm_target is given
  type: dict
snapshot:
  description: Parsed snapshot status (hash, revision, total_keys, total_size, version).
  returned: when a snapshot is checked
  type: dict
checks:
  description: Every check with subject, measured value and baseline.
  returned: always
  type: list
  elements: dict
"""

from typing import Any, Dict, List

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpufleet.upgrade.plugins.module_utils import etcd_upgrade
from ansible_collections.gpufleet.upgrade.plugins.module_utils.checks import raise_if_failed, summarize
from ansible_collections.gpufleet.upgrade.plugins.module_utils.errors import GateFailed, ParseError
from ansible_collections.gpufleet.upgrade.plugins.module_utils.etcd import (
    DEFAULT_MAX_QUOTA_RATIO, endpoint_checks, health_checks, parse_endpoint_health, parse_endpoint_status,
    parse_snapshot_status, snapshot_checks)
from ansible_collections.gpufleet.upgrade.plugins.module_utils.module_support import run_module


def _tls_args(p):
    args = ["--endpoints=" + ",".join(p["endpoints"])]
    for opt in ("cacert", "cert", "key"):
        if p[opt]:
            args.append("--%s=%s" % (opt, p[opt]))
    return args


def _run_health(module: Any, p: Dict[str, Any]) -> List[Dict[str, Any]]:
    """etcdctl endpoint health: exit 1 with every endpoint's verdict on stdout is a result to judge; exit 1 with
    none (the member asked for the cluster's list is down) is etcdctl's error, and the gate fails with it."""
    rc, out, err = module.run_command(
        [module.get_bin_path(p["etcdctl"], required=True)] + _tls_args(p) +
        ["endpoint", "health", "-w", "json"] + (["--cluster"] if p["cluster"] else []))
    try:
        health = parse_endpoint_health(out)
    except ParseError:
        if rc == 0:
            raise
        lines = [line for line in err.strip().splitlines() if not line.startswith("{")]  # not etcdctl's zap log
        raise GateFailed("etcdctl endpoint health exited %d: %s" % (rc, (" ".join(lines) or err.strip())[-1000:]),
                         rc=rc)
    if rc != 0 and all(ep["health"] for ep in health):
        raise GateFailed("etcdctl endpoint health exited %d although every endpoint reports healthy: %s" % (
            rc, err.strip()[-1000:]), rc=rc, health=health)
    return health


def main():
    module = AnsibleModule(
        argument_spec=dict(
            endpoint_status_output=dict(type="str"),
            check_endpoints=dict(type="bool", default=True),
            check_health=dict(type="bool", default=False),
            endpoint_health_output=dict(type="str"),
            endpoints=dict(type="list", elements="str", default=["https://127.0.0.1:2379"]),
            members=dict(type="list", elements="str"),
            cluster=dict(type="bool", default=True),
            cacert=dict(type="path"), cert=dict(type="path"), key=dict(type="path", no_log=False),
            etcdctl=dict(type="str", default="etcdctl"),
            etcdutl=dict(type="str", default="etcdutl"),
            quota_bytes=dict(type="int"),
            max_quota_ratio=dict(type="float"),
            snapshot_path=dict(type="path"),
            snapshot_output=dict(type="str"),
            versions=dict(type="dict"),
            min_revision=dict(type="int"),
            storage_version=dict(type="str"),
            kubeadm_target=dict(type="str"),
            expect=dict(type="dict", default={}, options=dict(
                hash=dict(type="int"), min_revision=dict(type="int"),
                min_keys=dict(type="int", default=1, no_log=False),
                min_size=dict(type="int", default=1))),
        ),
        mutually_exclusive=[("snapshot_path", "snapshot_output")],
        supports_check_mode=True,
    )

    def body():
        p = module.params
        result = {"passed": True}
        checks = []
        if p["check_endpoints"]:
            text = p["endpoint_status_output"]
            if text is None:
                # endpoint status only reads; it runs in check mode too.
                rc, text, err = module.run_command(
                    [module.get_bin_path(p["etcdctl"], required=True)] + _tls_args(p) +
                    ["endpoint", "status", "-w", "json"] + (["--cluster"] if p["cluster"] else []))
                if rc != 0:
                    module.fail_json(msg="etcdctl endpoint status exited %d: %s" % (rc, err.strip()), rc=rc)
            endpoints = parse_endpoint_status(text)
            checks.extend(endpoint_checks(endpoints, p["quota_bytes"], p["max_quota_ratio"] or DEFAULT_MAX_QUOTA_RATIO,
                                          p["members"]))
            if p["versions"] or p["min_revision"] is not None or p["storage_version"]:
                checks.extend(etcd_upgrade.member_checks(endpoints, p["versions"] or {}, p["min_revision"],
                                                         p["storage_version"] or ""))
            if p["kubeadm_target"]:
                result["kubeadm_etcd"] = etcd_upgrade.kubeadm_etcd(p["kubeadm_target"], endpoints)
            result["endpoints"] = endpoints
        if p["check_health"] or p["endpoint_health_output"] is not None:
            text = p["endpoint_health_output"]
            if text is None:
                result["health"] = _run_health(module, p)
            else:
                result["health"] = parse_endpoint_health(text)
            checks.extend(health_checks(result["health"], p["members"]))
        if p["snapshot_path"] or p["snapshot_output"] is not None:
            text = p["snapshot_output"]
            if text is None:
                tool = module.get_bin_path(p["etcdutl"]) or module.get_bin_path(p["etcdctl"], required=True)
                rc, text, err = module.run_command([tool, "snapshot", "status", p["snapshot_path"], "-w", "json"])
                if rc != 0:
                    module.fail_json(msg="%s snapshot status %s exited %d: %s" % (
                        tool, p["snapshot_path"], rc, err.strip()), rc=rc)
            snapshot = parse_snapshot_status(text)
            checks.extend(snapshot_checks(snapshot, p["expect"], p["snapshot_path"] or "snapshot"))
            result["snapshot"] = snapshot
        summary = summarize(checks)
        raise_if_failed("etcd_status", summary, **{k: v for k, v in result.items() if k != "passed"})
        result["checks"] = summary["checks"]
        return result

    run_module(module, body)


if __name__ == "__main__":
    main()
