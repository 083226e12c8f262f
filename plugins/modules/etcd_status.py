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
  - With O(snapshot_path) or O(snapshot_output), reads C(etcdutl snapshot status -w json) (or
    C(etcdctl snapshot status) where etcdutl is absent) and verifies the snapshot - hash, revision, keys and size.
options:
  endpoint_status_output:
    description: Captured C(etcdctl endpoint status -w json). When omitted, etcdctl is run (unless only a snapshot is
      checked, see O(check_endpoints)).
    type: str
  check_endpoints:
    description: Gate the endpoints.
    type: bool
    default: true
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

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpufleet.upgrade.plugins.module_utils.checks import raise_if_failed, summarize
from ansible_collections.gpufleet.upgrade.plugins.module_utils.etcd import (
    DEFAULT_MAX_QUOTA_RATIO, endpoint_checks, parse_endpoint_status, parse_snapshot_status, snapshot_checks)
from ansible_collections.gpufleet.upgrade.plugins.module_utils.module_support import run_module


def _tls_args(p):
    args = ["--endpoints=" + ",".join(p["endpoints"])]
    for opt in ("cacert", "cert", "key"):
        if p[opt]:
            args.append("--%s=%s" % (opt, p[opt]))
    return args


def main():
    module = AnsibleModule(
        argument_spec=dict(
            endpoint_status_output=dict(type="str"),
            check_endpoints=dict(type="bool", default=True),
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
            result["endpoints"] = endpoints
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
