#!/usr/bin/python
# Copyright: gpufleet contributors
# Apache License 2.0
from __future__ import annotations

DOCUMENTATION = r"""
module: audit_callers
short_description: Read who called a deprecated Kubernetes API from a control-plane host's audit log
version_added: 0.2.0
description:
  - Runs on a control-plane host. Reads the audit log its kube-apiserver static pod manifest names
    (C(--audit-log-path), as kubeadm writes it from the ClusterConfiguration's C(apiServer.extraArgs)) and the
    backups the apiserver rotated beside it (C(.gz) when compressed), and returns one row per API, user, user agent,
    namespace and verb of every request the apiserver annotated C(k8s.io/deprecated) within O(lookback_hours),
    with the C(k8s.io/removed-release) annotation, the count (each request once, by its C(auditID)) and the last
    time.
  - Fails closed, naming the host - auditing off in the manifest, a log that is missing, holds no event, is not
    JSON lines of C(audit.k8s.io/v1) Events, or was rotated past the lookback (its oldest event is younger than
    the lookback while the apiserver kept as many backups as C(--audit-log-maxbackup) allows, or older than
    C(--audit-log-maxage)) - is a failure, or with O(fail_on_error) false an C(error) for
    M(gpufleet.upgrade.removed_apis) to report as a blocker.
  - M(gpufleet.upgrade.removed_apis) judges the rows against the target (O(gpufleet.upgrade.removed_apis#module:audit)).
options:
  host:
    description: The host's name in the report (its inventory name).
    type: str
    required: true
  manifest:
    description: The host's kube-apiserver static pod manifest, where the audit flags are read.
    type: path
    default: /etc/kubernetes/manifests/kube-apiserver.yaml
  lookback_hours:
    description: How far back calls count (the cell's C(gpufleet_audit_lookback_hours)).
    type: int
    default: 168
  fail_on_error:
    description: Fail when the log cannot answer; false returns the reason in C(error) instead.
    type: bool
    default: true
extends_documentation_fragment:
  - gpufleet.upgrade.common.CHECK
author:
  - gpufleet maintainers (@gpufleet)
"""

EXAMPLES = r"""
- name: Read who called a deprecated API in the last week on each control-plane host
  gpufleet.upgrade.audit_callers:
    host: "{{ inventory_hostname }}"
    lookback_hours: 168
  become: true
  register: audit
"""

RETURN = r"""
host:
  description: The host read (its inventory name).
  returned: always
  type: str
log:
  description: The audit log's path (from the manifest).
  returned: success
  type: str
files:
  description: The files read, oldest first (the backups, then the current log).
  returned: success
  type: list
  elements: str
events_from:
  description: The time of the oldest event kept (RFC 3339, UTC).
  returned: success
  type: str
since:
  description: The start of the lookback (RFC 3339, UTC).
  returned: success
  type: str
callers:
  description:
    - One row per API, caller, namespace and verb - api_version, resource, subresource, removed_release (C("")
      when the API has no removal planned), user, user_agent, namespace, verb, count, last (RFC 3339, UTC).
  returned: success
  type: list
  elements: dict
truncated:
  description: Rows left out past the 500 kept.
  returned: success
  type: int
error:
  description: Why the log could not answer (with O(fail_on_error) false).
  returned: when the log could not answer
  type: str
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpufleet.upgrade.plugins.module_utils import audit_callers
from ansible_collections.gpufleet.upgrade.plugins.module_utils.errors import InputError
from ansible_collections.gpufleet.upgrade.plugins.module_utils.module_support import run_module
from ansible_collections.gpufleet.upgrade.plugins.module_utils.textparse import read_file


def main():
    module = AnsibleModule(
        argument_spec=dict(
            host=dict(type="str", required=True),
            manifest=dict(type="path", default=audit_callers.MANIFEST),
            lookback_hours=dict(type="int", default=168),
            fail_on_error=dict(type="bool", default=True),
        ),
        supports_check_mode=True,
    )

    def body():
        p = module.params
        try:
            if not 1 <= p["lookback_hours"] <= audit_callers.MAX_LOOKBACK_HOURS:
                raise InputError("lookback_hours: expected 1 to %d, got %d" % (
                    audit_callers.MAX_LOOKBACK_HOURS, p["lookback_hours"]))
            flags = audit_callers.audit_flags(read_file(p["manifest"], "%s: kube-apiserver manifest" % p["host"]),
                                              "%s: %s" % (p["host"], p["manifest"]))
            return audit_callers.read_host(p["host"], flags, p["lookback_hours"], audit_callers.utcnow())
        except InputError as exc:
            if p["fail_on_error"]:
                raise
            return {"host": p["host"], "error": exc.msg, "callers": []}

    run_module(module, body)


if __name__ == "__main__":
    main()
